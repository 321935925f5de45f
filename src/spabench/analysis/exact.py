"""Closed-form interval and test formulas in numpy and the standard library.

The report used statsmodels for these; importing it pulls scipy and cost about a second per report.
The formulas are short and exact, and the tests check each one against statsmodels/scipy.
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


def binomial_cdf(k: int, n: int, p: float = 0.5) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed exactly in floating point."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p == 0.5:
        return math.fsum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return math.fsum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def mcnemar_exact_counts(first_only: int, second_only: int) -> float:
    """Exact McNemar p-value from the discordant counts b, c: min(1, 2 P(X <= min(b, c))),
    X ~ Binomial(b + c, 1/2) (statsmodels' `mcnemar(exact=True)`; 1.0 with no discordant pairs)."""
    b, c = int(first_only), int(second_only)
    if b + c == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_cdf(min(b, c), b + c))


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
