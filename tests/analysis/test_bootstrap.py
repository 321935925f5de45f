"""The vectorised bootstrap: same law as index resampling, published defaults, flags and MC errors.

Measured on main: 2,000 resamples by default (the published analysis used 100,000), and per-task
intervals at n = 10-20 collapsed to zero width ("+100.0 [100.0, 100.0]") with no warning.
"""

from __future__ import annotations

import numpy as np
import pytest

from spabench.analysis.contrasts import (
    DEFAULT_RESAMPLES,
    PUBLISHED_SEED,
    paired_bootstrap_interval,
    percentile_interval,
    resampled_means,
)
from spabench.analysis.report import format_contrast
from spabench.config import SpabenchConfig


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
    defaults = SpabenchConfig.from_mapping({})  # the typed root config's (and conf/config.yaml's) defaults
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
