"""The twin as a LeRobot robot: registration, features, connect discipline, actions, cameras."""

from __future__ import annotations

import numpy as np
import pytest
from lerobot.cameras.opencv import OpenCVCameraConfig
from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig
from lerobot.robots.utils import make_robot_from_config
from lerobot.utils.errors import DeviceNotConnectedError

from spabench.errors import ConfigError
from spabench.sim.config_sim_robot import SimCameraConfig, SimRobotConfig
from spabench.sim.home import DEFAULT_SIM_HOME
from spabench.suite.vocabulary import CAMERAS, JOINTS


def _state(obs) -> np.ndarray:
    return np.array([obs[f"{j}.pos"] for j in JOINTS])


def _action(values) -> dict:
    return {f"{j}.pos": float(v) for j, v in zip(JOINTS, values, strict=True)}


def test_registered_as_lerobot_robot_type(tmp_path):
    cfg = SimRobotConfig(id="t", calibration_dir=tmp_path)
    assert cfg.type == "spabench_sim"
    robot = make_robot_from_config(cfg)          # LeRobot's own factory finds SimRobot
    assert type(robot).__name__ == "SimRobot" and robot.name == "spabench_sim"


def test_features_match_so101_follower(tmp_path, make_robot):
    # the real SO101Follower (not connected) with five cameras of the same size
    real = SO101Follower(SO101FollowerConfig(
        port="/dev/null", id="real", calibration_dir=tmp_path / "real",
        cameras={c: OpenCVCameraConfig(index_or_path=0, width=320, height=240, fps=30) for c in CAMERAS}))
    twin = make_robot(cameras={c: SimCameraConfig(320, 240) for c in CAMERAS}, render_cameras=[])
    assert twin.observation_features == real.observation_features
    assert twin.action_features == real.action_features
    assert list(twin.action_features) == [f"{j}.pos" for j in JOINTS]


def test_connect_observe_disconnect(make_robot):
    robot = make_robot(cameras={"middle": SimCameraConfig(64, 48)})
    assert robot.is_connected and robot.is_calibrated
    obs = robot.get_observation()
    assert set(obs) == set(robot.observation_features)
    home = np.array([DEFAULT_SIM_HOME[j] for j in JOINTS])
    assert np.max(np.abs(_state(obs) - home)) < 2.0          # starts at home, holds there
    robot.disconnect()
    assert not robot.is_connected
    with pytest.raises(DeviceNotConnectedError):
        robot.get_observation()
    with pytest.raises(DeviceNotConnectedError):
        robot.send_action(_action(home))


def test_send_action_moves_toward_target_bounded_per_step(make_robot):
    robot = make_robot(cameras={}, max_relative_target=5.0)
    start = _state(robot.get_observation())
    target = start + np.array([30.0, 20.0, 25.0, -20.0, 40.0, 50.0])
    sent = robot.send_action(_action(target))
    sent_v = np.array([sent[f"{j}.pos"] for j in JOINTS])
    assert np.all(np.abs(sent_v - start) <= 5.0 + 1e-9)      # clipped like max_relative_target
    assert np.all(np.sign(sent_v - start) == np.sign(target - start))
    t0 = robot.world.data.time
    for _ in range(60):
        robot.send_action(_action(target))
    assert robot.world.data.time - t0 == pytest.approx(60 / 30, rel=1e-6)   # 1/fps per action
    final = _state(robot.get_observation())
    assert np.max(np.abs(final - target)) < 3.0               # reached (servo sag within 3 units)


def test_partial_action_keeps_other_targets(make_robot):
    robot = make_robot(cameras={})
    start = _state(robot.get_observation())
    sent = robot.send_action({"gripper.pos": 40.0})
    assert list(sent) == ["gripper.pos"]
    for _ in range(30):
        robot.send_action({"gripper.pos": 40.0})
    now = _state(robot.get_observation())
    assert now[5] == pytest.approx(40.0, abs=2.0)
    assert np.max(np.abs(now[:5] - start[:5])) < 1.0


def test_non_finite_action_is_refused(make_robot):
    robot = make_robot(cameras={})
    with pytest.raises(ValueError, match="not finite"):
        robot.send_action({"elbow_flex.pos": float("nan")})


def test_cameras_render_configured_size_and_last_frame_policy(make_robot):
    cams = {"wrist": SimCameraConfig(96, 72), "middle": SimCameraConfig(128, 96),
            "overhead": SimCameraConfig(128, 96)}
    robot = make_robot(cameras=cams, render_cameras=["wrist", "middle"])
    obs = robot.get_observation()
    for name, cam in cams.items():
        assert obs[name].shape == (cam.height, cam.width, 3) and obs[name].dtype == np.uint8
    for name in ("wrist", "middle"):
        assert obs[name].std() > 5.0                          # a real picture, not a flat fill
    assert not obs["overhead"].any()                          # never rendered: black frame
    robot.config.render_cameras = ["overhead"]
    first = robot.get_observation()
    assert first["overhead"].std() > 5.0
    robot.config.render_cameras = []
    for _ in range(10):
        robot.send_action(_action(_state(first) + np.array([8, 0, 0, 0, 0, 0])))
    again = robot.get_observation()
    assert np.array_equal(again["overhead"], first["overhead"])   # not rendered: last frame repeats


def test_all_five_cameras_see_different_views(make_robot):
    robot = make_robot(cameras={c: SimCameraConfig(80, 60) for c in CAMERAS})
    obs = robot.get_observation()
    frames = [obs[c].astype(float) for c in CAMERAS]
    for i in range(len(frames)):
        for j in range(i + 1, len(frames)):
            assert np.abs(frames[i] - frames[j]).mean() > 3.0


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="cameras"):
        SimRobotConfig(id="t", calibration_dir=tmp_path, cameras={"front": SimCameraConfig()})
    with pytest.raises(ConfigError, match="render_cameras"):
        SimRobotConfig(id="t", calibration_dir=tmp_path, cameras={"wrist": SimCameraConfig()},
                       render_cameras=["middle"])
    with pytest.raises(ConfigError, match="max_relative_target"):
        SimRobotConfig(id="t", calibration_dir=tmp_path, max_relative_target=-1.0)
