"""Motion onset: the protocol's rule for when the arm starts moving.

The first of `MOTION_ONSET_FRAMES` (5) consecutive frames whose largest joint displacement from the
initial baseline (the mean of the first five frames, per joint) exceeds `MOTION_ONSET_THRESHOLD`
(2.0 recorded units: degrees for the arm joints, 0..100 units for the gripper). Used to trim idle
prefixes and to score no-intervention trials (no onset = no arm or gripper motion), on the real
bench and in the twin alike. Pure numpy.
"""

from __future__ import annotations

import numpy as np

from spabench.errors import DataError
from spabench.suite.vocabulary import JOINTS, MOTION_ONSET_FRAMES, MOTION_ONSET_THRESHOLD

__all__ = ["motion_onset", "joint_displacement"]


def _as_states(states) -> np.ndarray:
    arr = np.asarray(states, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(JOINTS):
        raise DataError("joint trajectory", f"expected shape (T, {len(JOINTS)}), got {arr.shape}",
                        field="states", allowed=f"a (T, {len(JOINTS)}) array in order {', '.join(JOINTS)}")
    if not np.all(np.isfinite(arr)):
        raise DataError("joint trajectory", "holds non-finite values", field="states")
    return arr


def joint_displacement(states, frames: int = MOTION_ONSET_FRAMES) -> np.ndarray:
    """Per frame, the largest |joint - baseline| over the six joints; baseline = mean of the first frames."""
    arr = _as_states(states)
    if len(arr) == 0:
        return np.zeros(0)
    baseline = arr[:frames].mean(axis=0)
    return np.max(np.abs(arr - baseline), axis=1)


def motion_onset(states, threshold: float = MOTION_ONSET_THRESHOLD,
                 frames: int = MOTION_ONSET_FRAMES) -> int | None:
    """Index of the motion-onset frame in a (T, 6) joint trajectory, or None when the arm never moves.

    A trajectory shorter than `frames` has no full baseline and no run of `frames` frames: None.
    """
    arr = _as_states(states)
    if len(arr) < frames:
        return None
    moving = joint_displacement(arr, frames) > threshold
    # run[t] = length of the run of moving frames ending at t
    run = 0
    for t, flag in enumerate(moving):
        run = run + 1 if flag else 0
        if run >= frames:
            return t - frames + 1
    return None
