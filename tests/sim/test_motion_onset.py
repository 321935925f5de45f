"""The protocol's motion-onset rule (spabench.rollout.motion), used by the twin's no_motion scoring."""

from __future__ import annotations

import numpy as np
import pytest

from spabench.errors import DataError
from spabench.rollout.motion import joint_displacement, motion_onset


def still(n: int = 40, pose=(0.0, -45.0, -45.0, 90.0, 0.0, 10.0)) -> np.ndarray:
    return np.tile(np.asarray(pose, float), (n, 1))


def test_no_motion_returns_none():
    assert motion_onset(still()) is None


def test_sub_threshold_jitter_is_not_motion():
    rng = np.random.default_rng(3)
    states = still() + rng.uniform(-1.9, 1.9, size=(40, 6)) * 0.5   # |jitter| < 1 unit
    assert motion_onset(states) is None


def test_onset_is_first_of_five_consecutive_frames():
    states = still()
    states[20:, 1] += np.arange(20) * 1.0 + 2.5        # frame 20 onwards: displacement > 2.0
    assert motion_onset(states) == 20


def test_a_short_burst_is_not_onset():
    states = still()
    states[10:14, 5] += 5.0                             # gripper twitch for four frames only
    assert motion_onset(states) is None
    states[30:35, 5] += 5.0                             # five frames: onset
    assert motion_onset(states) == 30


def test_threshold_is_strictly_exceeded():
    states = still()
    states[10:, 0] += 2.0                               # exactly 2.0: not "exceeds"
    assert motion_onset(states) is None
    states[10:, 0] += 0.01
    assert motion_onset(states) == 10


def test_baseline_is_the_mean_of_the_first_five_frames():
    states = still()
    states[:5, 3] = [90.0, 90.0, 90.0, 90.0, 100.0]     # wrist_flex baseline = 92, not 90
    disp = joint_displacement(states)
    assert disp[10] == pytest.approx(2.0)               # at rest (90): 2.0 from the mean baseline
    assert motion_onset(states) is None                 # frame 4 is far off, but only one frame
    states[10:, 3] = 94.5                               # 2.5 above the baseline from frame 10 on
    assert motion_onset(states) == 10


def test_short_or_bad_trajectories():
    assert motion_onset(still(4)) is None
    with pytest.raises(DataError, match="shape"):
        motion_onset(np.zeros((10, 5)))
    bad = still()
    bad[3, 2] = np.nan
    with pytest.raises(DataError, match="non-finite"):
        motion_onset(bad)
