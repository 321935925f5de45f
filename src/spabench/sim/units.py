"""Joint units of the twin: what SO101Follower(use_degrees=True) reports, from MuJoCo radians.

Arm joints: degrees = rad2deg(qpos); the model's zero is the middle of each joint's range, as in
LeRobot's calibrated degrees. Gripper: 0..100 maps linearly onto the gripper joint range
(0 = closed = lower limit, 100 = fully open = upper limit), like LeRobot's RANGE_0_100.
"""

from __future__ import annotations

import numpy as np

from spabench.suite.vocabulary import GRIPPER, JOINTS

GRIPPER_INDEX = JOINTS.index(GRIPPER)


def to_units(qpos_rad, gripper_range_rad: tuple[float, float]) -> np.ndarray:
    """(6,) joint radians in JOINTS order -> (6,) degrees with the gripper in 0..100."""
    q = np.asarray(qpos_rad, dtype=np.float64)
    out = np.rad2deg(q)
    lo, hi = gripper_range_rad
    out[GRIPPER_INDEX] = (q[GRIPPER_INDEX] - lo) / (hi - lo) * 100.0
    return out


def to_radians(values, gripper_range_rad: tuple[float, float]) -> np.ndarray:
    """(6,) degrees / gripper 0..100 in JOINTS order -> (6,) joint radians."""
    v = np.asarray(values, dtype=np.float64)
    out = np.deg2rad(v)
    lo, hi = gripper_range_rad
    out[GRIPPER_INDEX] = lo + v[GRIPPER_INDEX] / 100.0 * (hi - lo)
    return out
