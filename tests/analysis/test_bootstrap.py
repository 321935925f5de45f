"""The bootstrap: same law as index resampling, published defaults, flags and MC errors, and every
shortcut of the exact-law path checked against the slow computation it replaces.

Measured on main: 2,000 resamples by default (the published analysis used 100,000), and per-task
intervals at n = 10-20 collapsed to zero width ("+100.0 [100.0, 100.0]") with no warning.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from spabench.analysis import bootstrap
from spabench.analysis.bootstrap import (
    equal_weight_interval,
    equal_weight_law,
    law_quantiles,
    mean_law,
    paired_bootstrap_interval,
    percentile_interval,
    resampled_means,
)
from spabench.analysis.commands import ReportConfig
from spabench.analysis.contrasts import DEFAULT_RESAMPLES, PUBLISHED_SEED
from spabench.analysis.report import format_contrast


@pytest.mark.parametrize("values", [
    [1] * 9 + [0] * 8 + [-1] * 3,          # paired differences
    [1] * 13 + [0] * 37,                   # 0/1 outcomes
    [0.5, 1.0, 2.0, 2.0, 3.5, 0.0] * 3,    # the general chain (more than three values)
])
def test_resampled_means_have_the_index_resampling_law(values):
    v = np.asarray(values, float)
    fast = resampled_means(v, 200_000, np.random.default_rng(1))
    slow = v[np.random.default_rng(2).integers(0, len(v), size=(200_000, len(v)))].mean(axis=1)
    assert fast.mean() == pytest.approx(slow.mean(), abs=3e-3)
    assert fast.std() == pytest.approx(slow.std(), rel=0.02)
    np.testing.assert_allclose(np.quantile(fast, [0.025, 0.975]), np.quantile(slow, [0.025, 0.975]), atol=0.051)


def test_published_defaults():
    assert DEFAULT_RESAMPLES == 100_000 and PUBLISHED_SEED == 20260906
    defaults = ReportConfig.from_mapping({})  # `spabench report`'s declared defaults
    assert defaults.bootstrap == DEFAULT_RESAMPLES and defaults.bootstrap_seed == PUBLISHED_SEED


def test_degenerate_interval_is_flagged_not_zero_width():
    interval = paired_bootstrap_interval({"counting": np.ones(10)}, 1000, np.random.default_rng(0))
    assert interval.degenerate and interval.low == interval.high == 1.0

    class Row:
        estimate, ci_low, ci_high, n_pairs, degenerate = 1.0, 1.0, 1.0, 10, True
        ci_method, ci_low_mc_se, ci_high_mc_se = "bootstrap_percentile", 0.0, 0.0

    text = format_contrast(Row())
    assert "degenerate" in text and "[100.0, 100.0]" not in text


def test_each_bound_has_a_monte_carlo_error_that_shrinks_with_more_resamples():
    v = np.array([1] * 9 + [0] * 8 + [-1] * 3, float)
    small = percentile_interval(resampled_means(v, 4_000, np.random.default_rng(3)))
    large = percentile_interval(resampled_means(v, 400_000, np.random.default_rng(3)))
    assert not small.degenerate and small.low_mc_se > 0
    assert large.low_mc_se < small.low_mc_se and large.high_mc_se < small.high_mc_se


# ---------------------------------------------------------------- the exact-law shortcuts


def _enumerated_means(values) -> dict[Fraction, float]:
    """The law of a resampled mean by brute force: every one of the n^n index resamples (exact means)."""
    v = np.asarray(values, int)
    n = len(v)
    grid = np.array(np.meshgrid(*[np.arange(n)] * n, indexing="ij")).reshape(n, -1)
    sums, counts = np.unique(v[grid].sum(axis=0), return_counts=True)
    return {Fraction(int(k), n): c / counts.sum() for k, c in zip(sums, counts, strict=True)}


def _law_dict(law) -> dict[Fraction, float]:
    return {Fraction(law.low + k, law.denominator): p for k, p in enumerate(law.pmf) if p > 0}


def _assert_same_law(got: dict, expected: dict):
    assert set(got) == set(expected)
    for key, p in expected.items():
        assert got[key] == pytest.approx(p, rel=1e-9, abs=1e-15), key


@pytest.mark.parametrize("values", [[1, 0, -1, 1, 0, 1], [0, 1, 1, 0, 0, 0, 1], [1, 1, 1], [-1, 1, -1, 1, -1]])
def test_mean_law_is_the_law_of_index_resampling(values):
    _assert_same_law(_law_dict(mean_law(values)), _enumerated_means(values))


def test_equal_weight_and_difference_laws_are_the_law_of_stratified_resampling():
    a, b = [1, 0, -1, 1], [0, 1, 1]            # two tasks of unequal size: common denominator 12
    ones, twos = [1, 0, 1, 1, 0], [0, 1]       # an unpaired stratum: mean of ones minus mean of twos
    law_a, law_b, law_o, law_t = (_enumerated_means(x) for x in (a, b, ones, twos))

    def combine(first: dict, second: dict, f) -> dict:
        out: dict = {}
        for x, p in first.items():
            for y, q in second.items():
                key = f(x, y)
                out[key] = out.get(key, 0.0) + p * q
        return out

    _assert_same_law(_law_dict(equal_weight_law([(np.array(a),), (np.array(b),)])),
                     combine(law_a, law_b, lambda x, y: (x + y) / 2))
    difference = combine(law_o, law_t, lambda x, y: x - y)
    _assert_same_law(_law_dict(equal_weight_law([(np.array(ones), np.array(twos))])), difference)
    _assert_same_law(_law_dict(equal_weight_law([(np.array(ones), np.array(twos)), (np.array(a),)])),
                     combine(difference, law_a, lambda x, y: (x + y) / 2))


def test_sum_pmf_cache_returns_the_uncached_law():
    uncached = bootstrap._sum_pmf.__wrapped__
    for counts, n in [((3, 9, 8), 20), ((37, 13), 50), ((1,), 1), ((0, 5, 0, 5), 10)]:
        first = bootstrap._sum_pmf(counts, n)
        np.testing.assert_array_equal(bootstrap._sum_pmf(counts, n), first)
        np.testing.assert_array_equal(uncached(counts, n), first)
        assert not first.flags.writeable  # a cached law cannot be altered by a caller


@pytest.mark.parametrize("qs", [[0.025, 0.975], [0.0, 0.5, 1.0], [0.1, 0.333, 0.9]])
def test_law_quantiles_are_the_inverse_cdf_of_the_enumerated_law(qs):
    values = [1, 0, -1, 1, 0, 1]
    law = mean_law(values)
    enumerated = sorted(_enumerated_means(values).items())
    expected = []
    for q in qs:  # the smallest value whose cumulative probability reaches q
        total = 0.0
        for value, p in enumerated:
            total += p
            if total >= q - 1e-12:
                expected.append(float(value))
                break
    np.testing.assert_allclose(law_quantiles(law, qs), expected, atol=1e-12)


def test_exact_interval_is_the_limit_of_sampled_resamples_and_has_no_monte_carlo_error():
    """Measured on main: the lattice bounds carried batch Monte Carlo errors that were wrong both
    ways (errors on bounds that cannot move, understated where they do). Now the bounds are the
    law's quantiles: 400,000 index resamples land on them within their own Monte Carlo error."""
    tasks = [np.array([1] * 9 + [0] * 8 + [-1] * 3, float), np.array([1] * 2 + [0] * 15 + [-1] * 3, float),
             np.array([1] * 6 + [0] * 4, float)]
    exact = equal_weight_interval([(t,) for t in tasks], 100_000, np.random.default_rng(5))
    assert exact.exact and math.isnan(exact.low_mc_se) and math.isnan(exact.high_mc_se)
    again = equal_weight_interval([(t,) for t in tasks], 10, np.random.default_rng(99))
    assert (again.low, again.high) == (exact.low, exact.high)  # no seed, no resample count
    rng = np.random.default_rng(6)  # the sampled path: index resampling, one resample at a time
    sampled = percentile_interval(np.mean(
        [t[rng.integers(0, len(t), size=(400_000, len(t)))].mean(axis=1) for t in tasks], axis=0))
    lattice_step = 1 / (3 * 20 * 10)  # a sampled bound may sit one lattice point off at an atom
    for a, b, sb in [(exact.low, sampled.low, sampled.low_mc_se), (exact.high, sampled.high, sampled.high_mc_se)]:
        assert abs(a - b) <= max(4 * sb, lattice_step) + 1e-12


def test_too_fine_a_common_lattice_falls_back_to_sampling():
    tasks = [np.array(([1, 0, -1] * 20)[:n], float) for n in (47, 49, 50, 53)]  # lcm far beyond MAX_LATTICE
    assert equal_weight_law([(t,) for t in tasks]) is None
    got = equal_weight_interval([(t,) for t in tasks], 20_000, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    sampled = percentile_interval(np.mean(
        [t[rng.integers(0, len(t), size=(20_000, len(t)))].mean(axis=1) for t in tasks], axis=0))
    assert abs(got.low - sampled.low) <= 4 * math.hypot(got.low_mc_se, sampled.low_mc_se)
    assert abs(got.high - sampled.high) <= 4 * math.hypot(got.high_mc_se, sampled.high_mc_se)
