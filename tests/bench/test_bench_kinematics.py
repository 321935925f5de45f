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


def _mujoco_lowest(model, data, gid: int) -> float:
    """The lowest z of a box or capsule geom, from MuJoCo's own pose and size."""
    rot = data.geom_xmat[gid].reshape(3, 3)
    if model.geom_type[gid] == mujoco.mjtGeom.mjGEOM_BOX:
        return float((data.geom_xpos[gid] + (SIGNS * model.geom_size[gid]) @ rot.T)[:, 2].min())
    assert model.geom_type[gid] == mujoco.mjtGeom.mjGEOM_CAPSULE
    radius, half = model.geom_size[gid][:2]
    ends = data.geom_xpos[gid] + np.outer([-half, half], rot[:, 2])
    return float(ends[:, 2].min() - radius)


def test_every_links_collision_geometry_agrees_with_mujoco(reference):
    """The envelope's geometry of every link (issue 34: not only the gripper's) placed by this FK
    against mj_kinematics on the twin's MJCF: centre, axes, sizes and lowest point of each geom."""
    arm = ArmModel()
    shapes = arm.link_shapes()
    model, data = reference
    moving = {b for b in range(model.nbody) if model.body_dofnum[b] or model.body_parentid[b] != 0
              and any(model.body_dofnum[a] for a in _ancestors(model, b))}
    expected = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(model.ngeom)
                if model.geom_bodyid[g] in moving and (model.geom_contype[g] or model.geom_conaffinity[g])}
    assert set(shapes.names) == expected and len(expected) == 12       # base_plate and base_servo: fixed
    assert {"wrist", "lower_arm", "upper_arm"} <= set(shapes.links)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, n) for n in shapes.names]
    capsule = np.array([model.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE for g in ids])
    for g, geom in zip(ids, shapes.geoms, strict=True):        # sizes: box half sizes; capsule radius, half length
        want = model.geom_size[g] if geom.kind == "box" else [geom.radius, geom.half[2], 0.0]
        np.testing.assert_allclose(want, model.geom_size[g], atol=1e-9)
    rng = np.random.default_rng(34)
    lo = np.array([arm.ranges[j][0] for j in JOINTS])
    hi = np.array([arm.ranges[j][1] for j in JOINTS])
    qs = rng.uniform(lo, hi, (300, 6))
    centres, axes = shapes.place(qs)                               # one batched pass for all 300
    extent = (np.abs(axes) * shapes.half[None, :, None, :]).sum(axis=3) + shapes.radius[None, :, None]
    worst = {"centre": 0.0, "axes": 0.0, "lowest": 0.0}
    for i, q in enumerate(qs):
        _mujoco_at(reference, q)
        xpos, xmat = data.geom_xpos[ids], data.geom_xmat[ids].reshape(-1, 3, 3)
        worst["centre"] = max(worst["centre"], float(np.abs(centres[i] - xpos).max()))
        # boxes: the whole frame; capsules: the axis' line (a capsule is the same turned about it or
        # end for end; MuJoCo's fromto z points from `to` to `from`)
        along = np.einsum("gi,gi->g", axes[i][capsule][:, :, 2], xmat[capsule][:, :, 2])
        worst["axes"] = max(worst["axes"], float(np.abs(axes[i][~capsule] - xmat[~capsule]).max()),
                            float(np.max(1.0 - np.abs(along))))
        lowest = np.array([_mujoco_lowest(model, data, g) for g in ids])
        worst["lowest"] = max(worst["lowest"], float(np.abs(centres[i][:, 2] - extent[i][:, 2] - lowest).max()))
    assert worst["centre"] < 1e-6 and worst["axes"] < 1e-6 and worst["lowest"] < 1e-6, worst


def _ancestors(model, body: int) -> list[int]:
    out = []
    while body:
        body = int(model.body_parentid[body])
        out.append(body)
    return out


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


def test_a_link_geom_without_a_closed_form_is_refused_and_visual_geoms_are_left_out(tmp_path):
    text = default_arm_model().read_text()
    anchor = '<geom name="wrist_bracket"'
    assert anchor in text
    path = tmp_path / "arm.xml"
    path.write_text(text.replace(anchor, '<geom name="wrist_cover" type="mesh" mesh="cover"/>' + anchor))
    with pytest.raises(ConfigError, match="wrist_cover.*'mesh'.*primitive collision geom"):
        ArmModel(path)
    # a visual-only geom (contype = conaffinity = 0) is not collision geometry; a cylinder is kept as
    # its bounding box
    path.write_text(text.replace(anchor, '<geom name="wrist_label" type="mesh" contype="0" conaffinity="0"/>'
                                 '<geom name="wrist_pin" type="cylinder" fromto="0 -0.03 0 0 0.03 0" size="0.004"/>'
                                 + anchor))
    shapes = ArmModel(path).link_shapes()
    assert "wrist_label" not in shapes.names and "wrist_pin" in shapes.names
    pin = shapes.geoms[shapes.names.index("wrist_pin")]
    np.testing.assert_allclose(pin.half, [0.004, 0.004, 0.03])
    assert pin.radius == 0.0 and pin.kind == "cylinder"
