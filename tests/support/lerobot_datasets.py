"""Small LeRobotDataset v3 folders made with LeRobot's own writer (create, add_frame, save_episode,
finalize), as `lerobot-record` makes them: several episodes end to end in one MP4 per camera.

Every frame of episode e is one flat grey level, `level(e, i)`, so a test can tell from a decoded
picture which episode (and roughly which frame) it shows.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

SO101_NAMES = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos",
               "gripper.pos"]


def level(episode: int, frame: int) -> int:
    """The grey level of frame `frame` of episode `episode` (far apart between episodes)."""
    return 30 + 70 * (episode % 3) + 2 * frame


def make_dataset(root: Path, *, cameras: Sequence[str] = ("front",), lengths: Sequence[int] = (5, 7, 4),
                 state: bool = True, fps: int = 10, size: tuple[int, int] = (48, 64),
                 tasks: Sequence[str] | None = None, repo_id: str = "lab/tiny") -> Path:
    """A finalized v3 dataset at `root`; episode e has lengths[e] frames and task tasks[e % len(tasks)].
    State and action are the SO-101's six joints (`state=False`: action only)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    height, width = size
    tasks = list(tasks or ["put the cube in the bowl", "stack the blocks"])
    features: dict = {f"observation.images.{c}": {"dtype": "video", "shape": (height, width, 3),
                                                  "names": ["height", "width", "channels"]} for c in cameras}
    if state:
        features["observation.state"] = {"dtype": "float32", "shape": (6,), "names": SO101_NAMES}
    features["action"] = {"dtype": "float32", "shape": (6,), "names": SO101_NAMES}
    ds = LeRobotDataset.create(repo_id, fps=fps, features=features, root=root, robot_type="so101_follower",
                               use_videos=True)
    for e, n in enumerate(lengths):
        for i in range(n):
            frame: dict = {f"observation.images.{c}": np.full((height, width, 3), level(e, i), np.uint8)
                           for c in cameras}
            joints = np.linspace(-10, 10, 6, dtype=np.float32) + e + 0.5 * i
            if state:
                frame["observation.state"] = joints
            frame["action"] = joints + 1
            frame["task"] = tasks[e % len(tasks)]
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return root


if __name__ == "__main__":   # `python -m tests.support.lerobot_datasets DIR`: the README's example dataset
    make_dataset(Path(sys.argv[1]), cameras=("front", "wrist"))
    print(f"wrote a LeRobotDataset v3 with 3 episodes and 2 cameras to {sys.argv[1]}")
