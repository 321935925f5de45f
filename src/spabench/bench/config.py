"""The bench config group (conf/bench/*.yaml), validated before anything touches hardware.

Imports neither LeRobot nor torch: the CLI validates configs on machines without the bench extra.
Units follow LeRobot's SO101Follower with use_degrees=True: joints in degrees around the calibrated
mid-range, the gripper in 0..100 (0 closed, 100 open).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from spabench.configtools import plain_container
from spabench.errors import ConfigError
from spabench.suite.vocabulary import CAMERAS, GRIPPER, JOINTS

BENCH_TYPES: tuple[str, ...] = ("so101", "sim")
CAMERA_TYPES: tuple[str, ...] = ("opencv", "intelrealsense", "spabench_replay", "zmq")

# Physical range a joint value can take at all (one encoder turn; the gripper is a percentage).
BODY_RANGE_DEG: tuple[float, float] = (-180.0, 180.0)
BODY_RANGE_M100: tuple[float, float] = (-100.0, 100.0)  # use_degrees=False
GRIPPER_RANGE: tuple[float, float] = (0.0, 100.0)

DEFAULT_JOINT_LIMITS: dict[str, list[float]] = {
    "shoulder_pan": [-110.0, 110.0],
    "shoulder_lift": [-100.0, 100.0],
    "elbow_flex": [-95.0, 95.0],
    "wrist_flex": [-100.0, 100.0],
    "wrist_roll": [-170.0, 170.0],
    "gripper": [0.0, 100.0],
}
DEFAULT_HOME_POSE: dict[str, float] = {
    "shoulder_pan": 0.0,
    "shoulder_lift": -60.0,
    "elbow_flex": 60.0,
    "wrist_flex": 60.0,
    "wrist_roll": 0.0,
    "gripper": 10.0,
}


def _where(name: str) -> str:
    return f"bench config, field '{name}'"


def _finite_number(name: str, value: Any, *, positive: bool = False) -> float:
    """A real number (int accepted and converted, bool rejected) that is finite (and > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{_where(name)}: {value!r} is not a number (allowed: a finite float"
                          f"{' > 0' if positive else ''})")
    out = float(value)
    if not math.isfinite(out):
        raise ConfigError(f"{_where(name)}: {value!r} is not finite (allowed: a finite float"
                          f"{' > 0' if positive else ''})")
    if positive and out <= 0:
        raise ConfigError(f"{_where(name)}: {value!r} must be > 0 (allowed: a finite float > 0)")
    return out


@dataclass
class CameraSpec:
    """One camera of the bench, turned into a LeRobot CameraConfig when the robot is built.

    type: "opencv" (index_or_path: device index like 0 or a path like /dev/video2),
          "spabench_replay" (index_or_path: an .mp4/.npz file to replay, or "pattern" for a
          synthetic test pattern with the frame counter encoded in it), or "zmq" (LeRobot's ZMQ
          camera; put server_address/port/camera_name in extra), or "intelrealsense" (LeRobot's
          RealSense camera, colour stream only; index_or_path: the serial number or name; needs
          `pip install pyrealsense2` on the bench computer).
    extra: further keyword arguments for the LeRobot camera config (fourcc, rotation, warmup_s,...).
    """

    type: str = "opencv"
    index_or_path: Any = 0
    width: int = 640
    height: int = 480
    fps: int = 30
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self, name: str) -> None:
        where = f"cameras.{name}"
        if self.type not in CAMERA_TYPES:
            raise ConfigError(f"{_where(where + '.type')}: unknown camera type {self.type!r} "
                              f"(allowed: {', '.join(CAMERA_TYPES)})")
        for attr in ("width", "height", "fps"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{_where(f'{where}.{attr}')}: {value!r} is not a positive integer")
        if self.type == "opencv" and not isinstance(self.index_or_path, (int, str)):
            raise ConfigError(f"{_where(where + '.index_or_path')}: {self.index_or_path!r} "
                              "(allowed: a device index like 0 or a path like /dev/video2)")
        if self.type == "intelrealsense" and not str(self.index_or_path or "").strip():
            raise ConfigError(f"{_where(where + '.index_or_path')}: {self.index_or_path!r} "
                              "(allowed: the RealSense serial number or name, see `lerobot-find-cameras realsense`)")
        if self.type == "spabench_replay":
            if not isinstance(self.index_or_path, str) or not (
                self.index_or_path == "pattern" or self.index_or_path.endswith((".mp4", ".npz"))
            ):
                raise ConfigError(f"{_where(where + '.index_or_path')}: {self.index_or_path!r} "
                                  "(allowed: 'pattern', or a path ending in .mp4 or .npz)")


@dataclass
class BenchConfig:
    """The robot, its cameras and the safety envelope (conf/bench/so101.yaml, conf/bench/sim.yaml).

    max_relative_target: largest change of any joint command per control tick, relative to the
        measured position (degrees; gripper units for the gripper). Also passed to LeRobot.
    joint_limits: {joint: [lo, hi]} for all six joints; every command is clamped into this box.
    home_pose: where go_home() drives the arm, at home_speed_deg_s (each joint).
    num_read_retries: extra bus reads before a silent bus becomes a BenchFault (LeRobot's retries).
    connect_retries: whole-connect retries after a driver error (a transient serial glitch); a
        calibration mismatch is never retried.
    """

    type: str = "so101"
    port: str = ""
    robot_id: str = "spabench_follower"
    calibration_dir: str = "hardware/calibration/so101_follower"
    cameras: dict[str, CameraSpec] = field(default_factory=dict)
    fps: int = 30
    max_relative_target: float = 10.0
    joint_limits: dict[str, list[float]] = field(default_factory=lambda: {
        k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()})
    home_pose: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_HOME_POSE))
    home_speed_deg_s: float = 30.0
    home_tolerance_deg: float = 2.0
    use_degrees: bool = True
    disable_torque_on_disconnect: bool = True
    num_read_retries: int = 2
    connect_retries: int = 1
    sim: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in BENCH_TYPES:
            raise ConfigError(f"{_where('type')}: unknown bench type {self.type!r} "
                              f"(allowed: {', '.join(BENCH_TYPES)})")
        if self.type == "so101":
            if not isinstance(self.port, str) or not self.port.strip():
                raise ConfigError(f"{_where('port')}: missing (allowed: the arm's serial port, e.g. "
                                  "/dev/ttyACM0; find it with `lerobot-find-port`)")
            if not self.calibration_dir:
                raise ConfigError(f"{_where('calibration_dir')}: missing (allowed: a folder holding "
                                  "<robot_id>.json)")
        if not isinstance(self.robot_id, str) or not self.robot_id.strip():
            raise ConfigError(f"{_where('robot_id')}: missing (allowed: a non-empty name; the "
                              "calibration file is <calibration_dir>/<robot_id>.json)")
        if isinstance(self.fps, bool) or not isinstance(self.fps, int) or self.fps <= 0:
            raise ConfigError(f"{_where('fps')}: {self.fps!r} (allowed: a positive integer, e.g. 30)")
        self.max_relative_target = _finite_number("max_relative_target", self.max_relative_target,
                                                  positive=True)
        self.home_speed_deg_s = _finite_number("home_speed_deg_s", self.home_speed_deg_s, positive=True)
        self.home_tolerance_deg = _finite_number("home_tolerance_deg", self.home_tolerance_deg,
                                                 positive=True)
        if isinstance(self.num_read_retries, bool) or not isinstance(self.num_read_retries, int) \
                or not 0 <= self.num_read_retries <= 10:
            raise ConfigError(f"{_where('num_read_retries')}: {self.num_read_retries!r} "
                              "(allowed: an integer 0..10)")
        if isinstance(self.connect_retries, bool) or not isinstance(self.connect_retries, int) \
                or not 0 <= self.connect_retries <= 5:
            raise ConfigError(f"{_where('connect_retries')}: {self.connect_retries!r} "
                              "(allowed: an integer 0..5)")
        self.joint_limits = self._validated_limits()
        self.home_pose = self._validated_home()
        self.cameras = self._validated_cameras()

    # ------------------------------------------------------------------ parts
    def physical_range(self, joint: str) -> tuple[float, float]:
        if joint == GRIPPER:
            return GRIPPER_RANGE
        return BODY_RANGE_DEG if self.use_degrees else BODY_RANGE_M100

    def _validated_limits(self) -> dict[str, list[float]]:
        limits = _as_mapping("joint_limits", self.joint_limits)
        _same_joints("joint_limits", limits)
        out: dict[str, list[float]] = {}
        for joint in JOINTS:
            pair = limits[joint]
            if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
                raise ConfigError(f"{_where(f'joint_limits.{joint}')}: {pair!r} "
                                  "(allowed: a pair [lo, hi])")
            lo = _finite_number(f"joint_limits.{joint}", pair[0])
            hi = _finite_number(f"joint_limits.{joint}", pair[1])
            if not lo < hi:
                raise ConfigError(f"{_where(f'joint_limits.{joint}')}: lo {lo} must be below hi {hi}")
            p_lo, p_hi = self.physical_range(joint)
            if lo < p_lo or hi > p_hi:
                raise ConfigError(f"{_where(f'joint_limits.{joint}')}: [{lo}, {hi}] leaves the physical "
                                  f"range (allowed: within [{p_lo}, {p_hi}])")
            out[joint] = [lo, hi]
        return out

    def _validated_home(self) -> dict[str, float]:
        home = _as_mapping("home_pose", self.home_pose)
        _same_joints("home_pose", home)
        out: dict[str, float] = {}
        for joint in JOINTS:
            value = _finite_number(f"home_pose.{joint}", home[joint])
            lo, hi = self.joint_limits[joint]
            if not lo <= value <= hi:
                raise ConfigError(f"{_where(f'home_pose.{joint}')}: {value} is outside joint_limits "
                                  f"(allowed: within [{lo}, {hi}])")
            out[joint] = value
        return out

    def _validated_cameras(self) -> dict[str, CameraSpec]:
        cams = _as_mapping("cameras", self.cameras)
        unknown = sorted(set(cams) - set(CAMERAS))
        if unknown:
            raise ConfigError(f"{_where('cameras')}: unknown camera name(s) {unknown} "
                              f"(allowed: {', '.join(CAMERAS)})")
        if self.type == "so101":
            missing = [c for c in CAMERAS if c not in cams]
            if missing:
                raise ConfigError(f"{_where('cameras')}: missing camera(s) {missing}; the protocol records "
                                  f"all five (allowed: {', '.join(CAMERAS)})")
        out: dict[str, CameraSpec] = {}
        for name in [c for c in CAMERAS if c in cams]:
            spec = cams[name]
            if isinstance(spec, Mapping):
                spec = _build(CameraSpec, spec, f"cameras.{name}")
            if not isinstance(spec, CameraSpec):
                raise ConfigError(f"{_where(f'cameras.{name}')}: {spec!r} is not a camera spec")
            spec.extra = dict(spec.extra or {})
            spec.validate(name)
            out[name] = spec
        return out

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_mapping(cls, data: Any) -> BenchConfig:
        """Build from a plain dict or an OmegaConf DictConfig (the `bench` group), validating it."""
        data = plain_container(data)
        if isinstance(data, BenchConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"bench config: expected a mapping, got {type(data).__name__}")
        return _build(cls, data, "")


def _build(cls, data: Mapping, prefix: str):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        field_name = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ConfigError(f"{_where(field_name)}: unknown field (allowed: {', '.join(sorted(known))})")
    return cls(**dict(data))


def _as_mapping(name: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{_where(name)}: {value!r} is not a mapping (allowed: {{joint: value}} "
                          f"for {', '.join(JOINTS)})")
    return value


def _same_joints(name: str, mapping: Mapping) -> None:
    missing = [j for j in JOINTS if j not in mapping]
    unknown = sorted(set(mapping) - set(JOINTS))
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing joint(s) {missing}")
        if unknown:
            parts.append(f"unknown joint(s) {unknown}")
        raise ConfigError(f"{_where(name)}: {'; '.join(parts)} (allowed: {', '.join(JOINTS)})")
