"""Import speed: `spabench import lerobot` of a LeRobotDataset v3, five cameras 640x480 @ 30 Hz.

A dataset of --episodes x --seconds is written once with LeRobot's own writer (LeRobotDataset.create,
add_frame with textured frames, save_episode, finalize: several episodes end to end in one MP4 per
camera, LeRobot 0.6.1's default encoder). Then, side by side on that dataset, median over --runs:
  spabench   spabench.record.lerobot_import.import_lerobot: metadata through LeRobotDatasetMetadata,
             each episode's columns from its data file, the MP4s hard-linked (or copied), nothing decoded
  lerobot    the anchor: every frame read through LeRobotDataset (all five cameras decoded), the least
             work an import that re-encoded the videos would do before encoding anything
Reported: seconds per recorded second, x real time (the issue asks >= 50x), and lerobot / spabench.

    python benchmarks/import_lerobot.py [--quick] [--runs N] [--seconds S] [--episodes E] [--no-anchor]
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import camera_frames, rollout_args, say_run, speed_against_lerobot

CAMS = ("wrist", "middle", "left", "right", "overhead")
FPS = 30
NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]


def write_dataset(root: Path, episodes: int, seconds: float, width: int, height: int) -> Path:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    banks = {c: camera_frames(width, height, 30, seed=i) for i, c in enumerate(CAMS)}
    features: dict = {f"observation.images.{c}": {"dtype": "video", "shape": (height, width, 3),
                                                  "names": ["height", "width", "channels"]} for c in CAMS}
    features["observation.state"] = {"dtype": "float32", "shape": (6,), "names": NAMES}
    features["action"] = {"dtype": "float32", "shape": (6,), "names": NAMES}
    ds = LeRobotDataset.create("bench/import", FPS, features, root=root, robot_type="so101_follower", use_videos=True)
    n = int(seconds * FPS)
    for e in range(episodes):
        for k in range(n):
            state = np.full(6, float(k), dtype=np.float32)
            frame = {f"observation.images.{c}": banks[c][k % 30] for c in CAMS}
            frame.update({"observation.state": state, "action": state, "task": f"put the cube in bowl {e % 2}"})
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return root


def import_spabench(dataset: Path, out: Path) -> float:
    from spabench.record.lerobot_import import import_lerobot

    t0 = time.perf_counter()
    result = import_lerobot(dataset, out)
    elapsed = time.perf_counter() - t0
    print(f"  spabench: {result.episodes} episodes, videos {result.videos_linked} linked, "
          f"{result.videos_copied} copied", flush=True)
    return elapsed


def read_lerobot(dataset: Path) -> float:
    """The anchor: every frame through LeRobotDataset (decoding all cameras)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    t0 = time.perf_counter()
    ds = LeRobotDataset("bench/import", root=dataset)
    for i in range(len(ds)):
        ds[i]
    return time.perf_counter() - t0


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ap = rollout_args(__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=None, help="episodes in the dataset (default 3)")
    ap.add_argument("--no-anchor", action="store_true", help="spabench only (the anchor decodes every frame)")
    args = ap.parse_args()
    seconds = args.seconds or (5.0 if args.quick else 20.0)
    runs = args.runs or (2 if args.quick else 3)
    episodes = args.episodes or 3
    recorded = seconds * episodes
    workdir = Path(tempfile.mkdtemp(prefix="spabench_import_"))
    results: dict[str, list[float]] = {"spabench": []} if args.no_anchor else {"spabench": [], "lerobot": []}
    try:
        t0 = time.perf_counter()
        dataset = write_dataset(workdir / "dataset", episodes, seconds, args.width, args.height)
        print(f"dataset written by LeRobot in {time.perf_counter() - t0:.1f} s", flush=True)
        import_spabench(dataset, workdir / "warm-up")   # module imports (LeRobot, torch) out of the timings
        for run in range(runs):
            results["spabench"].append(import_spabench(dataset, workdir / f"ours_{run}"))
            if "lerobot" in results:
                results["lerobot"].append(read_lerobot(dataset))
            shutil.rmtree(workdir / f"ours_{run}", ignore_errors=True)
            say_run(run, runs, results, recorded)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    speed_against_lerobot("import_lerobot", "Import", results, "seconds", episodes=episodes, seconds=seconds, runs=runs,
                          width=args.width, height=args.height, fps=FPS)


if __name__ == "__main__":
    main()
