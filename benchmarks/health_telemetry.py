"""Motor telemetry's cost to the 30 Hz control loop: p99 period error with and without it.

Real stack as in control_loop.py (LeRobot SO101Follower on the emulated Feetech bus, an openpi server
on loopback), no cameras recorded (the loop and the bus only, so the difference is telemetry's): the
same rollout with the bench's HealthMonitor at the default rate (6 Hz: one sync read of all six
motors every fifth tick, in the tick's slack) and without it, alternating A B A B, medians reported.
Target (issue 20): p99 period error with telemetry within 1 ms of the loop without it.

    python benchmarks/health_telemetry.py [--runs N] [--seconds S]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np

from _common import emulated_rollout, median, pct, table, write_result

HORIZON = 30


class Periods:
    """Observer: the loop's tick periods."""

    def __init__(self):
        self.periods: list[float] = []

    def on_step(self, step):
        if np.isfinite(step.period_s):
            self.periods.append(step.period_s)


def one_run(seconds: float, workdir: Path, telemetry: bool) -> dict:
    from spabench.rollout.ema import EmaFilter
    from spabench.rollout.loop import Rollout
    from spabench.rollout.types import EpisodeMeta

    cameras = ("wrist", "middle", "left", "right", "overhead")
    with emulated_rollout(workdir, seconds, HORIZON, cameras) as (bench, card, broker):
        periods = Periods()
        health = bench.health_monitor() if telemetry else None
        result = Rollout(bench, broker, card, EmaFilter(card.ema_alpha), seconds, [periods],
                         go_home_after=False, health=health).run(EpisodeMeta(attempt_id="b"), "benchmark")
    assert result.valid, result
    err = np.abs(np.asarray(periods.periods) - 1 / 30) * 1e3
    return {"p50_ms": pct(err, 50), "p99_ms": pct(err, 99), "samples": health.summary.samples if health else 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="spabench_health_"))
    runs = {False: [], True: []}
    try:
        for i in range(args.runs):
            for telemetry in (False, True):
                runs[telemetry].append(one_run(args.seconds, workdir, telemetry))
                r = runs[telemetry][-1]
                print(f"run {i + 1}/{args.runs} telemetry={telemetry}: p99 {r['p99_ms']:.2f} ms", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {f"{k}_{'with' if t else 'without'}": median([r[k] for r in runs[t]])
               for t in (False, True) for k in ("p50_ms", "p99_ms")}
    summary["p99_difference_ms"] = summary["p99_ms_with"] - summary["p99_ms_without"]
    summary["samples_per_run"] = median([r["samples"] for r in runs[True]])
    print(f"\n30 Hz loop period error, {args.seconds:g} s rollouts, median of {args.runs} runs each (A B A B)")
    print(table(list(summary.items()), ("metric", "value")))
    path = write_result("health_telemetry", {"loadavg_1min_at_end": __import__("os").getloadavg()[0],
                                             "seconds": args.seconds, "runs": args.runs, "summary": summary,
                                             "without": runs[False], "with": runs[True]})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
