"""The harness's own LeRobot camera type, "spabench_replay": file replay or a numbered test pattern.

Importing this package registers the type with LeRobot's CameraConfig registry; LeRobot's
make_cameras_from_configs then finds SpabenchReplayCamera here (config class name minus "Config").
"""

from .config_replay import PATTERN, SpabenchReplayCameraConfig
from .pattern import decode_index, render, stamp_index
from .replay import SpabenchReplayCamera

__all__ = [
    "PATTERN",
    "SpabenchReplayCamera",
    "SpabenchReplayCameraConfig",
    "decode_index",
    "render",
    "stamp_index",
]
