"""The bench config group (conf/bench/*.yaml), validated before anything touches hardware.

Imports neither LeRobot nor torch: the CLI validates configs on machines without the bench extra.
Units follow LeRobot's SO101Follower with use_degrees=True: joints in degrees around the calibrated
mid-range, the gripper in 0..100 (0 closed, 100 open).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from spabench.configtools import plain_container, typed_fields
from spabench.errors import ConfigError
from spabench.suite.vocabulary import CAMERAS, GRIPPER, JOINTS


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
        from spabench.bench.camera_sources import CAMERA_SOURCES

        where = f"cameras.{name}"
        source = CAMERA_SOURCES.get(self.type)
        if source is None:
            raise ConfigError(f"{_where(where + '.type')}: unknown camera type {self.type!r} "
                              f"(allowed: {', '.join(sorted(CAMERA_SOURCES))})")
        for attr in ("width", "height", "fps"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{_where(f'{where}.{attr}')}: {value!r} is not a positive integer")
        if not source.accepts(self.index_or_path):
            raise ConfigError(f"{_where(where + '.index_or_path')}: {self.index_or_path!r} "
                              f"(allowed: {source.allowed})")


@dataclass
class BenchConfig:
    """What every bench shares: its cameras, control rate and the safety envelope.

    A bench type is a subclass registered under its name, the LeRobot way
    (`@BenchConfig.register_subclass("so101")`); `type:` in a bench file picks the subclass, and the
    subclass builds its Bench (`make_bench()`). The twin registers "sim" itself (spabench.sim), so
    this package knows nothing of it.

    max_relative_target: largest change of any joint command per control tick, relative to the
        measured position (degrees; gripper units for the gripper). Also passed to LeRobot.
    joint_limits: {joint: [lo, hi]} for all six joints; every command is clamped into this box.
    home_pose: where go_home() drives the arm, at home_speed_deg_s (each joint).
    connect_retries: whole-connect retries after a driver error (a transient serial glitch); a
        calibration mismatch is never retried.
    """

    type: str = ""
    robot_id: str = "spabench_follower"
    cameras: dict[str, CameraSpec] = field(default_factory=dict)
    fps: int = 30
    max_relative_target: float = 10.0
    joint_limits: dict[str, list[float]] = field(default_factory=lambda: {
        k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()})
    home_pose: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_HOME_POSE))
    home_speed_deg_s: float = 30.0
    home_tolerance_deg: float = 2.0
    use_degrees: bool = True
    connect_retries: int = 1

    _registry: ClassVar[dict[str, type[BenchConfig]]] = {}
    type_name: ClassVar[str] = ""
    required_cameras: ClassVar[tuple[str, ...]] = ()   # cameras a bench file must list

    @classmethod
    def register_subclass(cls, name: str):
        """Class decorator: register a bench type under `name` (the value of `type:` in bench files)."""
        def register(sub: type[BenchConfig]) -> type[BenchConfig]:
            sub.type_name = name
            cls._registry[name] = sub
            return sub
        return register

    @classmethod
    def known_types(cls) -> list[str]:
        return sorted(cls._registry)

    def make_bench(self, **kwargs: Any):
        """Build (not connect) the Bench this config describes."""
        raise NotImplementedError(f"bench type {self.type!r} does not build a bench")

    def __post_init__(self) -> None:
        if not self.type:
            self.type = self.type_name
        if self.type != self.type_name:
            raise ConfigError(f"{_where('type')}: {self.type!r} given to the {self.type_name!r} bench config "
                              f"(allowed: {', '.join(self.known_types())})")
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
        _int_in("connect_retries", self.connect_retries, 0, 5)
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
        missing = [c for c in self.required_cameras if c not in cams]
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
            self.check_camera(name, spec)
            out[name] = spec
        return out

    def check_camera(self, name: str, spec: CameraSpec) -> None:
        """Bench types whose cameras are real devices check them against the camera registry."""
        spec.validate(name)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_mapping(cls, data: Any) -> BenchConfig:
        """Build from a plain dict or an OmegaConf DictConfig (the `bench` group), validating it.

        `type:` picks the registered bench type (default so101)."""
        data = plain_container(data)
        if isinstance(data, BenchConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(f"bench config: expected a mapping, got {type(data).__name__}")
        name = data.get("type") or "so101"
        sub = cls._registry.get(name)
        if sub is None:
            raise ConfigError(f"{_where('type')}: unknown bench type {name!r} (allowed: "
                              f"{', '.join(cls.known_types())})")
        return _build(sub, {**data, "type": name}, "")


@BenchConfig.register_subclass("so101")
@dataclass
class SO101BenchConfig(BenchConfig):
    """The SO-101 follower through LeRobot's SO101Follower (conf/bench/so101.yaml).

    num_read_retries: extra bus reads before a silent bus becomes a BenchFault (LeRobot's retries).
    """

    port: str = ""
    calibration_dir: str = "hardware/calibration/so101_follower"
    disable_torque_on_disconnect: bool = True
    num_read_retries: int = 2

    required_cameras: ClassVar[tuple[str, ...]] = CAMERAS

    def __post_init__(self) -> None:
        if not isinstance(self.port, str) or not self.port.strip():
            raise ConfigError(f"{_where('port')}: missing (allowed: the arm's serial port, e.g. "
                              "/dev/ttyACM0; find it with `lerobot-find-port`)")
        if not self.calibration_dir:
            raise ConfigError(f"{_where('calibration_dir')}: missing (allowed: a folder holding "
                              "<robot_id>.json)")
        _int_in("num_read_retries", self.num_read_retries, 0, 10)
        super().__post_init__()

    def make_bench(self, **kwargs: Any):
        from spabench.bench.so101 import SO101Bench

        return SO101Bench(self, **kwargs)


def _int_in(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{_where(name)}: {value!r} (allowed: an integer {lo}..{hi})")


def bench_config(data: Any) -> BenchConfig:
    """The `bench` group's typed object (the SpabenchConfig group builder)."""
    return BenchConfig.from_mapping(data)


def _build(cls, data: Mapping, prefix: str):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        field_name = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ConfigError(f"{_where(field_name)}: unknown field (allowed: {', '.join(sorted(known))})")
    return cls(**typed_fields(cls, dict(data), f"bench config{' ' + prefix if prefix else ''}"))


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
