"""Differences in success rate between conditions: matched (paired) and unpaired contrasts.

Paired contrasts compare two rollouts on the same matched scene: an exact McNemar test and a
seeded paired bootstrap that resamples matched groups within each task. The unpaired ID-vs-OOD
contrast uses the Newcombe (Wilson score) difference interval and Fisher's exact test.

task='all' gives every task equal weight: the estimate is the mean of the per-task differences and
the bootstrap averages per-task resampled means, as the published analysis did.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping

import numpy as np
import pandas as pd

from spabench.analysis.exact import mcnemar_exact_counts, newcombe_difference
from spabench.analysis.matching import matched_pairs, valid_rollouts
from spabench.analysis.outcomes import policies_in_order
from spabench.analysis.rates import ALL_TASKS, order_rows
from spabench.suite.vocabulary import TASKS

# contrast name -> (minuend condition, subtrahend condition)
PAIRED_CONTRASTS: dict[str, tuple[str, str]] = {
    "direct_minus_ood": ("direct", "ood"),
    "paraphrase_minus_original_ood": ("paraphrase_ood", "ood"),
    "paraphrase_minus_original_direct": ("paraphrase_direct", "direct"),
}
UNPAIRED_CONTRASTS: dict[str, tuple[str, str]] = {
    "id_minus_ood": ("id", "ood"),
}
CONTRAST_ORDER: tuple[str, ...] = tuple(PAIRED_CONTRASTS) + tuple(UNPAIRED_CONTRASTS)
CONTRAST_COLUMNS: tuple[str, ...] = (
    "policy", "contrast", "task", "estimate", "ci_low", "ci_high", "n_pairs", "p_value",
)


def contrast_rng(seed: int, *labels: str) -> np.random.Generator:
    """A generator fixed by the seed and the contrast's labels, so each interval is reproducible
    whatever else the outcomes table holds."""
    keys = [int(seed)] + [zlib.crc32(label.encode()) for label in labels]
    return np.random.default_rng(np.random.SeedSequence(keys))


def mcnemar_exact(first, second) -> float:
    """Exact (binomial) McNemar p-value for paired 0/1 outcomes (as statsmodels' exact=True)."""
    first = np.asarray(first, dtype=int)
    second = np.asarray(second, dtype=int)
    return mcnemar_exact_counts(int(np.sum((first == 1) & (second == 0))),
                                int(np.sum((first == 0) & (second == 1))))


def paired_bootstrap(differences_by_task: Mapping[str, np.ndarray], n_resamples: int,
                     rng: np.random.Generator, alpha: float = 0.05) -> tuple[float, float]:
    """Percentile interval of the equal-weight mean of per-task mean differences.

    Each resample draws, within every task independently, as many matched groups as it has (with
    replacement). One task gives the plain paired bootstrap of that task.
    """
    task_means = []
    for differences in differences_by_task.values():
        values = np.asarray(differences, dtype=float)
        draws = rng.integers(0, len(values), size=(n_resamples, len(values)))
        task_means.append(values[draws].mean(axis=1))
    replicates = np.mean(task_means, axis=0)
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def matched_contrast(outcomes: pd.DataFrame, contrast: str, n_resamples: int = 2000, seed: int = 0,
                     alpha: float = 0.05) -> pd.DataFrame:
    """One paired contrast (a key of PAIRED_CONTRASTS) per policy, per task and for task='all'.

    estimate = mean(minuend - subtrahend) over matched groups; n_pairs counts them. For 'all' the
    McNemar test pools the pairs of all tasks.
    """
    first, second = PAIRED_CONTRASTS[contrast]
    pairs = matched_pairs(valid_rollouts(outcomes), first, second)
    rows = []
    for policy in policies_in_order(outcomes):
        mine = pairs[pairs["policy"] == policy]
        by_task = {task: (mine.loc[mine["task"] == task, "first"].to_numpy()
                          - mine.loc[mine["task"] == task, "second"].to_numpy())
                   for task in TASKS if (mine["task"] == task).any()}
        if not by_task:
            continue
        for task, differences in by_task.items():
            chosen = mine[mine["task"] == task]
            low, high = paired_bootstrap({task: differences}, n_resamples,
                                         contrast_rng(seed, policy, contrast, task), alpha)
            rows.append((policy, contrast, task, float(differences.mean()), low, high,
                         len(differences), mcnemar_exact(chosen["first"], chosen["second"])))
        low, high = paired_bootstrap(by_task, n_resamples,
                                     contrast_rng(seed, policy, contrast, ALL_TASKS), alpha)
        estimate = float(np.mean([d.mean() for d in by_task.values()]))
        rows.append((policy, contrast, ALL_TASKS, estimate, low, high, len(mine),
                     mcnemar_exact(mine["first"], mine["second"])))
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))


def fisher_exact(table) -> float:
    """Two-sided Fisher exact p-value of a 2x2 table [[a, b], [c, d]] (exact integer arithmetic).

    Sums the probabilities of all tables with the observed margins that are no more likely than
    the observed one.
    """
    (a, b), (c, d) = ((int(x) for x in row) for row in table)
    row1, col1, n = a + b, a + c, a + b + c + d
    if n == 0:
        return 1.0
    lo, hi = max(0, row1 + col1 - n), min(row1, col1)
    weights = [math.comb(col1, x) * math.comb(n - col1, row1 - x) for x in range(lo, hi + 1)]
    observed = weights[a - lo]
    return min(1.0, sum(w for w in weights if w <= observed) / math.comb(n, row1))


def proportion_difference(successes1: int, trials1: int, successes2: int, trials2: int,
                          alpha: float = 0.05) -> tuple[float, float, float, float]:
    """Unpaired p1 - p2: estimate, Newcombe hybrid score interval, two-sided Fisher exact p."""
    low, high = newcombe_difference(successes1, trials1, successes2, trials2, alpha)
    p = fisher_exact([[successes1, trials1 - successes1], [successes2, trials2 - successes2]])
    return successes1 / trials1 - successes2 / trials2, float(low), float(high), p


def _unpaired_bootstrap(samples: Mapping[str, tuple[np.ndarray, np.ndarray]], n_resamples: int,
                        rng: np.random.Generator, alpha: float) -> tuple[float, float]:
    """Percentile interval of the equal-weight mean of per-task p1 - p2, resampling rollouts
    within each task and condition."""
    task_differences = []
    for ones, twos in samples.values():
        draws1 = ones[rng.integers(0, len(ones), size=(n_resamples, len(ones)))].mean(axis=1)
        draws2 = twos[rng.integers(0, len(twos), size=(n_resamples, len(twos)))].mean(axis=1)
        task_differences.append(draws1 - draws2)
    low, high = np.quantile(np.mean(task_differences, axis=0), [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def unpaired_contrast(outcomes: pd.DataFrame, contrast: str = "id_minus_ood", n_resamples: int = 2000,
                      seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """An unpaired contrast (a key of UNPAIRED_CONTRASTS) per policy, per task and for task='all'.

    Per task: Newcombe interval and Fisher exact p. For 'all': the equal-weight mean of per-task
    differences with a stratified bootstrap interval, and Fisher's exact p on the pooled counts
    (with the protocol's equal per-task trial counts, pooled and equal-weight rates coincide).
    n_pairs is the smaller of the two trial counts (there are no pairs; it bounds the precision).
    """
    first, second = UNPAIRED_CONTRASTS[contrast]
    valid = valid_rollouts(outcomes)
    rows = []
    for policy in policies_in_order(outcomes):
        mine = valid[valid["policy"] == policy]
        samples = {}
        for task in TASKS:
            ones = mine.loc[(mine["task"] == task) & (mine["condition"] == first), "success"].to_numpy()
            twos = mine.loc[(mine["task"] == task) & (mine["condition"] == second), "success"].to_numpy()
            if len(ones) and len(twos):
                samples[task] = (ones, twos)
        if not samples:
            continue
        for task, (ones, twos) in samples.items():
            estimate, low, high, p = proportion_difference(int(ones.sum()), len(ones),
                                                           int(twos.sum()), len(twos), alpha)
            rows.append((policy, contrast, task, estimate, low, high, min(len(ones), len(twos)), p))
        low, high = _unpaired_bootstrap(samples, n_resamples,
                                        contrast_rng(seed, policy, contrast, ALL_TASKS), alpha)
        estimate = float(np.mean([o.mean() - t.mean() for o, t in samples.values()]))
        s1 = sum(int(o.sum()) for o, _ in samples.values())
        n1 = sum(len(o) for o, _ in samples.values())
        s2 = sum(int(t.sum()) for _, t in samples.values())
        n2 = sum(len(t) for _, t in samples.values())
        p = fisher_exact([[s1, n1 - s1], [s2, n2 - s2]])
        rows.append((policy, contrast, ALL_TASKS, estimate, low, high, min(n1, n2), p))
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))


def contrast_table(outcomes: pd.DataFrame, n_resamples: int = 2000, seed: int = 0,
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
