"""Operator dead time: from the end of a five-camera 640x480 rollout to ready-for-next-trial.

Both recorders get the same frames at 30 Hz in real time (five cameras, 640x480, textured):
  spabench   Recorder.on_step per tick; dead time = Recorder.on_episode_end (arrays durable; the MP4s
             finish in background encoder processes while the next trial starts).
  lerobot    LeRobot's own recording path as `lerobot-rollout --strategy.type=episodic` configures it
             (LeRobotDataset.create with 4 image-writer threads per camera, PNG then encode,
             streaming_encoding=False: the 0.6.1 default); dead time = save_episode().
  lerobot_streaming   the same with streaming_encoding=True (LeRobot's faster opt-in mode).
Ratio = LeRobot dead time / spabench dead time. Medians over --runs.

    python benchmarks/dead_time.py [--quick] [--runs N] [--seconds S]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import camera_frames, median, pace, pct, rollout_args, rollout_plan, table, write_result

CAMS = ("wrist", "middle", "left", "right", "overhead")
FPS = 30


def _banks(width, height):
    return {c: camera_frames(width, height, 30, seed=i) for i, c in enumerate(CAMS)}


def run_spabench(seconds: float, banks, workdir: Path, run: int) -> dict:
    from spabench.record.recorder import Recorder
    from spabench.rollout.types import EpisodeMeta, EpisodeResult, StepRecord

    n = int(seconds * FPS)
    shape = banks[CAMS[0]][0].shape
    rec = Recorder(workdir / f"spabench_{run}")
    attempt = f"bench-{run}"
    costs = []
    rec.on_episode_start(EpisodeMeta(attempt_id=attempt, cameras=CAMS, camera_shapes={c: shape for c in CAMS},
                                     control_hz=FPS))
    time.sleep(1.0)  # encoder processes spawn before the timer, as in a real trial
    start = time.perf_counter()
    for k in range(n):
        pace(start, k, 1 / FPS)
        state = np.full(6, float(k))
        step = StepRecord(k, k / FPS, state, {c: banks[c][k % 30] for c in CAMS}, state, state, chunk_id=k // 30)
        t0 = time.perf_counter()
        rec.on_step(step)
        costs.append(time.perf_counter() - t0)
    end = time.perf_counter()
    rec.on_episode_end(EpisodeResult("timer", True, None, n, seconds))
    ready = time.perf_counter()
    rec.wait_idle(600)
    videos_done = time.perf_counter()
    drops = sum(rec._drops.values())
    rec.close()
    return {"dead_time_s": ready - end, "videos_done_s": videos_done - end, "tick_cost_p50_ms": pct(costs, 50) * 1e3,
            "tick_cost_p99_ms": pct(costs, 99) * 1e3, "tick_cost_max_ms": max(costs) * 1e3, "dropped_frames": drops,
            "frames": n * len(CAMS)}


def run_lerobot(seconds: float, banks, workdir: Path, run: int, streaming: bool) -> dict:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from spabench.record.export import features_for

    n = int(seconds * FPS)
    shape = banks[CAMS[0]][0].shape
    root = workdir / f"lerobot_{'s' if streaming else 'd'}_{run}"
    ds = LeRobotDataset.create(f"bench/rollout_{run}", FPS, features_for({c: shape for c in CAMS}), root=root,
                               robot_type="so101_follower", use_videos=True, image_writer_processes=0,
                               image_writer_threads=4 * len(CAMS), streaming_encoding=streaming,
                               encoder_queue_maxsize=30)
    costs = []
    start = time.perf_counter()
    for k in range(n):
        pace(start, k, 1 / FPS)
        state = np.full(6, float(k), np.float32)
        frame = {"observation.state": state, "action": state, "task": "bench"}
        for c in CAMS:
            frame[f"observation.images.{c}"] = banks[c][k % 30]
        t0 = time.perf_counter()
        ds.add_frame(frame)
        costs.append(time.perf_counter() - t0)
    end = time.perf_counter()
    ds.save_episode()
    ready = time.perf_counter()
    ds.finalize()
    return {"dead_time_s": ready - end, "tick_cost_p50_ms": pct(costs, 50) * 1e3, "tick_cost_p99_ms": pct(costs, 99) * 1e3,
            "tick_cost_max_ms": max(costs) * 1e3, "late_ticks": int(sum(c > 1 / FPS for c in costs)),
            "frames": n * len(CAMS)}


def main() -> None:
    ap = rollout_args(__doc__.splitlines()[0])
    ap.add_argument("--no-streaming", action="store_true", help="skip LeRobot's streaming-encoding variant")
    args = ap.parse_args()
    seconds, runs = rollout_plan(args)
    banks = _banks(args.width, args.height)
    systems = {"spabench": [], "lerobot": []}
    if not args.no_streaming:
        systems["lerobot_streaming"] = []
    workdir = Path(tempfile.mkdtemp(prefix="spabench_dead_time_"))
    try:
        for run in range(runs):
            systems["spabench"].append(run_spabench(seconds, banks, workdir, run))
            systems["lerobot"].append(run_lerobot(seconds, banks, workdir, run, streaming=False))
            if "lerobot_streaming" in systems:
                systems["lerobot_streaming"].append(run_lerobot(seconds, banks, workdir, run, streaming=True))
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir()
            print(f"run {run + 1}/{runs}: " + ", ".join(f"{k} {v[-1]['dead_time_s']:.2f} s" for k, v in systems.items()),
                  flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {k: {m: median([r.get(m, float("nan")) for r in v]) for m in v[0]} for k, v in systems.items()}
    ours = summary["spabench"]["dead_time_s"]
    for k in summary:
        summary[k]["ratio_vs_spabench"] = summary[k]["dead_time_s"] / ours if ours > 0 else float("nan")
    rows = [(k, s["dead_time_s"], s.get("videos_done_s", float("nan")), s["tick_cost_p50_ms"], s["tick_cost_p99_ms"],
             s["tick_cost_max_ms"], s.get("dropped_frames", 0), s["ratio_vs_spabench"]) for k, s in summary.items()]
    print(f"\nDead time after a {seconds:g} s rollout, 5 cameras {args.width}x{args.height} @ {FPS} Hz, median of {runs}")
    print(table(rows, ("recorder", "dead_time_s", "videos_done_s", "tick_p50_ms", "tick_p99_ms", "tick_max_ms",
                       "dropped", "ratio")))
    path = write_result("dead_time", {"loadavg_1min_at_end": __import__("os").getloadavg()[0], "seconds": seconds, "runs": runs, "width": args.width, "height": args.height,
                                      "fps": FPS, "summary": summary, "runs_detail": systems})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
