"""Interval and test formulas: Wilson, Newcombe and Holm in closed form (numpy), tail probabilities
from scipy, and Tango's score interval for a paired difference of proportions.

Wilson, Newcombe and Holm are short closed forms, checked against statsmodels by the tests. Every
binomial or hypergeometric tail comes from scipy (stable at any count: a hand-rolled sum of
binomial coefficients overflowed at 1,024 discordant pairs); scipy is imported on first use.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np


@lru_cache(maxsize=16)
def z_value(alpha: float = 0.05) -> float:
    """The two-sided normal quantile z_{1-alpha/2} (1.959964 for alpha = 0.05)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1)")
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson(successes, trials, alpha: float = 0.05):
    """Two-sided Wilson score interval, vectorised; zero trials give NaN.

    centre = (p + z^2/2n) / (1 + z^2/n); half = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2).
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    z2 = z_value(alpha) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denominator = 1 + z2 / n
        centre = (p + z2 / (2 * n)) / denominator
        half = np.sqrt(z2) / denominator * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
        low = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
        high = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def wilson_half_width(rate, trials, alpha: float = 0.05):
    """Half the width of the Wilson interval at observed rate `rate` with `trials` trials (unclipped)."""
    p = np.asarray(rate, dtype=float)
    n = np.asarray(trials, dtype=float)
    z = z_value(alpha)
    return z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))


def mcnemar_exact_counts(first_only: int, second_only: int) -> float:
    """Exact McNemar p-value from the discordant counts b, c: min(1, 2 P(X <= min(b, c))),
    X ~ Binomial(b + c, 1/2), as statsmodels' `mcnemar(exact=True)` (1.0 with no discordant pairs)."""
    from scipy.stats import binom

    b, c = int(first_only), int(second_only)
    if b + c == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(b, c), b + c, 0.5)))


def mcnemar_score_counts(first_only, second_only):
    """McNemar's score test without continuity correction, (b - c)^2 / (b + c) against chi-square(1)
    (statsmodels' `mcnemar(exact=False, correction=False)`; 1.0 with no discordant pairs). It is
    Tango's score test at a zero difference, so it rejects exactly when `tango_interval` excludes 0.
    Vectorised; scalars give a float."""
    from scipy.stats import chi2

    b, c = np.asarray(first_only, dtype=float), np.asarray(second_only, dtype=float)
    discordant = b + c
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(discordant > 0, chi2.sf((b - c) ** 2 / discordant, 1), 1.0)
    return float(p) if p.ndim == 0 else p


def tango_score(delta, first_only, second_only, n):
    """Tango's (1998) score statistic for H0: p1 - p2 = delta from n matched pairs with b pairs where
    only the first succeeded and c where only the second did (arrays broadcast). The nuisance
    parameter (the probability of a (0, 1) pair) is its maximum-likelihood value under H0, the
    positive root of 2n q^2 + (-(b + c) + delta (2n - b + c)) q - c delta (1 - delta) = 0.
    Decreasing in delta; +-inf where H0 leaves no variance and the data contradict it."""
    b, c, n = (np.asarray(x, dtype=float) for x in (first_only, second_only, n))
    delta = np.asarray(delta, dtype=float)
    a_ = 2.0 * n
    b_ = -(b + c) + delta * (2.0 * n - b + c)
    c_ = -c * delta * (1.0 - delta)
    q = (np.sqrt(np.maximum(b_ * b_ - 4 * a_ * c_, 0.0)) - b_) / (2 * a_)
    variance = n * (2.0 * q + delta * (1.0 - delta))
    numerator = b - c - n * delta
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(np.maximum(variance, 0.0))
        z = np.where(variance > 1e-12 * np.maximum(n, 1), z, np.sign(numerator) * np.inf)
    return np.where(numerator == 0, 0.0, z)


def tango_interval(first_only, second_only, n, alpha: float = 0.05):
    """Tango's score interval for a paired difference p1 - p2: every delta whose score test
    (`tango_score`) does not reject at level alpha. It exists for every table (also with no
    discordant pair, or all pairs discordant one way) and excludes 0 exactly when
    `mcnemar_score_counts` < alpha. Vectorised over arrays of (b, c, n); scalars give floats.
    Bounds by scipy's elementwise bracketing root finder on the monotone statistic."""
    from scipy.optimize.elementwise import find_root

    b, c, n = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (first_only, second_only, n)))
    z = z_value(alpha)
    ok = n > 0
    safe_n = np.where(ok, n, 1.0)
    estimate = np.where(ok, (b - c) / safe_n, 0.0)
    big = 1e12

    def excess(delta, b, c, n, target):  # zero at a bound; clipped so the root finder sees finite values
        return np.clip(tango_score(delta, b, c, n), -big, big) - target

    bounds = []
    for end, target in ((-1.0, z), (1.0, -z)):
        reaches = (excess(np.full(b.shape, end), b, c, safe_n, target) * end) >= 0  # the end itself is accepted
        ends = (np.full(b.shape, end), estimate) if end < 0 else (estimate, np.full(b.shape, end))
        found = find_root(excess, ends, args=(b, c, safe_n, np.full(b.shape, target)),
                          tolerances={"xatol": 1e-13, "xrtol": 1e-13}).x
        bounds.append(np.where(ok, np.where(reaches, end, found), np.nan))
    low, high = bounds
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def fisher_exact(table) -> float:
    """Two-sided Fisher exact p-value of a 2x2 table [[a, b], [c, d]] (scipy's `fisher_exact`:
    the tables with the observed margins no more likely than the observed one)."""
    from scipy.stats import fisher_exact as scipy_fisher

    (a, b), (c, d) = ((int(x) for x in row) for row in table)
    if a + b + c + d == 0:
        return 1.0
    return float(min(1.0, scipy_fisher([[a, b], [c, d]], alternative="two-sided")[1]))


def newcombe_difference(successes1: int, trials1: int, successes2: int, trials2: int,
                        alpha: float = 0.05) -> tuple[float, float]:
    """Newcombe's hybrid score interval (method 10) for p1 - p2 from the two Wilson intervals."""
    p1, p2 = successes1 / trials1, successes2 / trials2
    l1, u1 = wilson(successes1, trials1, alpha)
    l2, u2 = wilson(successes2, trials2, alpha)
    d = p1 - p2
    return (d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
            d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def holm(p_values) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error control), in the input order; NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    values = p[ok]
    m = len(values)
    if m == 0:
        return out
    order = np.argsort(values, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * values[order]))
    result = np.empty(m)
    result[order] = adjusted
    out[ok] = result
    return out
