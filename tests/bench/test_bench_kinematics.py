"""The bench's numpy FK (bench/kinematics.py) against MuJoCo's own kinematics of hardware/sim/so101.xml."""

from __future__ import annotations

import numpy as np
import pytest

from spabench.bench.kinematics import GRIPPER_BODIES, ArmModel, default_arm_model, to_radians, to_units
from spabench.errors import ConfigError
from spabench.suite.vocabulary import JOINTS

mujoco = pytest.importorskip("mujoco")

SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)


@pytest.fixture(scope="module")
def reference():
    model = mujoco.MjModel.from_xml_path(str(default_arm_model()))
    return model, mujoco.MjData(model)


def _mujoco_at(reference, q):
    model, data = reference
    for name, value in zip(JOINTS, q, strict=True):
        data.joint(name).qpos[0] = value
    mujoco.mj_kinematics(model, data)
    return model, data


def _mujoco_corners(model, data, name: str) -> np.ndarray:
    gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
    return data.geom_xpos[gid] + (SIGNS * model.geom_size[gid]) @ data.geom_xmat[gid].reshape(3, 3).T


def test_fk_agrees_with_mujoco_within_a_millimetre_at_random_configurations(reference):
    arm = ArmModel()
    rng = np.random.default_rng(20)
    lo = np.array([arm.ranges[j][0] for j in JOINTS])
    hi = np.array([arm.ranges[j][1] for j in JOINTS])
    # 400 configurations over the full joint ranges (also past the bench's joint_limits)
    worst = {"bodies": 0.0, "tcp": 0.0, "tcp_rot": 0.0, "gripper_points": 0.0}
    for _ in range(400):
        q = rng.uniform(lo, hi)
        model, data = _mujoco_at(reference, q)
        pos, rot = arm.frames(q)
        for i, body in enumerate(arm.bodies):
            worst["bodies"] = max(worst["bodies"], float(np.abs(pos[i] - data.body(body.name).xpos).max()))
        tcp, tcp_rot = arm.site_pose(q, "tcp")
        worst["tcp"] = max(worst["tcp"], float(np.abs(tcp - data.site("tcp").xpos).max()))
        worst["tcp_rot"] = max(worst["tcp_rot"],
                               float(np.abs(tcp_rot - data.site("tcp").xmat.reshape(3, 3)).max()))
        names = [n for n, (b, _, _) in arm.boxes.items() if arm.bodies[b].name in GRIPPER_BODIES]
        expected = np.vstack([_mujoco_corners(model, data, n) for n in names])
        got = arm.gripper_points(q)
        assert got.shape == expected.shape == (arm.gripper_point_count, 3)
        worst["gripper_points"] = max(worst["gripper_points"], float(np.abs(got - expected).max()))
    assert worst["bodies"] < 1e-3 and worst["tcp"] < 1e-3 and worst["gripper_points"] < 1e-3, worst
    assert worst["tcp_rot"] < 1e-6, worst


def test_gripper_points_cover_the_fingers_and_the_housing():
    arm = ArmModel()
    names = {n for n, (b, _, _) in arm.boxes.items() if arm.bodies[b].name in GRIPPER_BODIES}
    assert {"gripper_housing", "fixed_finger", "moving_finger", "moving_jaw_arm"} <= names
    assert arm.gripper_point_count == 8 * len(names)


def test_units_round_trip_and_gripper_scale():
    arm = ArmModel()
    values = np.array([10.0, -20.0, 30.0, -40.0, 50.0, 25.0])
    q = to_radians(values, arm.gripper_range)
    lo, hi = arm.gripper_range
    assert q[5] == pytest.approx(lo + 0.25 * (hi - lo))
    assert np.allclose(to_units(q, arm.gripper_range), values)


@pytest.mark.parametrize("change, message", [
    ('<body name="shoulder" pos="0 0 0.0624">', "orientation"),
    ('<joint name="shoulder_pan"', "off the body origin"),
    ('<joint name="elbow_flex"', "must be a hinge"),
])
def test_a_model_this_fk_cannot_follow_is_refused(tmp_path, change, message):
    text = default_arm_model().read_text()
    if message == "orientation":
        bad = text.replace(change, '<body name="shoulder" pos="0 0 0.0624" euler="0 0 0.1">')
    elif message == "off the body origin":
        bad = text.replace(change, '<joint name="shoulder_pan" pos="0.01 0 0"')
    else:
        bad = text.replace(change, '<joint name="elbow_flex" type="slide"')
    assert bad != text
    path = tmp_path / "arm.xml"
    path.write_text(bad)
    with pytest.raises(ConfigError, match=message):
        ArmModel(path)
