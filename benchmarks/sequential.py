"""Sequential comparisons (spabench.analysis.sequential): error control at every look and pairs saved,
side by side with the fixed-count exact McNemar test on the same simulated pairs (the anchor).

With fixed seeds, many comparisons at once (numpy: the cumulative e-value of every path):

  (a) no difference: both policies at rate 0.2, 0.5 or 0.8, outcomes independent or correlated
      (rho 0.5), 300 pairs: false decisions over all 300 looks, with the Clopper-Pearson 95%
      interval and the exact probability (dynamic programming over the discordant random walk);
  (b) 0.86 vs 0.50 over 120 pairs (a direct-minus-OOD sized gap): median pairs to a decision;
  (c) 0.52 vs 0.41 over 300 pairs: power of the hybrid against the fixed-count exact McNemar.

Acceptance (issue 38): (a) <= alpha; (b) median <= 40; (c) hybrid within 3 points of McNemar. The
vectorised rule is checked against `sequential_decision` on the first paths of every scenario.

    python benchmarks/sequential.py [--quick] [--paths N] [--alpha 0.05]
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from scipy.stats import binom, binomtest

from _common import ROOT, table, write_result

sys.path.insert(0, str(ROOT / "src"))
from spabench.analysis.power import exact_mcnemar_power  # noqa: E402
from spabench.analysis.sequential import (  # noqa: E402
    alpha_split,
    decide_paths,
    discordant_log_evalue,
    mcnemar_pvalues,
    sequential_decision,
    simulate_pairs,
)

SEED = 20261206
RHO = 0.5          # the correlated no-difference case: corr(a, b) within a pair
CHECKED = 200      # paths per scenario re-decided by sequential_decision, one at a time


def simulate(rate_a: float, rate_b: float, pairs: int, paths: int, seed: int, rho: float = 0.0):
    """(a, b) 0/1 arrays of shape (paths, pairs) from the library's `simulate_pairs` (which `spabench
    power` uses too). Independent outcomes, or with rho > 0 (equal rates only) a pair shares one
    outcome with probability rho, else the two are independent: corr(a, b) = rho."""
    if rho:
        assert rate_a == rate_b
        p11 = rho * rate_a + (1 - rho) * rate_a * rate_a
        p10 = p01 = (1 - rho) * rate_a * (1 - rate_a)
    else:
        p11, p10, p01 = rate_a * rate_b, rate_a * (1 - rate_b), (1 - rate_a) * rate_b
    return simulate_pairs(p10, p01, p11, pairs, paths, seed)


def decide(a: np.ndarray, b: np.ndarray, alpha: float, max_pairs: int | None):
    """Per path: decision (+1 b, -1 a, 0 none) and pairs used, by the rule of `sequential_decision`."""
    return decide_paths(a, b, alpha, max_pairs)


mcnemar_p = mcnemar_pvalues


def check_against_library(a, b, alpha, max_pairs, decision, used) -> None:
    for i in range(min(CHECKED, len(a))):
        result = sequential_decision(a[i], b[i], alpha=alpha, max_pairs=max_pairs)
        expected = {"a": -1, "b": 1, None: 0}[result.decision]
        assert expected == decision[i], (i, result, decision[i])
        if result.decision is not None:
            assert result.pairs_used == used[i], (i, result, used[i])


def exact_false_decisions(n: int, psi: float, alpha: float, max_pairs: int | None) -> float:
    """P(a false decision within n pairs) with no difference and discordance psi: the number of
    discordant pairs is Binomial(n, psi) and their signs fair coins; the walk over (b_wins, a_wins)
    is absorbed where the e-process crosses, and the hybrid's final test adds its region at d."""
    split = alpha_split(alpha, max_pairs)
    log_threshold = math.log(1.0 / split.alpha_seq)
    mass, crossed = np.ones(1), 0.0
    by_d = np.zeros(n + 1)
    for d in range(n + 1):
        if d:
            step = np.zeros(d + 1)
            step[:-1] += 0.5 * mass
            step[1:] += 0.5 * mass
            wb = np.arange(d + 1)
            hit = discordant_log_evalue(wb, d - wb) >= log_threshold
            crossed += float(step[hit].sum())
            step[hit] = 0.0
            mass = step
        by_d[d] = crossed
        if max_pairs is not None:
            wb = np.arange(d + 1)
            by_d[d] += float(mass[mcnemar_p(wb, d - wb) <= split.alpha_final].sum())
    return float(np.sum(binom.pmf(np.arange(n + 1), n, psi) * by_d))


def interval(k: int, n: int) -> tuple[float, float]:
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 paths per scenario instead of 10,000")
    parser.add_argument("--paths", type=int, default=None)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    paths = args.paths or (2000 if args.quick else 10_000)
    alpha = args.alpha
    started = time.perf_counter()
    rows, results, checks = [], {"null": [], "large_gap": {}, "small_gap": {}}, {}

    # (a) no difference
    worst = 0.0
    for k, (rate, rho) in enumerate((r, c) for r in (0.2, 0.5, 0.8) for c in (0.0, RHO)):
        a, b = simulate(rate, rate, 300, paths, SEED + k, rho)
        psi = 2 * rate * (1 - rate) * (1 - rho)
        fixed = mcnemar_p((a < b).sum(1), (a > b).sum(1)) <= alpha
        for rule, max_pairs in (("sequential", None), ("hybrid, max_pairs=300", 300)):
            decision, used, _ = decide(a, b, alpha, max_pairs)
            check_against_library(a, b, alpha, max_pairs, decision, used)
            false = int((decision != 0).sum())
            low, high = interval(false, paths)
            exact = exact_false_decisions(300, psi, alpha, max_pairs)
            worst = max(worst, false / paths, exact)
            label = f"no difference, {rate:g} vs {rate:g}, {'corr. 0.5' if rho else 'independent'}"
            rows.append((label, rule, paths, f"false decisions {pct(false / paths)} [{pct(low)}, {pct(high)}]; "
                         f"exact {pct(exact)}", f"McNemar at 300: {pct(fixed.mean())}"))
            results["null"].append({"rate": rate, "rho": rho, "rule": rule, "paths": paths, "false": false,
                                    "rate_false": false / paths, "ci": [low, high], "exact": exact,
                                    "mcnemar_fixed_300": float(fixed.mean())})
    checks["null_false_decisions_le_alpha"] = bool(worst <= alpha)

    # (b) 0.86 vs 0.50 over 120 pairs
    a, b = simulate(0.86, 0.50, 120, paths, SEED + 100)
    fixed = mcnemar_p((a < b).sum(1), (a > b).sum(1)) <= alpha
    for rule, max_pairs in (("sequential", None), ("hybrid, max_pairs=120", 120)):
        decision, used, _ = decide(a, b, alpha, max_pairs)
        check_against_library(a, b, alpha, max_pairs, decision, used)
        to_decision = np.where(decision != 0, used, np.inf)
        med = float(np.median(to_decision))
        right, wrong = float((decision == -1).mean()), float((decision == 1).mean())
        rows.append(("0.86 vs 0.50, 120 pairs", rule, paths,
                     f"median {med:g} pairs to a decision (quartiles {np.percentile(to_decision, 25):g}-"
                     f"{np.percentile(to_decision, 75):g}); decided {pct(right)}, wrong {pct(wrong)}",
                     f"McNemar at 120: 120 pairs, power {pct(fixed.mean())}"))
        results["large_gap"][rule] = {"median_pairs": med, "decided_right": right, "decided_wrong": wrong,
                                      "mcnemar_fixed_120": float(fixed.mean())}
        checks[f"large_gap_median_le_40 ({rule})"] = bool(med <= 40)

    # (c) 0.52 vs 0.41 over 300 pairs
    a, b = simulate(0.52, 0.41, 300, paths, SEED + 200)
    fixed = mcnemar_p((a < b).sum(1), (a > b).sum(1)) <= alpha
    fixed_right = float((fixed & ((a > b).sum(1) > (a < b).sum(1))).mean())
    analytic = exact_mcnemar_power(300, 0.52 * 0.59, 0.41 * 0.48, alpha)
    for rule, max_pairs in (("sequential", None), ("hybrid, max_pairs=300", 300)):
        decision, used, _ = decide(a, b, alpha, max_pairs)
        check_against_library(a, b, alpha, max_pairs, decision, used)
        power = float((decision == -1).mean())
        rows.append(("0.52 vs 0.41, 300 pairs", rule, paths,
                     f"power {pct(power)}, mean pairs {used.mean():.0f}",
                     f"McNemar at 300: power {pct(fixed_right)} (exact {pct(analytic)})"))
        results["small_gap"][rule] = {"power": power, "mean_pairs": float(used.mean()),
                                      "mcnemar_fixed_300": fixed_right, "mcnemar_exact_power": analytic}
    hybrid = results["small_gap"]["hybrid, max_pairs=300"]["power"]
    checks["small_gap_hybrid_within_3_points"] = bool(hybrid >= fixed_right - 0.03)

    seconds = time.perf_counter() - started
    print(f"sequential comparisons, alpha {alpha:g}, {paths:,} simulated comparisons per scenario "
          f"(seed {SEED}); {seconds:.1f} s\n")
    header = ("scenario", "rule", "paths", "result", "anchor: fixed-count exact McNemar")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    print()
    print(table([(name, "met" if ok else "NOT MET") for name, ok in checks.items()], ("acceptance", "")))
    write_result("sequential", {"alpha": alpha, "paths": paths, "seed": SEED, "seconds": seconds,
                                "split_120": alpha_split(alpha, 120).__dict__,
                                "split_300": alpha_split(alpha, 300).__dict__,
                                "results": results, "checks": checks})
    if not args.quick and not all(checks.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
