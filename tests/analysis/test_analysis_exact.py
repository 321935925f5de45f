"""The numpy/stdlib formulas equal statsmodels' (which the report no longer imports)."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from spabench.analysis import exact


def test_wilson_equals_statsmodels_on_a_grid():
    n = np.repeat(np.arange(1, 151), 151)
    k = np.tile(np.arange(151), 150)
    keep = k <= n
    n, k = n[keep], k[keep]
    for alpha in (0.05, 0.1, 0.01):
        low, high = exact.wilson(k, n, alpha)
        ref_low, ref_high = proportion_confint(k, n, alpha=alpha, method="wilson")
        np.testing.assert_allclose(low, np.clip(ref_low, 0, 1), atol=1e-12)
        np.testing.assert_allclose(high, np.clip(ref_high, 0, 1), atol=1e-12)


@pytest.mark.parametrize("k1, n1, k2, n2", [(88, 120, 0, 50), (5, 20, 12, 20), (20, 20, 0, 20), (0, 7, 3, 9),
                                            (33, 100, 41, 100)])
def test_newcombe_equals_statsmodels(k1, n1, k2, n2):
    ref = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
    assert exact.newcombe_difference(k1, n1, k2, n2) == pytest.approx(ref, abs=1e-12)


def test_mcnemar_equals_statsmodels():
    for b in range(0, 40, 3):
        for c in range(0, 40, 5):
            ref = mcnemar([[10, b], [c, 10]], exact=True).pvalue
            assert exact.mcnemar_exact_counts(b, c) == pytest.approx(ref, rel=1e-12, abs=1e-15)


def test_holm_equals_statsmodels():
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 0.2, size=25)
    p[[3, 7]] = p[5]  # ties
    np.testing.assert_allclose(exact.holm(p), multipletests(p, method="holm")[1], atol=1e-15)
    with_nan = exact.holm([0.01, np.nan, 0.04])
    assert np.isnan(with_nan[1]) and with_nan[0] == pytest.approx(0.02) and with_nan[2] == pytest.approx(0.04)


def test_z_value():
    assert exact.z_value(0.05) == pytest.approx(1.959963984540054, abs=1e-12)
    with pytest.raises(ValueError):
        exact.z_value(0)
