"""The percentile bootstrap of the report: exact resampling laws and their quantiles.

Every bootstrap here resamples small integers (0/1 outcomes, paired differences in {-1, 0, 1})
with replacement, within strata (tasks). The sum of n such draws is an integer whose law is the
n-fold convolution of the observed one-draw distribution, so a resampled mean has an exact law
on the lattice k / n, and so do an equal-weight mean over strata and a difference of two means
(convolutions on a common denominator).

A percentile interval from R resamples estimates quantiles of that law with Monte Carlo error; as
R grows it converges to the law's own quantiles. Where the law is exact the interval is those
quantiles (the smallest lattice value whose cumulative probability reaches alpha/2, and 1 -
alpha/2): no Monte Carlo error, no seed, the same for any number of resamples. Values that are
not small integers, or strata whose common lattice would be too fine to tabulate (very unequal
stratum sizes), fall back to drawing R resampled statistics, and each bound then carries its
Monte Carlo standard error from BATCHES batches.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

BATCHES = 20                     # Monte Carlo error of a bound: batch means over this many batches
MAX_SPAN = 16                    # integer data spanning more than this use the sampled path
MAX_LATTICE = 20_000             # a law on more lattice points than this uses the sampled path


@dataclass(frozen=True)
class BootstrapInterval:
    low: float
    high: float
    low_mc_se: float        # Monte Carlo standard error of each bound
    high_mc_se: float
    degenerate: bool        # every resample gave the same value: no interval to speak of
    exact: bool = False     # the quantiles of the exact law (no Monte Carlo error)


@dataclass(frozen=True)
class LatticeLaw:
    """The law of a statistic taking the value (low + k) / denominator with probability pmf[k]."""
    low: int
    denominator: int
    pmf: np.ndarray

    def values(self) -> np.ndarray:
        return (self.low + np.arange(len(self.pmf))) / self.denominator

    def on_denominator(self, denominator: int) -> LatticeLaw:
        """The same law written on a finer lattice (`denominator` a multiple of this one's)."""
        factor = denominator // self.denominator
        if factor == 1:
            return self
        pmf = np.zeros((len(self.pmf) - 1) * factor + 1)
        pmf[::factor] = self.pmf
        return LatticeLaw(self.low * factor, denominator, pmf)

    def negated(self) -> LatticeLaw:
        return LatticeLaw(-(self.low + len(self.pmf) - 1), self.denominator, self.pmf[::-1])


def contrast_rng(seed: int, *labels: str) -> np.random.Generator:
    """A generator fixed by the seed and the contrast's labels, so each interval is reproducible
    whatever else the outcomes table holds."""
    keys = [int(seed)] + [zlib.crc32(label.encode()) for label in labels]
    return np.random.default_rng(np.random.SeedSequence(keys))


# ---------------------------------------------------------------- exact laws

@lru_cache(maxsize=512)  # the published campaign's report needs 157; a law is at most MAX_LATTICE floats
def _sum_pmf(one_draw: tuple[int, ...], n: int) -> np.ndarray:
    """pmf of the sum of n draws from the counts `one_draw` (over consecutive integers): the n-fold
    convolution, by repeated squaring. Cached: cells share counts (half the look-ups of a report)."""
    base: np.ndarray = np.asarray(one_draw, dtype=float) / n
    result: np.ndarray = np.ones(1)
    while n:
        if n & 1:
            result = np.convolve(result, base)
        n >>= 1
        if n:
            base = np.convolve(base, base)
    result /= result.sum()
    result.flags.writeable = False
    return result


def mean_law(values) -> LatticeLaw | None:
    """The exact law of the mean of len(values) draws with replacement from `values`, or None when
    the values are not integers spanning at most MAX_SPAN (or the lattice exceeds MAX_LATTICE)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0 or not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
        return None
    low, high = int(values.min()), int(values.max())
    n = len(values)
    if high - low > MAX_SPAN or n * (high - low) + 1 > MAX_LATTICE:
        return None
    counts = np.bincount((values - low).astype(np.int64), minlength=high - low + 1)
    return LatticeLaw(low * n, n, _sum_pmf(tuple(int(c) for c in counts), n))


def sum_law(laws: Sequence[LatticeLaw]) -> LatticeLaw | None:
    """The law of the sum of independent lattice statistics (convolution on their common
    denominator), or None when it would hold more than MAX_LATTICE points."""
    denominator = math.lcm(*(law.denominator for law in laws))
    size = 1 + sum((len(law.pmf) - 1) * (denominator // law.denominator) for law in laws)
    if size > MAX_LATTICE:
        return None
    parts = [law.on_denominator(denominator) for law in laws]
    pmf = parts[0].pmf
    for part in parts[1:]:
        pmf = np.convolve(pmf, part.pmf)
    return LatticeLaw(sum(part.low for part in parts), denominator, pmf)


def stratum_law(samples: Sequence[np.ndarray]) -> LatticeLaw | None:
    """Law of a stratum's statistic: the mean of its one sample, or the first mean minus the second."""
    laws = [law for s in samples if (law := mean_law(s)) is not None]
    if len(laws) < len(samples):
        return None
    if len(laws) == 1:
        return laws[0]
    first, second = laws
    return sum_law([first, second.negated()])


def equal_weight_law(strata: Sequence[Sequence[np.ndarray]]) -> LatticeLaw | None:
    """Law of the equal-weight mean over strata of each stratum's statistic (strata independent)."""
    laws = [law for samples in strata if (law := stratum_law(samples)) is not None]
    if len(laws) < len(strata):
        return None
    total = laws[0] if len(laws) == 1 else sum_law(laws)
    if total is None:
        return None
    return LatticeLaw(total.low, total.denominator * len(laws), total.pmf)


# ---------------------------------------------------------------- quantiles

def law_quantiles(law: LatticeLaw, qs) -> np.ndarray:
    """The q-quantiles of a lattice law: the smallest value whose cumulative probability reaches q
    (the limit of the percentile bootstrap's bound as the number of resamples grows)."""
    cumulative = np.cumsum(law.pmf) / law.pmf.sum()
    index = np.searchsorted(cumulative, np.asarray(qs, dtype=float) - 1e-12, side="left")
    return law.values()[np.minimum(index, len(cumulative) - 1)]


def law_interval(law: LatticeLaw, alpha: float = 0.05) -> BootstrapInterval:
    """The percentile interval of the exact bootstrap law (no Monte Carlo error: NaN errors)."""
    low, high = law_quantiles(law, [alpha / 2, 1 - alpha / 2])
    return BootstrapInterval(float(low), float(high), math.nan, math.nan,
                             bool(law.pmf.max() >= (1 - 1e-12) * law.pmf.sum()), exact=True)


def percentile_interval(replicates: np.ndarray, alpha: float = 0.05) -> BootstrapInterval:
    """Percentile interval of sampled bootstrap replicates, with each bound's Monte Carlo error."""
    qs = [alpha / 2, 1 - alpha / 2]
    low, high = np.quantile(replicates, qs)
    usable = len(replicates) // BATCHES * BATCHES
    if usable >= BATCHES * 10:
        per_batch = np.quantile(replicates[:usable].reshape(BATCHES, -1), qs, axis=1)
        se = per_batch.std(axis=1, ddof=1) / math.sqrt(BATCHES)
    else:
        se = np.array([math.nan, math.nan])
    return BootstrapInterval(float(low), float(high), float(se[0]), float(se[1]),
                             bool(np.ptp(replicates) == 0))


def resampled_means(values, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n_resamples` bootstrap resamples of `values`, one by one (the sampled path).

    Lattice data draw each mean from its exact law; other data draw the multinomial counts over
    the distinct values as a chain of conditional binomials, vectorised over the resamples.
    """
    values = np.asarray(values, dtype=float)
    law = mean_law(values)
    if law is not None:
        cumulative = np.cumsum(law.pmf / law.pmf.sum())
        index = np.minimum(np.searchsorted(cumulative, rng.random(n_resamples), side="right"), len(cumulative) - 1)
        return law.values()[index]
    distinct, counts = np.unique(values, return_counts=True)
    n = len(values)
    remaining = np.full(n_resamples, n, dtype=np.int64)
    total = np.zeros(n_resamples)
    left = 1.0
    for value, count in zip(distinct[:-1], counts[:-1], strict=True):
        share = count / n
        draw = rng.binomial(remaining, min(1.0, share / left))
        total += draw * value
        remaining -= draw
        left -= share
    total += remaining * distinct[-1]
    return total / n


def equal_weight_interval(strata: Sequence[Sequence[np.ndarray]], n_resamples: int,
                          rng: np.random.Generator, alpha: float = 0.05) -> BootstrapInterval:
    """Percentile interval of the equal-weight mean over strata of each stratum's statistic (the
    mean of its one sample, or the mean of the first minus that of the second), every sample
    resampled with replacement within its stratum: the exact law's quantiles where the law is
    tabulated, else `n_resamples` drawn statistics."""
    law = equal_weight_law(strata)
    if law is not None:
        return law_interval(law, alpha)
    statistics = []
    for samples in strata:
        means = [resampled_means(s, n_resamples, rng) for s in samples]
        statistics.append(means[0] if len(means) == 1 else means[0] - means[1])
    return percentile_interval(np.mean(statistics, axis=0), alpha)


def paired_bootstrap_interval(differences_by_task: Mapping[str, np.ndarray], n_resamples: int,
                              rng: np.random.Generator, alpha: float = 0.05) -> BootstrapInterval:
    """Percentile interval of the equal-weight mean of per-task mean differences.

    Each resample draws, within every task independently, as many matched groups as it has (with
    replacement). One task gives the plain paired bootstrap of that task.
    """
    return equal_weight_interval([(d,) for d in differences_by_task.values()], n_resamples, rng, alpha)


def paired_bootstrap(differences_by_task: Mapping[str, np.ndarray], n_resamples: int,
                     rng: np.random.Generator, alpha: float = 0.05) -> tuple[float, float]:
    """(low, high) of `paired_bootstrap_interval`."""
    interval = paired_bootstrap_interval(differences_by_task, n_resamples, rng, alpha)
    return interval.low, interval.high
