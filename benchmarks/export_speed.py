"""Export speed: seconds of export per second of recording, five cameras 640x480 @ 30 Hz.

A campaign of --episodes recorded episodes (spabench Recorder, paced in real time, textured frames)
is exported to a LeRobotDataset v3 two ways, side by side on the same recording:
  spabench   `spabench export lerobot` (spabench.record.export): the recorded H.264 streams are
             copied into the v3 layout, parquet and stats written by LeRobot's own writer.
  lerobot    LeRobot's own encoding path (what the export did before): every recorded frame decoded,
             handed to LeRobotDataset.add_frame (PNG staging), then save_episode() encodes the videos
             with LeRobot 0.6.1's default encoder.
Reported: export seconds per recorded second (lower is better), its inverse (x real time), and
lerobot / spabench. Medians over --runs.

    python benchmarks/export_speed.py [--quick] [--runs N] [--seconds S] [--episodes E] [--no-anchor]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import camera_frames, pace, rollout_args, say_run, speed_against_lerobot

CAMS = ("wrist", "middle", "left", "right", "overhead")
FPS = 30


def record_campaign(root: Path, episodes: int, seconds: float, width: int, height: int) -> Path:
    from spabench.ledger import Ledger, TrialRow
    from spabench.record.recorder import Recorder, RecorderConfig
    from spabench.rollout.types import EpisodeMeta, EpisodeResult, StepRecord

    banks = {c: camera_frames(width, height, 30, seed=i) for i, c in enumerate(CAMS)}
    campaign = root / "campaign"
    campaign.mkdir(parents=True)
    rows = [TrialRow(trial_id=f"E{i}-P1", evaluation_id=f"E{i}", policy="bench", card="bench", alias="P1",
                     task="counting", condition="id", scene_id=f"s{i}", scene_condition="id", matched_group=None,
                     cell="c|a", withheld=False, instruction="Leave exactly 2 objects in the bowl.",
                     instruction_variant="original", timer_s=seconds, order=i) for i in range(episodes)]
    ledger = Ledger.create(campaign / "ledger.sqlite", rows, "bench")
    n = int(seconds * FPS)
    shape = banks[CAMS[0]][0].shape
    with Recorder(campaign, RecorderConfig(queue_frames=60)) as rec:
        for row in rows:
            attempt = ledger.begin_attempt(row.trial_id)
            rec.on_episode_start(EpisodeMeta(attempt_id=attempt, cameras=CAMS, control_hz=FPS,
                                             camera_shapes={c: shape for c in CAMS}))
            time.sleep(1.0)
            start = time.perf_counter()
            for k in range(n):
                # ticks at 30 Hz of rollout time, fed no faster than the encoders take them: on a
                # shared machine every tick still has its frame (this benchmark measures the export)
                pace(start, k, 1 / FPS)
                while rec.pool.backlog() > 0.5:
                    time.sleep(0.005)
                state = np.full(6, float(k))
                rec.on_step(StepRecord(k, k / FPS + 0.002, state, {c: banks[c][k % 30] for c in CAMS},
                                       state, state, chunk_id=k // 30))
            rec.on_episode_end(EpisodeResult("timer", True, None, n, seconds))
            rec.wait_idle(600)
            dropped = sum(rec._drops.values())
            if dropped:
                print(f"warning: {dropped} frames dropped while recording {attempt}; those cameras re-encode")
            ledger.finish_attempt(attempt, "complete", "timer", episode_path=f"episodes/{attempt}")
    ledger.close()
    return campaign


def export_spabench(campaign: Path, out: Path) -> float:
    from spabench.record.export import export_lerobot_dataset

    t0 = time.perf_counter()
    report = export_lerobot_dataset(campaign, out, progress=False)
    elapsed = time.perf_counter() - t0
    print(f"  spabench: {report.copied} camera streams copied, {report.reencoded} re-encoded", flush=True)
    return elapsed


def export_lerobot(campaign: Path, out: Path) -> float:
    """The anchor: LeRobot's own path, add_frame with every decoded frame, save_episode encodes."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from spabench.record.export import _camera_shapes, _quiet_third_party, episode_folders, features_for
    from spabench.record.reader import EpisodeReader

    with _quiet_third_party():
        return _export_lerobot(campaign, out, LeRobotDataset, _camera_shapes, episode_folders, features_for,
                               EpisodeReader)


def _by_row(ep, camera):
    """One frame per h5 row (the previous one held where the encoder dropped a frame)."""
    frames, current, position = ep.iter_frames(camera), None, -1
    for want in ep.frame_index(camera):
        while want >= 0 and position < want:
            current, position = next(frames), position + 1
        if current is None:
            current, position = next(frames), 0
        yield current


def _export_lerobot(campaign, out, LeRobotDataset, _camera_shapes, episode_folders, features_for, EpisodeReader):
    t0 = time.perf_counter()
    episodes = episode_folders(campaign)
    with EpisodeReader(episodes[0].folder) as first:
        shapes = _camera_shapes(first)
    ds = LeRobotDataset.create("bench/export", FPS, features_for(shapes), root=out, robot_type="so101_follower",
                               use_videos=True)
    for item in episodes:
        with EpisodeReader(item.folder) as ep:
            states = ep.states.astype(np.float32)
            streams = {c: _by_row(ep, c) for c in shapes}
            for k in range(len(states)):
                frame = {"observation.state": states[k], "action": states[k], "task": item.instruction}
                for c, stream in streams.items():
                    frame[f"observation.images.{c}"] = next(stream)
                ds.add_frame(frame)
            ds.save_episode()
    ds.finalize()
    return time.perf_counter() - t0


def main() -> None:
    ap = rollout_args(__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=None, help="recorded episodes (default 2)")
    ap.add_argument("--no-anchor", action="store_true",
                    help="spabench only (LeRobot's path takes about 16 s per recorded second; its ratio "
                         "is measured side by side on shorter recordings)")
    args = ap.parse_args()
    seconds = args.seconds or (10.0 if args.quick else 30.0)
    runs = args.runs or (2 if args.quick else 3)
    episodes = args.episodes or 2
    recorded = seconds * episodes
    workdir = Path(tempfile.mkdtemp(prefix="spabench_export_"))
    results = {"spabench": []} if args.no_anchor else {"spabench": [], "lerobot": []}
    try:
        campaign = record_campaign(workdir, episodes, seconds, args.width, args.height)
        for run in range(runs):
            results["spabench"].append(export_spabench(campaign, workdir / f"ours_{run}"))
            if "lerobot" in results:
                results["lerobot"].append(export_lerobot(campaign, workdir / f"lerobot_{run}"))
            shutil.rmtree(workdir / f"ours_{run}", ignore_errors=True)
            shutil.rmtree(workdir / f"lerobot_{run}", ignore_errors=True)
            say_run(run, runs, results, recorded)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    speed_against_lerobot("export_speed", "Export", results, "export_s", episodes=episodes, seconds=seconds, runs=runs,
                          width=args.width, height=args.height, fps=FPS)


if __name__ == "__main__":
    main()
