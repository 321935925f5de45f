"""The bench config group (conf/bench/*.yaml), validated before anything touches hardware.

Imports neither LeRobot nor torch: the CLI validates configs on machines without the bench extra.
Units follow LeRobot's SO101Follower with use_degrees=True: joints in degrees around the calibrated
mid-range, the gripper in 0..100 (0 closed, 100 open).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from spabench.config import check_fields, field_error, opt, typed_node
from spabench.configtools import plain_container
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


def _error(key: str, text: str) -> ConfigError:
    return field_error("bench config", key, text)


# Stall thresholds per motor (mA). The STS3215 stalls at about 2.7 A at full torque; the shoulder lift
# and elbow carry the arm's weight and hold more current at rest, and LeRobot caps the gripper's torque
# at half (Max_Torque_Limit 500, so ~1.35 A at most): a squeeze is well above 0.8 A there.
DEFAULT_STALL_CURRENT_MA: dict[str, float] = {
    "shoulder_pan": 1500.0,
    "shoulder_lift": 1800.0,
    "elbow_flex": 1800.0,
    "wrist_flex": 1200.0,
    "wrist_roll": 1000.0,
    "gripper": 800.0,
}


@dataclass
class HealthConfig:
    """Motor health of the SO-101 (spabench.bench.health): telemetry and the guards built on it.

    rate_hz: telemetry samples per second (temperature, current, load, voltage, Status of all six
        motors in one sync read, in the slack of a control tick; 0 turns telemetry and guards off).
    stall_current_ma: per motor; together with a position error above stall_error (deg; gripper
        units) for stall_persistence_s the motor is stalled: the arm holds, the gripper backs off by
        gripper_backoff, the attempt is invalid (stall). Also the "time over current" of the summary.
    warn_temperature_c / resume_temperature_c: between trials, a motor at or above warn pauses the
        session until every motor is below resume. max_temperature_c: during a rollout the arm holds
        and the attempt is invalid (overheat). The servo itself cuts out at Max_Temperature_Limit (70 C).
    min_voltage_v: below it (supply sag) the attempt is invalid (undervoltage) and the session stops.
        4.5 V suits the 5 V supply of the 7.4 V STS3215 kit; use ~10.5 V for the 12 V kit.
    gripper_max_torque_limit: written to the gripper's Max_Torque_Limit at connect (per mille of full
        torque); null keeps LeRobot's 500.
    cool_poll_s: how often the temperatures are read (and shown) while the session waits for them.
    """

    rate_hz: float = opt(6.0, lo=0, hi=30)
    stall_current_ma: dict[str, float] = opt(DEFAULT_STALL_CURRENT_MA, gt=0)
    stall_error: float = opt(3.0, gt=0)
    stall_persistence_s: float = opt(0.5, gt=0)
    gripper_backoff: float = opt(5.0, gt=0)
    warn_temperature_c: float = opt(55.0, gt=0)
    resume_temperature_c: float = opt(45.0, gt=0)
    max_temperature_c: float = opt(65.0, gt=0)
    min_voltage_v: float = opt(4.5, gt=0)
    gripper_max_torque_limit: int | None = opt(None, lo=1, hi=1000)
    cool_poll_s: float = opt(2.0, gt=0)

    def __post_init__(self) -> None:
        check_fields(self, "bench config", "health.")
        unknown = sorted(set(self.stall_current_ma) - set(JOINTS))
        if unknown:
            raise _error("health.stall_current_ma", f"unknown joint(s) {unknown} (allowed: {', '.join(JOINTS)})")
        self.stall_current_ma = {j: self.stall_current_ma.get(j, DEFAULT_STALL_CURRENT_MA[j]) for j in JOINTS}
        if not self.resume_temperature_c < self.warn_temperature_c <= self.max_temperature_c:
            raise _error("health", f"temperatures must satisfy resume_temperature_c < warn_temperature_c <= "
                         f"max_temperature_c (got {self.resume_temperature_c}, {self.warn_temperature_c}, "
                         f"{self.max_temperature_c})")


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
    width: int = opt(640, gt=0)   # the sizes: checked with the bench (check_fields), for every bench type
    height: int = opt(480, gt=0)
    fps: int = opt(30, gt=0)
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self, name: str) -> None:
        from spabench.bench.camera_sources import CAMERA_SOURCES

        source = CAMERA_SOURCES.get(self.type)
        if source is None:
            raise _error(f"cameras.{name}.type", f"unknown camera type {self.type!r} "
                         f"(allowed: {', '.join(sorted(CAMERA_SOURCES))})")
        if not source.accepts(self.index_or_path):
            raise _error(f"cameras.{name}.index_or_path", f"{self.index_or_path!r} (allowed: {source.allowed})")


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
    realtime_priority: SCHED_FIFO priority of the control loop's thread during a rollout (1..99), when
        the OS allows it (spabench.rollout.priority); 0 (a bench file that leaves it out): normal
        scheduling. The shipped conf/bench/so101.yaml asks for 10. The twin runs in lockstep and never
        uses it.
    """

    type: str = ""
    robot_id: str = "spabench_follower"
    cameras: dict[str, CameraSpec] = field(default_factory=dict)
    fps: int = opt(30, gt=0)
    max_relative_target: float = opt(10.0, gt=0)
    # empty: the defaults; a file that names them names all six joints (no default merged into a safety box)
    joint_limits: dict[str, list[float]] = field(default_factory=dict)
    home_pose: dict[str, float] = field(default_factory=dict)
    home_speed_deg_s: float = opt(30.0, gt=0)
    home_tolerance_deg: float = opt(2.0, gt=0)
    use_degrees: bool = True
    connect_retries: int = opt(1, lo=0, hi=5)
    realtime_priority: int = opt(0, lo=0, hi=99)

    # builtins.type: inside this class body `type` is the field below
    _registry: ClassVar[dict[str, builtins.type[BenchConfig]]] = {}
    type_name: ClassVar[str] = ""
    required_cameras: ClassVar[tuple[str, ...]] = ()   # cameras a bench file must list
    # whether `run` reminds the operator to commission the bench (`spabench bench check`) when no
    # check is on record: a physical bench; the twin has nothing to commission
    commissioned: ClassVar[bool] = True

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
            raise _error("type", f"{self.type!r} (allowed: {self.type_name!r}, the type of the bench option this "
                         f"config was composed from; another bench type is another bench file: bench=<option>)")
        self.cameras = self._known_cameras()
        check_fields(self, "bench config")   # the cameras' sizes too
        if not self.robot_id.strip():
            raise _error("robot_id", "missing (allowed: a non-empty name; the calibration file is "
                         "<calibration_dir>/<robot_id>.json)")
        for name, spec in self.cameras.items():
            self.check_camera(name, spec)
        self.joint_limits = self._validated_limits()
        self.home_pose = self._validated_home()

    # ------------------------------------------------------------------ parts
    def physical_range(self, joint: str) -> tuple[float, float]:
        if joint == GRIPPER:
            return GRIPPER_RANGE
        return BODY_RANGE_DEG if self.use_degrees else BODY_RANGE_M100

    def _validated_limits(self) -> dict[str, list[float]]:
        limits = self.joint_limits or {k: list(v) for k, v in DEFAULT_JOINT_LIMITS.items()}
        _same_joints("joint_limits", limits)
        out: dict[str, list[float]] = {}
        for joint in JOINTS:
            pair = limits[joint]
            if len(pair) != 2:
                raise _error(f"joint_limits.{joint}", f"{pair!r} (allowed: a pair [lo, hi])")
            lo, hi = pair
            if not lo < hi:
                raise _error(f"joint_limits.{joint}", f"lo {lo} must be below hi {hi}")
            p_lo, p_hi = self.physical_range(joint)
            if lo < p_lo or hi > p_hi:
                raise _error(f"joint_limits.{joint}", f"[{lo}, {hi}] leaves the physical range "
                             f"(allowed: within [{p_lo}, {p_hi}])")
            out[joint] = [lo, hi]
        return out

    def _validated_home(self) -> dict[str, float]:
        home = self.home_pose or dict(DEFAULT_HOME_POSE)
        _same_joints("home_pose", home)
        out: dict[str, float] = {}
        for joint in JOINTS:
            value = home[joint]
            lo, hi = self.joint_limits[joint]
            if not lo <= value <= hi:
                raise _error(f"home_pose.{joint}", f"{value} is outside joint_limits (allowed: within [{lo}, {hi}])")
            out[joint] = value
        return out

    def _known_cameras(self) -> dict[str, CameraSpec]:
        cams = self.cameras
        unknown = sorted(set(cams) - set(CAMERAS))
        if unknown:
            raise _error("cameras", f"unknown camera name(s) {unknown} (allowed: {', '.join(CAMERAS)})")
        missing = [c for c in self.required_cameras if c not in cams]
        if missing:
            raise _error("cameras", f"missing camera(s) {missing}; the protocol records all five "
                         f"(allowed: {', '.join(CAMERAS)})")
        return {name: typed_node(CameraSpec, cams[name], "bench config", f"cameras.{name}.")
                for name in CAMERAS if name in cams}

    def check_camera(self, name: str, spec: CameraSpec) -> None:
        """Bench types whose cameras are real devices check them against the camera registry."""
        spec.validate(name)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_mapping(cls, data: Any) -> BenchConfig:
        """Build from a plain dict or an OmegaConf DictConfig (the `bench` group), validating it:
        `type:` picks the registered bench type (default so101), `typed_node` loads that class."""
        data = plain_container(data)
        if isinstance(data, BenchConfig):
            return data
        name = (data.get("type") if isinstance(data, Mapping) else None) or "so101"
        return typed_node(cls.schema_for(name), {**data, "type": name}, "bench config")

    @classmethod
    def schema_for(cls, kind: str | None) -> builtins.type[BenchConfig]:
        """The registered bench type a bench file's `type:` names (so101 when it names none)."""
        sub = cls._registry.get(kind or "so101")
        if sub is None:
            raise _error("type", f"unknown bench type {kind!r} (allowed: {', '.join(cls.known_types())})")
        return sub


@BenchConfig.register_subclass("so101")
@dataclass
class SO101BenchConfig(BenchConfig):
    """The SO-101 follower through LeRobot's SO101Follower (conf/bench/so101.yaml).

    num_read_retries: extra bus reads before a silent bus becomes a BenchFault (LeRobot's retries).
    health: motor telemetry and the stall / thermal / voltage guards (HealthConfig).
    """

    port: str = "???"   # OmegaConf's required mark: a bench file's `port: ???` stays required when composed
    calibration_dir: str = "hardware/calibration/so101_follower"
    disable_torque_on_disconnect: bool = True
    num_read_retries: int = opt(2, lo=0, hi=10)
    health: HealthConfig = field(default_factory=HealthConfig)

    required_cameras: ClassVar[tuple[str, ...]] = CAMERAS

    def __post_init__(self) -> None:
        if self.port in ("???", "") or not self.port.strip():
            raise _error("port", "missing (allowed: the arm's serial port, e.g. /dev/ttyACM0 from "
                         "`lerobot-find-port`, or auto: `spabench bench check` finds it)")
        if not self.calibration_dir:
            raise _error("calibration_dir", "missing (allowed: a folder holding <robot_id>.json)")
        self.health = typed_node(HealthConfig, self.health, "bench config", "health.")
        super().__post_init__()

    def make_bench(self, **kwargs: Any):
        from spabench.bench.so101 import SO101Bench

        return SO101Bench(self, **kwargs)


def bench_config(data: Any) -> BenchConfig:
    """The `bench` group's typed object (built when a command's config names the group)."""
    return BenchConfig.from_mapping(data)


def _same_joints(name: str, mapping: Mapping) -> None:
    missing = [j for j in JOINTS if j not in mapping]
    unknown = sorted(set(mapping) - set(JOINTS))
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing joint(s) {missing}")
        if unknown:
            parts.append(f"unknown joint(s) {unknown}")
        raise _error(name, f"{'; '.join(parts)} (allowed: {', '.join(JOINTS)})")
