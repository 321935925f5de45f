"""BenchConfig validation: one clear ConfigError naming the field and the allowed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from spabench.bench.config import DEFAULT_JOINT_LIMITS, BenchConfig, CameraSpec, SO101BenchConfig
from spabench.errors import ConfigError
from spabench.suite.vocabulary import CAMERAS, JOINTS

REPO = Path(__file__).resolve().parents[2]


def cams(**over):
    base = {c: {"type": "spabench_replay", "index_or_path": "pattern", "width": 48, "height": 32, "fps": 30}
            for c in CAMERAS}
    base.update(over)
    return base


def cfg(**over) -> BenchConfig:
    data = {"type": "so101", "port": "/dev/ttyACM0", "cameras": cams()}
    data.update(over)
    return BenchConfig.from_mapping(data)


def test_defaults_are_valid_and_typed():
    c = cfg()
    assert c.max_relative_target == 10.0
    assert set(c.joint_limits) == set(JOINTS)
    assert all(isinstance(c.cameras[n], CameraSpec) for n in CAMERAS)
    assert list(c.cameras) == list(CAMERAS)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "inf", -float("inf"), 0.0, -1.0, "ten", True, None])
def test_max_relative_target_rejected(bad):
    with pytest.raises(ConfigError, match="max_relative_target") as err:
        cfg(max_relative_target=bad)
    # a wrong type is refused by OmegaConf (typed_node), a non-finite or bad number by the bench
    assert "(allowed: a number > 0)" in str(err.value) or "(allowed: a number)" in str(err.value) \
        or "(allowed: a finite number)" in str(err.value)


def test_max_relative_target_int_is_converted_to_float():
    c = cfg(max_relative_target=5)
    assert c.max_relative_target == 5.0 and isinstance(c.max_relative_target, float)


def test_joint_limits_outside_physical_range():
    limits = {k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()}
    limits["wrist_roll"] = [-200.0, 170.0]
    with pytest.raises(ConfigError, match=r"joint_limits\.wrist_roll.*within \[-180\.0, 180\.0\]"):
        cfg(joint_limits=limits)
    limits = {k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()}
    limits["gripper"] = [0.0, 120.0]
    with pytest.raises(ConfigError, match=r"joint_limits\.gripper.*within \[0\.0, 100\.0\]"):
        cfg(joint_limits=limits)


def test_joint_limits_use_degrees_false_range():
    limits = {k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()}
    with pytest.raises(ConfigError, match=r"within \[-100\.0, 100\.0\]"):
        cfg(joint_limits=limits, use_degrees=False, home_pose={j: 0.0 for j in JOINTS})


@pytest.mark.parametrize("pair", [[10.0, 10.0], [20.0, -20.0], [math.nan, 10.0], [0.0], "0,10"])
def test_joint_limits_bad_pair(pair):
    limits = {k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()}
    limits["elbow_flex"] = pair
    with pytest.raises(ConfigError, match=r"joint_limits\.elbow_flex"):
        cfg(joint_limits=limits)


def test_joint_limits_missing_and_unknown_joint():
    limits = {k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items() if k != "wrist_flex"}
    with pytest.raises(ConfigError, match=r"missing joint\(s\) \['wrist_flex'\].*allowed: shoulder_pan"):
        cfg(joint_limits=limits)
    limits = {**DEFAULT_JOINT_LIMITS, "elbow": [-1.0, 1.0]}
    with pytest.raises(ConfigError, match=r"unknown joint\(s\) \['elbow'\]"):
        cfg(joint_limits=limits)


def test_home_pose_outside_limits_and_missing():
    home = {j: 0.0 for j in JOINTS}
    home["shoulder_lift"] = -150.0
    with pytest.raises(ConfigError, match=r"home_pose\.shoulder_lift.*within \[-100\.0, 100\.0\]"):
        cfg(home_pose=home)
    home = {j: 0.0 for j in JOINTS if j != "gripper"}
    with pytest.raises(ConfigError, match=r"home_pose.*missing joint\(s\) \['gripper'\]"):
        cfg(home_pose=home)


def test_camera_names_must_be_the_protocols_five():
    with pytest.raises(ConfigError, match=r"unknown camera name\(s\) \['top'\].*wrist, middle, left"):
        cfg(cameras=cams(top={"type": "opencv", "index_or_path": 0}))
    five = cams()
    del five["overhead"]
    with pytest.raises(ConfigError, match=r"missing camera\(s\) \['overhead'\]"):
        cfg(cameras=five)
    # the twin may run with fewer cameras, but never with unknown names
    import spabench.sim.bench_config  # noqa: F401  (the twin registers bench type "sim" itself)

    twin = BenchConfig.from_mapping({"type": "sim", "cameras": {"middle": five["middle"]}})
    assert list(twin.cameras) == ["middle"]


def test_camera_fields():
    with pytest.raises(ConfigError, match=r"cameras\.wrist\.fps"):
        cfg(cameras=cams(wrist={"type": "opencv", "index_or_path": 0, "fps": 0}))
    with pytest.raises(ConfigError, match=r"cameras\.wrist\.type.*allowed: intelrealsense, opencv, spabench_replay, zmq"):
        cfg(cameras=cams(wrist={"type": "usb", "index_or_path": 0}))
    with pytest.raises(ConfigError, match=r"cameras\.left\.index_or_path.*pattern"):
        cfg(cameras=cams(left={"type": "spabench_replay", "index_or_path": "clip.avi"}))
    with pytest.raises(ConfigError, match=r"cameras\.left\.widht': unknown field"):
        cfg(cameras=cams(left={"type": "opencv", "index_or_path": 0, "widht": 640}))


@pytest.mark.parametrize("field,value,match", [
    ("fps", 0, "fps"), ("fps", 29.97, "fps"), ("type", "so100", "unknown bench type 'so100' \\(allowed: .*so101"),
    ("port", "", "lerobot-find-port"), ("home_speed_deg_s", float("nan"), "home_speed_deg_s"),
    ("robot_id", "", "robot_id"), ("num_read_retries", -1, "num_read_retries"),
])
def test_scalar_fields(field, value, match):
    with pytest.raises(ConfigError, match=match):
        cfg(**{field: value})


def test_unknown_top_level_field():
    with pytest.raises(ConfigError, match=r"field 'max_relative_targe': unknown field"):
        cfg(max_relative_targe=5.0)


@pytest.mark.parametrize("name", ["so101.yaml", "so101_emulated.yaml"])
def test_shipped_yaml_validates_like_the_cli_builds_it(name):
    raw = yaml.safe_load((REPO / "conf" / "bench" / name).read_text())
    if raw["port"] == "???":
        raw["port"] = "/dev/pts/99"
    c = BenchConfig.from_mapping(raw)
    assert isinstance(c, SO101BenchConfig)
    assert list(c.cameras) == list(CAMERAS)
    assert all(c.joint_limits[j][0] <= c.home_pose[j] <= c.joint_limits[j][1] for j in JOINTS)


def test_nan_override_is_rejected():
    raw = yaml.safe_load((REPO / "conf" / "bench" / "so101.yaml").read_text())
    with pytest.raises(ConfigError, match="max_relative_target"):
        BenchConfig.from_mapping({**raw, "max_relative_target": float("nan")})


@pytest.mark.bench
def test_realsense_camera_spec_becomes_lerobots_realsense_config():
    """RealSense cameras are built as LeRobot's own config (pyrealsense2 is only needed to connect)."""
    from spabench.bench.config import CameraSpec
    from spabench.bench.so101 import camera_config

    spec = CameraSpec(type="intelrealsense", index_or_path="123456789", width=640, height=480, fps=30)
    spec.validate("overhead")
    config = camera_config("overhead", spec)
    assert type(config).__name__ == "RealSenseCameraConfig"
    assert (config.serial_number_or_name, config.width, config.height, config.fps) == ("123456789", 640, 480, 30)
    with pytest.raises(ConfigError, match="serial number"):
        CameraSpec(type="intelrealsense", index_or_path="").validate("overhead")
