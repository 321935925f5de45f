"""The protocol's motion-onset rule (spabench.suite.motion), exactly as the authors' trimming code states it."""

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


def test_threshold_is_at_least_not_exceeds():
    """Measured on main: `>` missed a displacement of exactly 2.0; the authors use `>=`."""
    states = still()
    states[10:, 0] += 1.99
    assert motion_onset(states) is None
    states[10:, 0] += 0.01                              # exactly 2.0: moving
    assert motion_onset(states) == 10


def test_baseline_is_the_median_of_the_first_five_frames():
    """Measured on main: a mean baseline; one outlier among the first five frames shifted it."""
    states = still()
    states[:5, 3] = [90.0, 90.0, 90.0, 90.0, 100.0]     # median 90 (the mean would be 92)
    disp = joint_displacement(states)
    assert disp[10] == pytest.approx(0.0)               # at rest (90): no displacement from the median
    assert motion_onset(states) is None                 # frame 4 is far off, but only one frame
    states[10:, 3] = 92.0                               # 2.0 above the median (0.0 above a mean): moving
    assert motion_onset(states) == 10


def test_rule_numbers_come_from_the_suite_config():
    from omegaconf import OmegaConf

    from spabench.errors import ConfigError
    from spabench.suite.config import SuiteConfig
    from spabench.suite.motion import MotionOnsetRule

    states = still()
    states[10:13, 0] += 3.0                             # a run of three moving frames
    assert motion_onset(states) is None
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SuiteConfig),
                                              {"motion_onset": {"run_frames": 3, "threshold": 2.5}}))
    assert cfg.motion_onset == MotionOnsetRule(threshold=2.5, baseline_frames=5, run_frames=3)
    assert motion_onset(states, cfg.motion_onset) == 10
    assert motion_onset(states, MotionOnsetRule(threshold=3.5, run_frames=3)) is None
    with pytest.raises(ConfigError, match="run_frames"):
        MotionOnsetRule(run_frames=0)
    with pytest.raises(ConfigError, match="unknown field"):
        MotionOnsetRule.from_mapping({"treshold": 2.0})


def test_rollout_module_is_the_suite_rule():
    import spabench.rollout.motion as rollout_motion
    import spabench.suite.motion as suite_motion

    assert rollout_motion.motion_onset is suite_motion.motion_onset


def test_short_or_bad_trajectories():
    assert motion_onset(still(4)) is None
    with pytest.raises(DataError, match="shape"):
        motion_onset(np.zeros((10, 5)))
    bad = still()
    bad[3, 2] = np.nan
    with pytest.raises(DataError, match="non-finite"):
        motion_onset(bad)
