"""Export recorded episodes to a LeRobotDataset v3 (for training or for LeRobot's own tools).

One dataset episode per complete attempt (plan order), task = the instruction the policy got.
Features: `observation.state` and `action` (the EXECUTED action, after the EMA filter and the safety
envelope: what the arm was told to do), both 6-D in vocabulary.JOINTS order, plus one video
feature `observation.images.<camera>` per recorded camera, decoded from our MP4s. The export streams:
each camera is decoded frame by frame alongside the HDF5 rows, so memory stays flat for 60 s
episodes. Ticks where no action was sent (waiting for the first chunk) get the measured state as
action (the arm held its position); ticks whose frame was dropped repeat the camera's previous frame.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

import numpy as np

from spabench.errors import DataError
from spabench.record.reader import EpisodeReader
from spabench.suite.vocabulary import JOINTS

log = logging.getLogger(__name__)

ROBOT_TYPE = "so101_follower"


def episode_folders(campaign_dir: Path, include_invalid: bool = False) -> list[tuple[str, Path, str]]:
    """(attempt_id, folder, instruction) of the campaign's recorded attempts in plan order."""
    from spabench.ledger import Ledger

    ledger = Ledger.open(campaign_dir, readonly=True)
    try:
        out = []
        for trial in ledger.trials():
            for attempt in ledger.attempts_for(trial.trial_id):
                if attempt.status != "complete" and not (include_invalid and attempt.status == "invalid"):
                    continue
                if not attempt.episode_path:
                    continue
                out.append((attempt.attempt_id, campaign_dir / attempt.episode_path, trial.instruction))
        return out
    finally:
        ledger.close()


def features_for(cameras: dict[str, tuple[int, int, int]]) -> dict:
    names = [f"{j}.pos" for j in JOINTS]
    feats = {
        "observation.state": {"dtype": "float32", "shape": (len(JOINTS),), "names": names},
        "action": {"dtype": "float32", "shape": (len(JOINTS),), "names": names},
    }
    for cam, shape in cameras.items():
        feats[f"observation.images.{cam}"] = {"dtype": "video", "shape": tuple(int(v) for v in shape),
                                              "names": ["height", "width", "channels"]}
    return feats


def _frames_by_step(ep: EpisodeReader, camera: str) -> Iterator[np.ndarray]:
    """One image per HDF5 row: the row's video frame, or the previous one where it was dropped."""
    index = ep.frame_index(camera)
    frames = ep.iter_frames(camera)
    current, position = None, -1
    for want in index:
        if want >= 0:
            while position < want:
                current = next(frames)
                position += 1
        if current is None:  # leading dropped frames: use the first frame there is
            current = next(frames)
            position = 0
        yield current


def _camera_shapes(ep: EpisodeReader) -> dict[str, tuple[int, int, int]]:
    shapes = ep.attrs.get("camera_shapes") or {}
    out = {}
    for cam in ep.cameras:
        if cam in shapes:
            out[cam] = tuple(shapes[cam])
        elif ep.video_path(cam).exists():
            out[cam] = ep.first_frame(cam).shape
    return out


def export_lerobot_dataset(campaign_dir: str | os.PathLike, out: str | os.PathLike, repo_id: str | None = None,
                           include_invalid: bool = False, fps: int | None = None) -> Path:
    """Write the dataset to `out` (new, empty, or an earlier export: spabench.outputs). Returns its root."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    campaign_dir = Path(campaign_dir).resolve()
    out = Path(out).resolve()
    from spabench.outputs import replace_output

    episodes = episode_folders(campaign_dir, include_invalid)
    if not episodes:
        raise DataError(campaign_dir, "no complete recorded attempt to export")
    with EpisodeReader(episodes[0][1]) as first:
        shapes = _camera_shapes(first)
        rate = int(round(float(first.attrs.get("control_hz") or 30)))
    fps = fps or rate
    repo_id = repo_id or f"spabench/{campaign_dir.name}"
    with replace_output(out, "export lerobot", create=False) as staging:
        exported = _write_dataset(LeRobotDataset.create(
            repo_id=repo_id, fps=fps, features=features_for(shapes), root=staging, robot_type=ROBOT_TYPE,
            use_videos=True), episodes, shapes)
    log.info("exported %d episode(s) to %s", exported, out)
    return out


def _write_dataset(dataset, episodes: list[tuple[str, Path, str]], shapes: dict) -> int:
    exported = 0
    try:
        for attempt_id, folder, instruction in episodes:
            with EpisodeReader(folder) as ep:
                if _camera_shapes(ep) != shapes:
                    log.warning("%s: camera set or resolution differs from the first episode; skipped", attempt_id)
                    continue
                states = ep.states.astype(np.float32)
                actions = ep.executed_actions.astype(np.float32)
                missing = ~np.all(np.isfinite(actions), axis=1)
                actions[missing] = states[missing]
                streams = {cam: _frames_by_step(ep, cam) for cam in shapes}
                for t in range(len(states)):
                    frame = {"observation.state": states[t], "action": actions[t], "task": instruction}
                    for cam, stream in streams.items():
                        frame[f"observation.images.{cam}"] = next(stream)
                    dataset.add_frame(frame)
                dataset.save_episode()
                exported += 1
    finally:
        dataset.finalize()
    return exported
