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
    """Wins W[b, i, j] (i succeeded, j failed), ties T[b, i, j] and comparisons C[b, i, j] for each
    row b of integer pattern weights: one integer matrix product with every pattern's pair tables
    (exact, and free of BLAS threads)."""
    success = np.nan_to_num(patterns, nan=0.0).astype(np.int64)
    failure = np.where(np.isnan(patterns), 0, 1 - np.nan_to_num(patterns)).astype(np.int64)
    present = (~np.isnan(patterns)).astype(np.int64)
    p, k = patterns.shape

    def pair(first, second):
        return (first[:, :, None] * second[:, None, :]).reshape(p, k * k)

    tables = np.hstack([pair(success, failure), pair(success, success) + pair(failure, failure),
                        pair(present, present)])
    counts = (np.asarray(weights, dtype=np.int64) @ tables).astype(float).reshape(-1, 3, k, k)
    return counts[:, 0], counts[:, 1], counts[:, 2]


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
    # the iteration runs on [k, k, B] arrays (replicates last, contiguous: a few times faster for a
    # handful of policies) and in s = sqrt(pi), where sqrt(pi_i pi_j) = s_i s_j and
    # sum_j q_ij sqrt(pi_j / pi_i) = (q s)_i / s_i: one quotient q = n / D serves both updates
    n = np.ascontiguousarray(np.moveaxis(n, 0, -1))
    score = np.ascontiguousarray(score.T)
    pi = np.ones(score.shape)
    nu = np.ones(score.shape[1])
    q = np.empty(n.shape)
    for _ in range(iterations):
        s = np.sqrt(pi)
        np.multiply(s[:, None, :], s[None, :, :], out=q)
        q *= nu
        q += pi[:, None, :]
        q += pi[None, :, :]                                      # D_ij
        np.divide(n, q, out=q)
        qs = np.einsum("ijb,jb->ib", q, s)
        denominator = q.sum(1) + 0.5 * nu * qs / s
        new = np.where(denominator > 0, score / np.where(denominator > 0, denominator, 1), pi)
        new /= np.exp(np.log(new).mean(0))
        nu = total_ties / np.maximum((s * qs).sum(0) / 2, 1e-300)
        converged = bool(np.all(np.abs(new - pi) <= 1e-10 * np.abs(pi)))  # np.allclose(rtol=1e-10, atol=0)
        pi = new
        if converged:
            break
    return np.log(pi.T), nu


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
    wins, ties, compared = _counts(patterns, weights)
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
