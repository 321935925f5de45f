"""Control loop at 30 Hz with five 640x480 cameras recording, against the emulated arm.

Real stack: LeRobot SO101Follower on the emulated Feetech bus (pty), five spabench_replay cameras
(test pattern, 640x480 @ 30 fps), an openpi websocket server on loopback answering 30-step chunks
(the client sends middle + wrist at native resolution), the Recorder (HDF5 + 5 MP4 encoder
processes), motion detector and status statistics as observers.

Reports (median over runs): achieved loop rate, p50/p99 period error, harness work per tick
(observe + policy broker + EMA + envelope + act + observers; excludes the pacing sleep), of which the
recorder's share, and dropped video frames.

    python benchmarks/control_loop.py [--quick] [--runs N] [--seconds S]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import (  # also puts the repo root on sys.path
    emulated_rollout,
    median,
    pct,
    rollout_args,
    rollout_plan,
    table,
    write_result,
)

CAMS = ("wrist", "middle", "left", "right", "overhead")
HORIZON = 30


class Timed:
    """Wraps an observer and accumulates the time spent in its on_step."""

    def __init__(self, inner):
        self.inner, self.costs = inner, []

    def on_episode_start(self, meta):
        self.inner.on_episode_start(meta)

    def on_step(self, step):
        t0 = time.perf_counter()
        self.inner.on_step(step)
        self.costs.append(time.perf_counter() - t0)

    def on_event(self, event):
        self.inner.on_event(event)

    def on_episode_end(self, result):
        self.inner.on_episode_end(result)


def one_run(seconds: float, width: int, height: int, workdir: Path, run: int) -> dict:
    from spabench.operator.status import LoopStats
    from spabench.record.reader import EpisodeReader
    from spabench.record.recorder import Recorder
    from spabench.rollout.ema import EmaFilter
    from spabench.rollout.loop import Rollout
    from spabench.rollout.observers import MotionDetector
    from spabench.rollout.types import EpisodeMeta

    with emulated_rollout(workdir, seconds, HORIZON, CAMS, width, height) as (bench, card, broker):
        recorder = Recorder(workdir / f"run{run}")
        timed = Timed(recorder)
        others = [Timed(MotionDetector()), Timed(LoopStats())]
        try:
            rollout = Rollout(bench, broker, card, EmaFilter(card.ema_alpha), seconds,
                              [timed, *others], go_home_after=False)
            result = rollout.run(EpisodeMeta(attempt_id=f"b{run}"), "benchmark")
            recorder.wait_idle(300)
        finally:
            recorder.close()
    assert result.valid, result
    with EpisodeReader(workdir / f"run{run}" / "episodes" / f"b{run}") as ep:
        ts, period, work = ep.timestamps, ep.array("timing/period_s")[1:], ep.array("timing/work_s")
        drops = sum(ep.attrs["dropped_frames"].values())
        kept = {c: int((ep.frame_index(c) >= 0).sum()) for c in CAMS}
    err = np.abs(period - 1 / 30) * 1e3
    n = min(len(work), len(timed.costs))
    total = (work[:n] + np.asarray(timed.costs[:n]) + sum(np.asarray(o.costs[:n]) for o in others)) * 1e3
    return {"steps": len(ts), "rate_hz": (len(ts) - 1) / (ts[-1] - ts[0]), "period_err_p50_ms": pct(err, 50),
            "period_err_p99_ms": pct(err, 99), "overhead_p50_ms": pct(total, 50), "overhead_p99_ms": pct(total, 99),
            "observe_to_act_p50_ms": pct(work, 50) * 1e3, "observe_to_act_p99_ms": pct(work, 99) * 1e3,
            "recorder_p50_ms": pct(timed.costs, 50) * 1e3, "recorder_p99_ms": pct(timed.costs, 99) * 1e3,
            "dropped_frames": drops, "frames_recorded": sum(kept.values())}


def main() -> None:
    args = rollout_args(__doc__.splitlines()[0]).parse_args()
    seconds, runs = rollout_plan(args)
    workdir = Path(tempfile.mkdtemp(prefix="spabench_loop_"))
    results = []
    try:
        for run in range(runs):
            results.append(one_run(seconds, args.width, args.height, workdir, run))
            print(f"run {run + 1}/{runs}: {results[-1]['rate_hz']:.2f} Hz, overhead p50 {results[-1]['overhead_p50_ms']:.1f} ms",
                  flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {k: median([r[k] for r in results]) for k in results[0]}
    print(f"\nControl loop, {seconds:g} s at 30 Hz, 5 cameras {args.width}x{args.height} recording, median of {runs}")
    print(table([(k, v) for k, v in summary.items()], ("metric", "value")))
    path = write_result("control_loop", {"loadavg_1min_at_end": __import__("os").getloadavg()[0], "seconds": seconds, "runs": runs, "width": args.width, "height": args.height,
                                         "summary": summary, "runs_detail": results})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
