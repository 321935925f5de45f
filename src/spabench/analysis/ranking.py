"""A Bradley-Terry ranking with ties (Davidson 1970) from same-scene pairs: secondary to the rates.

Every shared evaluation (comparisons.SHARED_KEY) that two policies both ran is one comparison: a
win for the policy that succeeded where the other failed, a tie when both succeeded or both failed.
Davidson's model: P(i beats j) = pi_i / D, P(tie) = nu sqrt(pi_i pi_j) / D, with
D = pi_i + pi_j + nu sqrt(pi_i pi_j). Fitted by its fixed-point (MM-type) iteration, every
bootstrap replicate at once in numpy. Half a virtual tie per compared pair keeps a policy that never
wins finite. Intervals: percentile bootstrap that resamples shared evaluations (the scenes)
with replacement; an evaluation's outcome pattern across policies is the resampled unit, so the
pairs of one scene stay together.

The ranking summarises many conditions with unequal difficulty into one scale; the per-condition
rates remain the primary result.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from spabench.analysis.comparisons import shared_outcomes
from spabench.analysis.bootstrap import contrast_rng

RANKING_COLUMNS: tuple[str, ...] = (
    "rank", "policy", "strength", "ci_low", "ci_high", "rank_low", "rank_high", "wins", "losses", "ties",
    "comparisons",
)
PRIOR_TIES = 0.5
ITERATIONS = 300


def _counts(patterns: np.ndarray, weights: np.ndarray):
    """Wins W[b, i, j] (i succeeded, j failed) and ties T[b, i, j] for each weight row b."""
    success = np.nan_to_num(patterns, nan=0.0)
    failure = np.where(np.isnan(patterns), 0.0, 1.0 - patterns)
    present = (~np.isnan(patterns)).astype(float)
    wins = np.einsum("bp,pi,pj->bij", weights, success, failure)
    ties = np.einsum("bp,pi,pj->bij", weights, success, success) + np.einsum("bp,pi,pj->bij", weights, failure, failure)
    compared = np.einsum("bp,pi,pj->bij", weights, present, present)
    return wins, ties, compared


def fit_davidson(wins: np.ndarray, ties: np.ndarray, iterations: int = ITERATIONS):
    """Log-strengths (centred, shape [B, k]) and tie parameters nu [B] from W[b,i,j] and T[b,i,j]
    (T symmetric, zero diagonal). Pairs never compared carry no information."""
    k = wins.shape[-1]
    eye = np.eye(k, dtype=bool)
    wins = np.where(eye, 0.0, wins)
    ties = np.where(eye, 0.0, ties)
    compared = wins + np.swapaxes(wins, -1, -2) + ties
    ties = ties + PRIOR_TIES * (compared > 0)
    n = wins + np.swapaxes(wins, -1, -2) + ties
    score = wins.sum(-1) + ties.sum(-1) / 2  # W_i + T_i / 2
    total_ties = ties.sum((-1, -2)) / 2
    pi = np.ones(wins.shape[:-1])
    nu = np.ones(wins.shape[0])
    for _ in range(iterations):
        root = np.sqrt(pi[..., :, None] * pi[..., None, :])
        d = pi[..., :, None] + pi[..., None, :] + nu[:, None, None] * root
        ratio = np.sqrt(pi[..., None, :] / pi[..., :, None])
        denominator = (n * (1 + 0.5 * nu[:, None, None] * ratio) / d).sum(-1)
        new = np.where(denominator > 0, score / np.where(denominator > 0, denominator, 1), pi)
        new = new / np.exp(np.log(new).mean(-1, keepdims=True))
        nu = total_ties / np.maximum((n * root / d).sum((-1, -2)) / 2, 1e-300)
        if np.allclose(new, pi, rtol=1e-10, atol=0):
            pi = new
            break
        pi = new
    return np.log(pi), nu


def bradley_terry_ranking(outcomes: pd.DataFrame, n_resamples: int = 1000, seed: int = 0,
                          alpha: float = 0.05) -> tuple[pd.DataFrame, float]:
    """The ranking table (RANKING_COLUMNS, best first) and the fitted tie parameter nu."""
    wide = shared_outcomes(outcomes)
    if wide.shape[1] < 2:
        return pd.DataFrame(columns=list(RANKING_COLUMNS)), float("nan")
    values = wide.to_numpy(dtype=float)
    values = values[(~np.isnan(values)).sum(1) >= 2]  # an evaluation only one policy ran compares nothing
    if len(values) == 0:
        return pd.DataFrame(columns=list(RANKING_COLUMNS)), float("nan")
    policies = list(wide.columns)
    codes = np.where(np.isnan(values), 2, values).astype(int) @ (3 ** np.arange(values.shape[1]))
    unique, first, frequency = np.unique(codes, return_index=True, return_counts=True)
    patterns = values[first]
    rng = contrast_rng(seed, "bradley_terry")
    weights = np.vstack([frequency, rng.multinomial(len(values), frequency / len(values), size=n_resamples)])
    wins, ties, compared = _counts(patterns, weights.astype(float))
    strength, nu = fit_davidson(wins, ties)
    point, replicates = strength[0], strength[1:]
    ranks = np.argsort(np.argsort(-replicates, axis=1), axis=1) + 1
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2], axis=0)
    rank_low, rank_high = np.quantile(ranks, [alpha / 2, 1 - alpha / 2], axis=0)
    order = np.argsort(-point, kind="stable")
    rows = []
    for place, i in enumerate(order, start=1):
        rows.append((place, policies[i], float(point[i]), float(low[i]), float(high[i]), int(rank_low[i]),
                     int(rank_high[i]), int(wins[0, i].sum()), int(wins[0, :, i].sum()),
                     int(ties[0, i].sum() - ties[0, i, i]), int(compared[0, i].sum() - compared[0, i, i])))
    return pd.DataFrame(rows, columns=list(RANKING_COLUMNS)), float(nu[0])
