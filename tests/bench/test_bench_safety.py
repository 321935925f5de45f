"""SafetyEnvelope: joint-limit box, per-tick step bound, refusal of non-finite commands."""

from __future__ import annotations

import numpy as np
import pytest

from spabench.bench.config import DEFAULT_JOINT_LIMITS
from spabench.bench.safety import Clamp, SafetyEnvelope
from spabench.errors import ConfigError, SafetyError
from spabench.suite.vocabulary import JOINTS

ZERO = np.zeros(6)


@pytest.fixture
def env():
    return SafetyEnvelope(DEFAULT_JOINT_LIMITS, 10.0)


def test_inside_everything_passes_unchanged(env):
    target = np.array([5.0, -5.0, 3.0, 0.0, 9.0, 8.0])
    safe, clamps = env.check_target(target, ZERO)
    np.testing.assert_array_equal(safe, target)
    assert clamps == []


def test_step_bound_relative_to_measured(env):
    current = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 50.0])
    target = np.array([25.0, -25.0, 0.0, 0.0, 0.0, 50.0])
    safe, clamps = env.check_target(target, current)
    np.testing.assert_array_equal(safe, [10.0, -10.0, 0.0, 0.0, 0.0, 50.0])
    assert clamps == [Clamp("shoulder_pan", 25.0, 10.0, "max_relative_target"),
                      Clamp("shoulder_lift", -25.0, -10.0, "max_relative_target")]


def test_joint_limit_then_step_bound(env):
    current = np.array([105.0, 0.0, 0.0, 0.0, 0.0, 95.0])
    target = np.array([150.0, 0.0, 0.0, 0.0, 0.0, 130.0])
    safe, clamps = env.check_target(target, current)
    np.testing.assert_array_equal(safe, [110.0, 0.0, 0.0, 0.0, 0.0, 100.0])
    assert [c.reason for c in clamps] == ["joint_limit", "joint_limit"]
    # far from the limit: both clamps apply and both are logged, in order
    safe, clamps = env.check_target(np.array([150.0, 0, 0, 0, 0, 0]), ZERO)
    assert safe[0] == 10.0
    assert clamps == [Clamp("shoulder_pan", 150.0, 110.0, "joint_limit"),
                      Clamp("shoulder_pan", 110.0, 10.0, "max_relative_target")]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_target_refused(env, bad):
    target = np.zeros(6)
    target[2] = bad
    with pytest.raises(SafetyError, match=r"non-finite target for joint\(s\) \['elbow_flex'\]"):
        env.check_target(target, ZERO)
    assert env.non_finite_joints(target) == ["elbow_flex"]


def test_non_finite_measurement_and_shape_refused(env):
    with pytest.raises(SafetyError, match="measured position"):
        env.check_target(ZERO, np.array([0, 0, 0, np.nan, 0, 0]))
    with pytest.raises(SafetyError, match=r"shape \(5,\)"):
        env.check_target(np.zeros(5), ZERO)


@pytest.mark.parametrize("mrt", [float("nan"), float("inf"), 0.0, -2.0, "3"])
def test_construction_rejects_bad_step_bound(mrt):
    with pytest.raises(ConfigError, match="max_relative_target"):
        SafetyEnvelope(DEFAULT_JOINT_LIMITS, mrt)


def test_construction_rejects_bad_limits():
    limits = dict(DEFAULT_JOINT_LIMITS)
    limits["wrist_flex"] = [5.0, -5.0]
    with pytest.raises(ConfigError, match=r"joint_limits\.wrist_flex"):
        SafetyEnvelope(limits, 5.0)
    with pytest.raises(ConfigError, match=r"missing \['gripper'\]"):
        SafetyEnvelope({j: [-1.0, 1.0] for j in JOINTS[:-1]}, 5.0)
