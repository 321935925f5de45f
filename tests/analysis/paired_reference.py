"""An independent, brute-force Tango score interval for the paired-interval tests.

The restricted maximum-likelihood nuisance parameter comes from numerically maximising the
multinomial likelihood of the 2x2 paired table (scipy's bounded scalar minimiser), not from the
closed-form root the code under test uses; the interval's ends are found by scanning delta on a
grid and refining each sign change by bisection of that brute-force statistic.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import norm


def restricted_q(b: int, c: int, n: int, delta: float) -> float:
    """argmax over q = P(0, 1) of the paired likelihood under p1 - p2 = delta."""
    m = n - b - c
    low, high = max(0.0, -delta), (1.0 - delta) / 2

    def minus_loglik(q: float) -> float:
        terms = [(b, q + delta), (c, q), (m, 1.0 - 2 * q - delta)]
        if any(count > 0 and p <= 0 for count, p in terms):
            return math.inf
        return -sum(count * math.log(p) for count, p in terms if count > 0)

    if high - low < 1e-15:
        return low
    found = minimize_scalar(minus_loglik, bounds=(low, high), method="bounded", options={"xatol": 1e-13})
    ends = [(minus_loglik(x), x) for x in (low, high)]
    return min([(found.fun, found.x)] + ends)[1]


def score(b: int, c: int, n: int, delta: float) -> float:
    q = restricted_q(b, c, n, delta)
    numerator = b - c - n * delta
    variance = n * (2 * q + delta * (1 - delta))
    if abs(numerator) < 1e-12:
        return 0.0
    return numerator / math.sqrt(variance) if variance > 1e-12 else math.copysign(math.inf, numerator)


def tango_brute_force(b: int, c: int, n: int, alpha: float = 0.05, steps: int = 2000) -> tuple[float, float]:
    z = norm.ppf(1 - alpha / 2)
    grid = np.linspace(-1.0, 1.0, steps + 1)
    accepted = np.array([abs(score(b, c, n, d)) < z for d in grid])
    inside = np.flatnonzero(accepted)

    def refine(outside: float, inside_: float) -> float:
        for _ in range(60):
            middle = (outside + inside_) / 2
            if abs(score(b, c, n, middle)) < z:
                inside_ = middle
            else:
                outside = middle
        return inside_

    first, last = inside[0], inside[-1]
    low = grid[first] if first == 0 else refine(grid[first - 1], grid[first])
    high = grid[last] if last == len(grid) - 1 else refine(grid[last + 1], grid[last])
    return float(low), float(high)
