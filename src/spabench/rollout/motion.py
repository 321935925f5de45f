"""Motion onset lives in spabench.suite.motion (the protocol's rule, written once); re-exported here."""

from spabench.suite.motion import (
    DEFAULT_RULE,
    MotionOnsetRule,
    joint_displacement,
    motion_onset,
    moving_frames,
)

__all__ = ["motion_onset", "joint_displacement", "moving_frames", "MotionOnsetRule", "DEFAULT_RULE"]
