"""Shared helpers for the benchmarks: synthetic camera frames, statistics, result files, tables."""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests.support (emulated bus) lives in the repo, not the package


def camera_frames(width: int = 640, height: int = 480, n: int = 30, seed: int = 0) -> list[np.ndarray]:
    """A bank of n textured frames for one camera: a gradient, a moving block and mild sensor noise
    (noise keeps the encoder honest; flat frames compress unrealistically well)."""
    rng = np.random.default_rng(seed)
    ys = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    xs = np.linspace(0, 1, width, dtype=np.float32)[None, :, None]
    tint = rng.uniform(0.3, 1.0, 3).astype(np.float32)[None, None, :]
    base = 50 + 120 * xs * tint + 60 * ys
    frames = []
    for i in range(n):
        img = base + rng.normal(0, 4, (height, width, 1)).astype(np.float32)
        x0 = int((i / n) * (width - 80))
        img[height // 3: height // 3 + 80, x0: x0 + 80] = (200, 80, 60)
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return frames


def revision_before_added(path: str) -> str:
    """The commit before the first one that added `path` (a benchmark's default anchor)."""
    added = subprocess.run(["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--", path],
                           capture_output=True, text=True, check=True)
    commits = added.stdout.split()
    if not commits:
        raise SystemExit(f"no commit adds {path}; pass --base REV")
    return commits[-1] + "~1"


ROOT_PARTS = ("src", "conf", "tasks", "hardware", "policies")   # what spabench.paths.repo_root looks for, and cards


def export_source(revision: str, into: Path) -> Path:
    """`src` and the folders the code reads at run time (conf/, tasks/, hardware/, policies/, those the
    revision has) unpacked under `into`, an anchor tree that finds its own root; returns its src."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", revision],
                            capture_output=True, text=True, check=True).stdout.split()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, *[p for p in ROOT_PARTS if p in listed]],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def campaign_outcomes_csv(path: Path) -> Path:
    """The published campaign's outcomes (2,892 valid rollouts, tests/analysis' generator) as a CSV."""
    sys.path.insert(0, str(ROOT / "tests" / "analysis"))
    from analysis_synthetic import synthetic_campaign, write_csv

    campaign = synthetic_campaign()
    valid = sum(1 for r in campaign.rows if r["valid"] == "true")
    assert valid == 2892, valid
    return write_csv(path, campaign.rows)


def pct(values, q: float) -> float:
    values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    return float(np.percentile(values, q)) if len(values) else float("nan")


def median(values) -> float:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(statistics.median(values)) if values else float("nan")


def pace(start: float, k: int, period: float) -> None:
    """Sleep until start + k * period (absolute deadlines, like the control loop)."""
    deadline = start + k * period
    remaining = deadline - time.perf_counter()
    if remaining > 0.0015:
        time.sleep(remaining - 0.0015)
    while time.perf_counter() < deadline:
        pass


def write_result(name: str, data: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": name, "python": platform.python_version(), "machine": platform.machine(),
            "cpus": __import__("os").cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=float))
    return path


def say_run(run: int, runs: int, results: dict[str, list[float]], recorded: float) -> None:
    """One progress line per run of a spabench-vs-LeRobot timing (the anchor's time when it ran)."""
    anchor = f", lerobot {results['lerobot'][-1]:.2f} s" if "lerobot" in results else ""
    print(f"run {run + 1}/{runs}: spabench {results['spabench'][-1]:.2f} s{anchor} for {recorded:g} s recorded",
          flush=True)


def speed_against_lerobot(name: str, verb: str, results: dict[str, list[float]], seconds_key: str, *,
                          episodes: int, seconds: float, runs: int, width: int, height: int, fps: int) -> Path:
    """Medians of spabench's and LeRobot's times for `episodes` x `seconds` of five-camera episodes: the
    table, the ratio LeRobot / spabench, and benchmarks/results/<name>.json (with the load at the end)."""
    import os

    recorded = episodes * seconds
    summary = {}
    for path_name, times in results.items():
        t = median(times)
        summary[path_name] = {seconds_key: t, "s_per_recorded_s": t / recorded, "x_real_time": recorded / t}
    ratio = summary["lerobot"][seconds_key] / summary["spabench"][seconds_key] if "lerobot" in summary else None
    rows = [(k, v[seconds_key], v["s_per_recorded_s"], v["x_real_time"]) for k, v in summary.items()]
    print(f"\n{verb} of {episodes} x {seconds:g} s, 5 cameras {width}x{height} @ {fps} Hz, median of {runs}")
    print(table(rows, ("path", "seconds", "s_per_recorded_s", "x_real_time")))
    if ratio is not None:
        print(f"lerobot / spabench: {ratio:.1f}x")
    path = write_result(name, {"loadavg_1min_at_end": os.getloadavg()[0], "seconds": seconds, "episodes": episodes,
                               "runs": runs, "width": width, "height": height, "fps": fps, "summary": summary,
                               "lerobot_over_spabench": ratio, "runs_detail": results})
    print(f"\nwritten {path}")
    return path


def table(rows: list[tuple], header: tuple) -> str:
    cells = [tuple(str(c) for c in header)] + [tuple(_fmt(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if not np.isfinite(value) else f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def rollout_args(description: str) -> argparse.ArgumentParser:
    """The options every five-camera rollout benchmark takes (--quick, --runs, --seconds, size)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="10 s rollouts, 2 runs")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    return ap


def rollout_plan(args) -> tuple[float, int]:
    """(seconds per rollout, runs) from rollout_args' options: 60 s x 3, or 10 s x 2 with --quick."""
    return args.seconds or (10.0 if args.quick else 60.0), args.runs or (2 if args.quick else 3)


def ramp_infer(horizon: int):
    """A stand-in openpi policy: chunks that hold the measured joints and ramp the shoulder pan."""

    def infer(obs):
        state = np.asarray(obs["observation/state"], dtype=np.float64)
        actions = np.tile(state, (horizon, 1))
        actions[:, 0] += np.linspace(0.5, 3.0, horizon)
        return {"actions": actions.astype(np.float32)}

    return infer


def emulated_calibration(workdir: Path) -> Path:
    """A calibration folder matching the emulated Feetech bus (tests.support.feetech_bus)."""
    import shutil

    from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE

    calib = workdir / "calibration"
    calib.mkdir(exist_ok=True)
    shutil.copy(DEFAULT_CALIBRATION_FILE, calib / "spabench_follower.json")
    return calib


@contextlib.contextmanager
def emulated_rollout(workdir: Path, seconds: float, horizon: int, cameras: tuple[str, ...],
                     width: int = 32, height: int = 24):
    """(bench, card, broker) for one rollout: the real SO101Follower on the emulated Feetech bus with
    replay cameras, a ramping openpi server on loopback and its client, all torn down on exit."""
    from tests.support.feetech_bus import EmulatedBus

    from spabench.bench.bench import make_bench
    from spabench.bench.config import BenchConfig
    from spabench.policy.broker import ActionBroker
    from spabench.policy.card import PolicyCard
    from spabench.policy.factory import make_client
    from spabench.serve.openpi_server import OpenPiServer

    calib = emulated_calibration(workdir)
    with EmulatedBus() as bus, OpenPiServer(ramp_infer(horizon), {"horizon": horizon}, port=0) as server:
        cfg = BenchConfig.from_mapping({
            "type": "so101", "port": bus.port, "robot_id": "spabench_follower", "calibration_dir": str(calib),
            "cameras": {c: {"type": "spabench_replay", "index_or_path": "pattern", "width": width, "height": height,
                            "fps": 30} for c in cameras},
            "fps": 30, "max_relative_target": 10.0})
        card = PolicyCard(name="bench", protocol="openpi", port=server.port, horizon=horizon, control_hz=30,
                          timer_s=seconds, ema_alpha=0.25, request_threshold=5,
                          cameras={"observation/image": "middle", "observation/wrist_image": "wrist"})
        bench = make_bench(cfg)
        bench.connect()
        client = make_client(card)
        client.connect()
        broker = ActionBroker(client, card)
        try:
            yield bench, card, broker
        finally:
            broker.stop()
            client.close()
            bench.disconnect()
