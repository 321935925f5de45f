"""Differences in success rate between conditions: matched (paired) and unpaired contrasts.

Paired contrasts compare two rollouts on the same matched scene. Per task (n = 10-20 pairs) the
interval is Tango's score interval for a paired difference and the p-value McNemar's score test
(no continuity correction): the test is the interval's own score statistic at zero, so the
interval excludes 0 exactly when p < alpha, and the interval exists for every table (no
discordant pair, or all pairs discordant one way). The unpaired ID-vs-OOD contrast uses the
Newcombe (Wilson score) difference interval and Fisher's exact test.

task='all' with at least MIN_BOOTSTRAP_PAIRS pairs in every task (the direct control: 20 per task)
gives every task equal weight: the estimate is the mean of the per-task differences and the
interval the percentile bootstrap that resamples matched pairs within each task, as the authors'
released analysis code did (100,000 resamples, seed 20260906, percentile interval). Here the
bootstrap law is exact (analysis.bootstrap), so the bounds are its quantiles with no Monte Carlo
error; its p-value is the exact McNemar test on the pooled pairs. With fewer pairs per task (the
paraphrase subset: 10), or a one-point law, the bootstrap's lattice would pin bounds, so task='all'
is then the pooled pairs' mean difference with its Tango interval and score test, like a task.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from spabench.analysis.bootstrap import (
    BootstrapInterval,
    contrast_rng,
    equal_weight_interval,
    paired_bootstrap_interval,
)
from spabench.analysis.exact import (
    fisher_exact,
    mcnemar_exact_counts,
    mcnemar_score_counts,
    newcombe_difference,
    tango_interval,
)
from spabench.analysis.matching import matched_pairs, valid_rollouts
from spabench.analysis.outcomes import policies_in_order
from spabench.analysis.rates import ALL_TASKS, order_rows
from spabench.suite.vocabulary import TASKS

# contrast name -> (minuend condition, subtrahend condition)
PAIRED_CONTRASTS: dict[str, tuple[str, str]] = {
    "direct_minus_ood": ("direct", "ood"),
    "paraphrase_minus_original_ood": ("paraphrase_ood", "ood"),
    "paraphrase_minus_original_direct": ("paraphrase_direct", "direct"),
    # the matched gap when both instructions are paraphrased (the paper: the direct advantage persists)
    "paraphrased_direct_minus_ood": ("paraphrase_direct", "paraphrase_ood"),
}
UNPAIRED_CONTRASTS: dict[str, tuple[str, str]] = {
    "id_minus_ood": ("id", "ood"),
}
CONTRAST_ORDER: tuple[str, ...] = tuple(PAIRED_CONTRASTS) + tuple(UNPAIRED_CONTRASTS)
CONTRAST_COLUMNS: tuple[str, ...] = (
    "policy", "contrast", "task", "estimate", "ci_low", "ci_high", "n_pairs", "p_value",
    "ci_method", "ci_low_mc_se", "ci_high_mc_se", "degenerate", "n_resamples", "bootstrap_seed",
)
DEFAULT_RESAMPLES = 100_000      # the authors' released analysis code
MIN_BOOTSTRAP_PAIRS = 20         # task='all' bootstraps only when every task has this many pairs
PUBLISHED_SEED = 20260906        # its seed


def discordant(first, second) -> tuple[int, int]:
    """(b, c): pairs where only the first succeeded, and where only the second did."""
    first = np.asarray(first, dtype=int)
    second = np.asarray(second, dtype=int)
    return int(np.sum((first == 1) & (second == 0))), int(np.sum((first == 0) & (second == 1)))


def mcnemar_exact(first, second) -> float:
    """Exact (binomial) McNemar p-value for paired 0/1 outcomes (as statsmodels' exact=True)."""
    return mcnemar_exact_counts(*discordant(first, second))


def tango_row(policy, contrast, task, first, second, seed: int) -> tuple:
    """A paired row from its pairs: mean difference and McNemar's score p; its Tango bounds are NaN
    here and filled by `with_tango_bounds` for all rows at once (one vectorised root finding)."""
    b, c = discordant(first, second)
    n = len(first)
    return (policy, contrast, task, (b - c) / n, math.nan, math.nan, n, mcnemar_score_counts(b, c),
            "tango_score", math.nan, math.nan, False, 0, int(seed), b, c)


def with_tango_bounds(rows: list[tuple], alpha: float) -> pd.DataFrame:
    """The rows as a table, the Tango interval of every `tango_score` row filled in."""
    table = pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS) + ["_b", "_c"])
    tango = (table["ci_method"] == "tango_score").to_numpy()
    if tango.any():
        low, high = tango_interval(table.loc[tango, "_b"].to_numpy(), table.loc[tango, "_c"].to_numpy(),
                                   table.loc[tango, "n_pairs"].to_numpy(), alpha)
        table.loc[tango, "ci_low"], table.loc[tango, "ci_high"] = low, high
    return table[list(CONTRAST_COLUMNS)]


def _row(policy, contrast, task, estimate, n, p, interval: BootstrapInterval | None, low=None, high=None,
         n_resamples: int = 0, seed: int = 0) -> tuple:
    if interval is None:  # an analytic interval (Newcombe)
        return (policy, contrast, task, estimate, low, high, n, p, "newcombe", math.nan, math.nan, False, 0, seed, 0, 0)
    method = "bootstrap_exact_percentile" if interval.exact else "bootstrap_percentile"
    return (policy, contrast, task, estimate, interval.low, interval.high, n, p, method,
            interval.low_mc_se, interval.high_mc_se, interval.degenerate,
            0 if interval.exact else int(n_resamples), int(seed), 0, 0)


def matched_contrast(outcomes: pd.DataFrame, contrast: str, n_resamples: int = DEFAULT_RESAMPLES,
                     seed: int = PUBLISHED_SEED,
                     alpha: float = 0.05) -> pd.DataFrame:
    """One paired contrast (a key of PAIRED_CONTRASTS) per policy, per task and for task='all'.

    estimate = mean(minuend - subtrahend) over matched groups; n_pairs counts them. Per task: Tango
    interval and McNemar score p; for 'all': the equal-weight bootstrap and the exact McNemar test
    on the pairs of all tasks pooled.
    """
    first, second = PAIRED_CONTRASTS[contrast]
    pairs = matched_pairs(valid_rollouts(outcomes), first, second)
    ones, twos = pairs["first"].to_numpy(), pairs["second"].to_numpy()
    cells = pairs.groupby(["policy", "task"], sort=False).indices  # (policy, task) -> row positions
    rows = []
    for policy in policies_in_order(outcomes):
        by_task = {task: cells[policy, task] for task in TASKS if (policy, task) in cells}
        if not by_task:
            continue
        for task, at in by_task.items():
            rows.append(tango_row(policy, contrast, task, ones[at], twos[at], seed))
        # task='all': the equal-weight mean of the per-task means, tasks resampled independently
        differences = {task: ones[at] - twos[at] for task, at in by_task.items()}
        estimate = float(np.mean([d.mean() for d in differences.values()]))
        mine = np.concatenate(list(by_task.values()))
        interval = None
        if min(len(d) for d in differences.values()) >= MIN_BOOTSTRAP_PAIRS:
            interval = paired_bootstrap_interval(differences, n_resamples,
                                                 contrast_rng(seed, policy, contrast, ALL_TASKS), alpha)
        if interval is None or interval.degenerate:  # few pairs per task: the pooled pairs' score interval
            rows.append(tango_row(policy, contrast, ALL_TASKS, ones[mine], twos[mine], seed))
            continue
        rows.append(_row(policy, contrast, ALL_TASKS, estimate, len(mine), mcnemar_exact(ones[mine], twos[mine]),
                         interval, n_resamples=n_resamples, seed=seed))
    return with_tango_bounds(rows, alpha)


def proportion_difference(successes1: int, trials1: int, successes2: int, trials2: int,
                          alpha: float = 0.05) -> tuple[float, float, float, float]:
    """Unpaired p1 - p2: estimate, Newcombe hybrid score interval, two-sided Fisher exact p."""
    low, high = newcombe_difference(successes1, trials1, successes2, trials2, alpha)
    p = fisher_exact([[successes1, trials1 - successes1], [successes2, trials2 - successes2]])
    return successes1 / trials1 - successes2 / trials2, float(low), float(high), p


def unpaired_contrast(outcomes: pd.DataFrame, contrast: str = "id_minus_ood",
                      n_resamples: int = DEFAULT_RESAMPLES, seed: int = PUBLISHED_SEED,
                      alpha: float = 0.05) -> pd.DataFrame:
    """An unpaired contrast (a key of UNPAIRED_CONTRASTS) per policy, per task and for task='all'.

    Per task: Newcombe interval and Fisher exact p. For 'all': the equal-weight mean of per-task
    differences with a stratified bootstrap interval, and Fisher's exact p on the pooled counts
    (with the protocol's equal per-task trial counts, pooled and equal-weight rates coincide).
    n_pairs is the smaller of the two trial counts (there are no pairs; it bounds the precision).
    """
    first, second = UNPAIRED_CONTRASTS[contrast]
    valid = valid_rollouts(outcomes)
    success = valid["success"].to_numpy()
    cells = valid.groupby(["policy", "task", "condition"], sort=False).indices
    rows = []
    for policy in policies_in_order(outcomes):
        samples = {task: (success[cells[policy, task, first]], success[cells[policy, task, second]])
                   for task in TASKS if (policy, task, first) in cells and (policy, task, second) in cells}
        if not samples:
            continue
        for task, (ones, twos) in samples.items():
            estimate, low, high, p = proportion_difference(int(ones.sum()), len(ones),
                                                           int(twos.sum()), len(twos), alpha)
            rows.append(_row(policy, contrast, task, estimate, min(len(ones), len(twos)), p, None, low, high,
                             seed=seed))
        # rollouts resampled within each task and condition
        interval = equal_weight_interval(list(samples.values()), n_resamples,
                                         contrast_rng(seed, policy, contrast, ALL_TASKS), alpha)
        estimate = float(np.mean([o.mean() - t.mean() for o, t in samples.values()]))
        s1 = sum(int(o.sum()) for o, _ in samples.values())
        n1 = sum(len(o) for o, _ in samples.values())
        s2 = sum(int(t.sum()) for _, t in samples.values())
        n2 = sum(len(t) for _, t in samples.values())
        p = fisher_exact([[s1, n1 - s1], [s2, n2 - s2]])
        rows.append(_row(policy, contrast, ALL_TASKS, estimate, min(n1, n2), p, interval,
                         n_resamples=n_resamples, seed=seed))
    return pd.DataFrame([r[:len(CONTRAST_COLUMNS)] for r in rows], columns=list(CONTRAST_COLUMNS))


def contrast_table(outcomes: pd.DataFrame, n_resamples: int = DEFAULT_RESAMPLES, seed: int = PUBLISHED_SEED,
                   alpha: float = 0.05) -> pd.DataFrame:
    """Every contrast of the protocol, tidy: one row per policy x contrast x task."""
    parts = [matched_contrast(outcomes, name, n_resamples, seed, alpha) for name in PAIRED_CONTRASTS]
    parts += [unpaired_contrast(outcomes, name, n_resamples, seed, alpha) for name in UNPAIRED_CONTRASTS]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=list(CONTRAST_COLUMNS))
    table = pd.concat(parts, ignore_index=True)
    order = {c: i for i, c in enumerate(CONTRAST_ORDER)}
    table = order_rows(table, policies_in_order(outcomes))
    table["_c"] = table["contrast"].map(order)
    policy_rank = {p: i for i, p in enumerate(policies_in_order(outcomes))}
    table["_p"] = table["policy"].map(policy_rank)
    table = table.sort_values(["_p", "_c"], kind="stable").drop(columns=["_p", "_c"])
    return table.reset_index(drop=True)[list(CONTRAST_COLUMNS)]
