"""Rater agreement where attempts were scored twice: Cohen's kappa with a bootstrap interval.

For every pair of raters with shared attempts: kappa on the binary success score (all shared
attempts) and on the failure mode (attempts both raters scored as failures; 'unannotated' is a
category). kappa = (p_o - p_e) / (1 - p_e) from the raters' cross-table. Interval: percentile
bootstrap over attempts, drawn as multinomial resamples of the cross-table (equivalent to
resampling attempts, and exact to compute); a replicate whose p_e is 1 is skipped.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from spabench.analysis.bootstrap import contrast_rng

AGREEMENT_COLUMNS: tuple[str, ...] = (
    "rater_a", "rater_b", "score", "n", "observed_agreement", "kappa", "ci_low", "ci_high",
)
RATINGS_COLUMNS: tuple[str, ...] = ("attempt_id", "rater", "success", "failure_mode")


def _kappa(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each k x k count table in `tables` [..., k, k] (NaN when p_e = 1)."""
    n = tables.sum((-1, -2))
    p = tables / np.where(n > 0, n, 1)[..., None, None]
    observed = np.trace(p, axis1=-2, axis2=-1)
    expected = (p.sum(-1) * p.sum(-2)).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected < 1 - 1e-12, (observed - expected) / (1 - expected), np.nan)


def cohen_kappa(first, second, n_resamples: int = 2000, rng: np.random.Generator | None = None,
                alpha: float = 0.05) -> tuple[float, float, float, float]:
    """(observed agreement, kappa, ci_low, ci_high) for two raters' labels of the same items."""
    first, second = np.asarray(first, dtype=object), np.asarray(second, dtype=object)
    categories = sorted(set(first) | set(second), key=str)
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    np.add.at(table, ([index[v] for v in first], [index[v] for v in second]), 1)
    n = int(table.sum())
    observed = float(np.trace(table) / n) if n else float("nan")
    kappa = float(_kappa(table))
    rng = rng or np.random.default_rng(0)
    draws = rng.multinomial(n, table.ravel() / n, size=n_resamples).reshape(n_resamples, *table.shape)
    replicates = _kappa(draws.astype(float))
    replicates = replicates[~np.isnan(replicates)]
    if len(replicates) == 0:
        return observed, kappa, float("nan"), float("nan")
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    return observed, kappa, float(low), float(high)


def rater_agreement(ratings: pd.DataFrame, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """AGREEMENT_COLUMNS for every rater pair that scored at least two attempts in common."""
    rows = []
    if ratings.empty:
        return pd.DataFrame(columns=list(AGREEMENT_COLUMNS))
    ratings = ratings.drop_duplicates(["attempt_id", "rater"], keep="last")
    raters = list(dict.fromkeys(ratings["rater"]))
    by_rater = {r: ratings[ratings["rater"] == r].set_index("attempt_id") for r in raters}
    for a, b in combinations(raters, 2):
        shared = by_rater[a].join(by_rater[b], how="inner", lsuffix="_a", rsuffix="_b")
        if len(shared) < 2:
            continue
        rng = contrast_rng(seed, "kappa", a, b)
        success = cohen_kappa(shared["success_a"].astype(int), shared["success_b"].astype(int), n_resamples, rng)
        rows.append((a, b, "success", len(shared), *success))
        failed = shared[(shared["success_a"].astype(int) == 0) & (shared["success_b"].astype(int) == 0)]
        if len(failed) >= 2:
            modes = [failed[f"failure_mode_{s}"].fillna("").replace("", "unannotated") for s in "ab"]
            rows.append((a, b, "failure_mode", len(failed), *cohen_kappa(modes[0], modes[1], n_resamples, rng)))
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))


def ledger_ratings(ledger, outcomes: pd.DataFrame) -> pd.DataFrame:
    """Every rater's current score of the valid attempts scored by more than one rater."""
    if "scored_by_n" not in outcomes.columns or "attempt_id" not in outcomes.columns:
        return pd.DataFrame(columns=list(RATINGS_COLUMNS))
    twice = outcomes[outcomes["valid"] & (pd.to_numeric(outcomes["scored_by_n"], errors="coerce") > 1)]
    rows = [(s.attempt_id, s.rater, int(s.success), s.failure_mode or "")
            for attempt in twice["attempt_id"] for s in ledger.scores_for(attempt)]
    return pd.DataFrame(rows, columns=list(RATINGS_COLUMNS))
