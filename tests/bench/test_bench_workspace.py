"""The Cartesian workspace envelope (bench/safety.py WorkspaceEnvelope, hardware/bench.yaml arm_envelope):
cuts along the step, the rules it names, start-up validation of the envelope and of the home pose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from spabench.bench.config import DEFAULT_HOME_POSE, DEFAULT_JOINT_LIMITS, BenchConfig
from spabench.bench.kinematics import arm_model
from spabench.bench.safety import REASON_WORKSPACE, SafetyEnvelope, WorkspaceClamp, WorkspaceEnvelope
from spabench.errors import ConfigError, DataError
from spabench.suite.loader import load_geometry
from spabench.suite.model import ArmEnvelope, Box
from spabench.suite.vocabulary import JOINTS

HOME = np.array([DEFAULT_HOME_POSE[j] for j in JOINTS])
DOWN = np.array([0.0, 20.0, 20.0, 70.0, 0.0, 10.0])     # gripper ~3.4 cm into the table
REPO_BENCH_YAML = Path(__file__).resolve().parents[2] / "hardware" / "bench.yaml"


def envelope(**changes) -> WorkspaceEnvelope:
    spec = ArmEnvelope(**changes)
    return WorkspaceEnvelope(spec, arm_model())


def lowest_cm(target) -> float:
    return float(arm_model().gripper_points_units(target)[:, 2].min()) * 100.0


def test_a_target_into_the_table_is_cut_to_the_last_safe_point_of_its_step():
    env = envelope(table_margin_cm=0.5)
    assert lowest_cm(HOME) > 0.5 and lowest_cm(DOWN) < -3.0     # the premise: home above, DOWN below
    sent, clamp = env.limit(DOWN, HOME)
    assert isinstance(clamp, WorkspaceClamp) and clamp.reason == REASON_WORKSPACE and clamp.rule == "table"
    assert 0.0 < clamp.kept < 1.0
    np.testing.assert_allclose(sent, HOME + clamp.kept * (DOWN - HOME))
    assert 0.5 <= lowest_cm(sent) < 0.5 + 0.05     # on the floor, within the search's resolution
    assert clamp.depth_cm == pytest.approx(0.5 - lowest_cm(DOWN), abs=1e-3)
    assert clamp.requested_target == tuple(DOWN) and clamp.sent_target == tuple(sent)
    # the clamp names the joint the cut changed most, with its requested and sent values
    i = JOINTS.index(clamp.joint)
    assert (clamp.requested, clamp.sent) == (DOWN[i], sent[i])
    assert i == int(np.argmax(np.abs(DOWN - sent)))
    # a target inside passes untouched
    assert env.limit(HOME, DOWN)[1] is None


def test_box_and_keep_out_rules_are_named():
    high = np.array([0.0, -30.0, -60.0, 0.0, 0.0, 10.0])     # forearm and gripper reach up
    top = float(arm_model().gripper_points_units(high)[:, 2].max()) * 100.0
    env = envelope(box=Box((-10.0, 60.0), (-35.0, 35.0), (0.0, top - 5.0)))
    sent, clamp = env.limit(high, HOME)
    assert clamp is not None and clamp.rule == "box"
    assert float(arm_model().gripper_points_units(sent)[:, 2].max()) * 100.0 <= top - 5.0
    # a keep-out box (a camera mount) around the lowest gripper point of a target above the table
    target = HOME + 0.6 * (DOWN - HOME)
    assert lowest_cm(target) > 0.5
    pts = arm_model().gripper_points_units(target) * 100.0
    corner = pts[int(np.argmin(pts[:, 2]))]
    mount = Box(*[(float(c) - 1.0, float(c) + 1.0) for c in corner])
    env = envelope(keep_out={"camera_mount": mount})
    sent, clamp = env.limit(target, HOME)
    assert clamp is not None and clamp.rule == "keep_out:camera_mount"
    assert env.violation(sent) == (0.0, "") and 0.0 < clamp.kept < 1.0


def test_an_arm_already_outside_may_leave_but_not_go_deeper():
    env = envelope()
    deep = np.array([0.0, 30.0, 20.0, 70.0, 0.0, 10.0])
    assert lowest_cm(deep) < lowest_cm(DOWN) < 0
    sent, clamp = env.limit(deep, DOWN)             # deeper than where it is: the arm holds
    assert clamp is not None and clamp.kept == 0.0
    np.testing.assert_array_equal(sent, DOWN)
    sent, clamp = env.limit(HOME, DOWN)             # back out: let through
    assert clamp is None
    np.testing.assert_array_equal(sent, HOME)


def test_the_safety_envelope_applies_the_workspace_after_the_joint_clamps():
    env = SafetyEnvelope(DEFAULT_JOINT_LIMITS, 90.0, workspace=envelope())
    safe, clamps = env.check_target(DOWN, HOME, last=HOME)
    assert [c.reason for c in clamps] == [REASON_WORKSPACE]
    assert lowest_cm(safe) >= 0.5
    # the cut starts at the last executed target, held within the step bound of the measured position
    env = SafetyEnvelope(DEFAULT_JOINT_LIMITS, 5.0, workspace=envelope())
    safe, clamps = env.check_target(DOWN, HOME, last=HOME + 50.0)
    assert np.all(np.abs(safe - HOME) <= 5.0 + 1e-9)
    assert lowest_cm(safe) >= 0.5


@pytest.mark.parametrize("block, field", [
    ({"box_cm": {"x": [10.0, -10.0], "y": [-35.0, 35.0], "z": [0.0, 60.0]}}, "arm_envelope.box_cm.x"),
    ({"box_cm": {"x": [-10.0, 60.0], "y": [-35.0, 35.0]}}, "arm_envelope.box_cm.z"),
    ({"box_cm": {"x": [-10.0, 60.0], "y": [-35.0, 35.0], "z": [1.0, 60.0]}}, "arm_envelope.box_cm.z"),
    ({"table_margin_cm": -0.5}, "arm_envelope.table_margin_cm"),
    ({"table_margin_cm": 25.0}, "arm_envelope.table_margin_cm"),
    ({"keep_out_margin_cm": -0.1}, "arm_envelope.keep_out_margin_cm"),
    ({"keep_out_margin_cm": 25.0}, "arm_envelope.keep_out_margin_cm"),
    ({"keep_out_cm": {"Camera": {"x": [0, 1], "y": [0, 1], "z": [0, 1]}}}, "arm_envelope.keep_out_cm.Camera"),
    ({"keep_out_cm": {"cam": {"x": [0, 1], "y": [0, "a"], "z": [0, 1]}}}, "arm_envelope.keep_out_cm.cam.y"),
    ({"table_hight_cm": 0.0}, "arm_envelope.table_hight_cm"),
])
def test_a_bad_envelope_in_bench_yaml_is_one_clear_error(tmp_path, block, field):
    doc = yaml.safe_load(REPO_BENCH_YAML.read_text())
    doc["arm_envelope"] = block
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(DataError) as err:
        load_geometry(path)
    assert field in str(err.value)


def test_bench_yaml_without_the_block_gets_the_documented_defaults(tmp_path):
    doc = yaml.safe_load(REPO_BENCH_YAML.read_text())
    shipped = load_geometry(REPO_BENCH_YAML).arm_envelope
    assert (shipped.table_z_cm, shipped.table_margin_cm, shipped.box) == (
        ArmEnvelope().table_z_cm, ArmEnvelope().table_margin_cm, ArmEnvelope().box)
    del doc["arm_envelope"]
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_geometry(path).arm_envelope == ArmEnvelope()


def test_a_home_pose_outside_the_envelope_is_refused_before_connecting():
    from spabench.bench.so101 import SO101Bench

    cfg = BenchConfig.from_mapping({"type": "so101", "port": "/dev/null-not-opened", "cameras": {
        name: {"type": "spabench_replay", "index_or_path": "pattern"} for name in
        ("wrist", "middle", "left", "right", "overhead")}})
    pts = arm_model().gripper_points_units(HOME) * 100.0
    around_home = Box(*[(float(lo) - 1, float(hi) + 1) for lo, hi in zip(pts.min(0), pts.max(0), strict=True)])
    with pytest.raises(ConfigError, match="home_pose.*keep_out:parked_camera"):
        SO101Bench(cfg, workspace=ArmEnvelope(keep_out={"parked_camera": around_home}))
    bench = SO101Bench(cfg, workspace=ArmEnvelope())
    assert bench.envelope.workspace is not None and not bench.is_connected
    with pytest.raises(ConfigError, match="use_degrees"):
        SO101Bench(BenchConfig.from_mapping({**vars(cfg), "use_degrees": False,
                                             "joint_limits": {j: [-100.0, 100.0] if j != "gripper" else [0.0, 100.0]
                                                              for j in JOINTS},
                                             "home_pose": {j: 0.0 for j in JOINTS}}))


# The path: the gripper folded up 1.3 cm above the table, the wrist bracket 3.6 cm into it
WRIST_DOWN = np.array([0.0, 97.0, 42.0, 90.0, 0.0, 10.0])


def test_a_target_with_the_gripper_above_the_table_and_the_wrist_in_it_is_cut():
    """Reproduction (issue 34): only the gripper's points were checked, so this target passed."""
    assert 1.2 < lowest_cm(WRIST_DOWN) < 1.4          # the premise: the gripper is above the margin
    env = envelope(table_margin_cm=0.5)
    sent, clamp = env.limit(WRIST_DOWN, HOME)
    assert clamp is not None, "a target with the wrist 3.6 cm into the table was passed through"
    assert clamp.rule == "table" and clamp.link not in ("gripper", "moving_jaw")
    assert clamp.depth_cm > 3.5 + 0.5            # past the table top plus the margin
    # the clamp names the link and its geometry in words: "wrist bracket 4.2 cm below the table margin"
    assert clamp.geom.replace("_", " ") in clamp.message and "below the table margin" in clamp.message
    assert f"{clamp.depth_cm:.1f} cm" in clamp.message
    # what was sent keeps every link's geometry above the margin
    assert env.violation(sent) == (0.0, "")
    assert 0.0 <= clamp.kept < 1.0
    # through the safety envelope (a step bound that lets it through) it is cut and logged as one clamp
    safety = SafetyEnvelope(DEFAULT_JOINT_LIMITS, 180.0, workspace=env)
    safe, clamps = safety.check_target(WRIST_DOWN, HOME, last=HOME)
    cuts = [c for c in clamps if c.reason == REASON_WORKSPACE]
    assert len(cuts) == 1 and cuts[0].link == clamp.link
    assert env.violation(safe) == (0.0, "")


def _finger(target) -> np.ndarray:
    """(8, 3) corners of the fixed finger at a target, in cm."""
    from spabench.bench.kinematics import to_radians

    arm = arm_model()
    return arm.box_corners(to_radians(target, arm.gripper_range), ["fixed_finger"]) * 100.0


def test_a_keep_out_box_between_a_links_corners_is_caught():
    """Reproduction (issue 34): a keep-out box the finger's face enters 2.5 mm deep between its corners
    was passed (only corners were tested)."""
    target = HOME + 0.6 * (DOWN - HOME)
    corners = _finger(target)
    face = corners[np.argsort(corners[:, 2])[:4]].mean(axis=0)      # the middle of the finger's lower face
    mount = Box((face[0] - 0.5, face[0] + 0.5), (face[1] - 0.5, face[1] + 0.5), (face[2] - 1.0, face[2] + 0.25))
    assert not any(all(lo <= c[i] <= hi for i, (lo, hi) in enumerate((mount.x_cm, mount.y_cm, mount.z_cm)))
                   for c in corners)                           # no corner of the finger is inside
    env = envelope(keep_out={"lamp": mount})
    sent, clamp = env.limit(target, HOME)
    assert clamp is not None, "a finger 2.5 mm inside a keep-out box was passed through"
    assert clamp.rule == "keep_out:lamp" and clamp.link == "gripper" and clamp.geom == "fixed_finger"
    assert "keep-out box lamp" in clamp.message
    assert env.violation(sent) == (0.0, "")


def test_keep_out_boxes_have_a_margin():
    target = HOME + 0.6 * (DOWN - HOME)
    corners = _finger(target)
    low = corners[int(np.argmin(corners[:, 2]))]          # the finger's lowest point
    for gap_cm, cut in ((0.3, True), (0.9, True), (1.2, False), (2.0, False)):
        mount = Box((low[0] - 1.0, low[0] + 1.0), (low[1] - 1.0, low[1] + 1.0), (low[2] - 3.0, low[2] - gap_cm))
        env = envelope(keep_out={"lamp": mount}, keep_out_margin_cm=1.0)
        sent, clamp = env.limit(target, HOME)
        assert (clamp is not None) == cut, (gap_cm, clamp)
        if cut:
            assert clamp.rule == "keep_out:lamp" and clamp.depth_cm == pytest.approx(1.0 - gap_cm, abs=0.05)
    # the shipped envelope has a margin around every keep-out box
    assert load_geometry(REPO_BENCH_YAML).arm_envelope.keep_out_margin_cm >= 0.5
