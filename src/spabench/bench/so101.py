"""The SO-101 follower arm through LeRobot: SO101Follower over a Feetech STS3215 bus.

The harness never calibrates and never prompts: it refuses to run (SafetyError) when the calibration
file is missing, malformed, or differs from what the motors store, telling the operator the exact
lerobot-calibrate command and where the file must go. The comparison happens before LeRobot
configures the motors (which enables torque), so a mismatching arm is never torqued. The per-tick
step bound is spabench's envelope alone (LeRobot's max_relative_target is left off).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from spabench.bench.bench import DRIVER_ERRORS, Bench
from spabench.bench.bus_replies import reject_late_replies
from spabench.bench.config import BenchConfig, CameraSpec, SO101BenchConfig
from spabench.errors import ConfigError, DataError, SafetyError
from spabench.suite.model import ArmEnvelope
from spabench.suite.vocabulary import GRIPPER, JOINTS

logger = logging.getLogger(__name__)

ROBOT_TYPE = "so101_follower"
CALIBRATION_FIELDS: tuple[str, ...] = ("id", "drive_mode", "homing_offset", "range_min", "range_max")
MOTOR_IDS: dict[str, int] = {joint: i + 1 for i, joint in enumerate(JOINTS)}  # SOFollower's wiring
CURRENT_UNIT_MA = 6.5   # STS3215 Present_Current: mA per count (Feetech STS manual)


def resolve_path(path: str | Path) -> Path:
    """Config paths are relative to the repository root (spabench.paths)."""
    from spabench.paths import resolve

    return resolve(path)


@contextmanager
def _torque_held_off(bus) -> Iterator[dict[str, int]]:
    """Inside: LeRobot's enable_torque does nothing (torque stays off) and every Max_Torque_Limit
    write is recorded (motor -> value), so the caller can read them back before torque goes on."""
    written: dict[str, int] = {}
    write = bus.write

    def recording_write(data_name, motor, value, *args, **kwargs):
        write(data_name, motor, value, *args, **kwargs)
        if data_name == "Max_Torque_Limit":
            written[motor] = int(value)

    bus.enable_torque = lambda *args, **kwargs: None
    bus.write = recording_write
    try:
        yield written
    finally:
        del bus.enable_torque, bus.write   # the class's own methods again


def calibrate_hint(cfg: SO101BenchConfig, path: Path) -> str:
    return (f"Calibrate the arm once with LeRobot: `lerobot-calibrate --robot.type={ROBOT_TYPE} "
            f"--robot.port={cfg.port} --robot.id={cfg.robot_id} --robot.calibration_dir={path.parent}` "
            f"(it writes {path}); if you calibrated elsewhere, copy that <id>.json to {path}. "
            "The harness never calibrates or prompts by itself.")


def load_calibration_file(path: Path, cfg: SO101BenchConfig) -> dict[str, dict[str, int]]:
    """Read and check a LeRobot calibration file: all six joints, integer fields, range_min < range_max."""
    if not path.is_file():
        raise SafetyError(f"calibration file {path} is missing (robot_id '{cfg.robot_id}', calibration_dir "
                          f"'{cfg.calibration_dir}'). {calibrate_hint(cfg, path)}")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(path, f"not valid JSON ({exc}). {calibrate_hint(cfg, path)}") from exc
    if not isinstance(data, dict):
        raise DataError(path, "expected an object {joint: {id, drive_mode, homing_offset, range_min, "
                        "range_max}}", allowed=JOINTS)
    missing = [j for j in JOINTS if j not in data]
    if missing:
        raise DataError(path, f"missing joint(s) {missing}", field=missing[0], allowed=JOINTS)
    out: dict[str, dict[str, int]] = {}
    for joint in JOINTS:
        entry = data[joint]
        if not isinstance(entry, dict):
            raise DataError(path, "expected an object", field=joint, allowed=CALIBRATION_FIELDS)
        for key in CALIBRATION_FIELDS:
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise DataError(path, f"{value!r} is not an integer", field=f"{joint}.{key}",
                                allowed=CALIBRATION_FIELDS)
        if entry["id"] != MOTOR_IDS[joint]:
            raise DataError(path, f"motor id {entry['id']} for {joint}; the SO-101 wiring uses id "
                            f"{MOTOR_IDS[joint]}", field=f"{joint}.id")
        if not entry["range_min"] < entry["range_max"]:
            raise DataError(path, f"range_min {entry['range_min']} must be below range_max "
                            f"{entry['range_max']}", field=f"{joint}.range_min")
        out[joint] = {k: int(entry[k]) for k in CALIBRATION_FIELDS}
    return out


def camera_configs(cfg: BenchConfig) -> dict[str, Any]:
    """BenchConfig camera specs -> LeRobot CameraConfig objects (opencv, intelrealsense, zmq, spabench_replay)."""
    return {name: camera_config(name, spec) for name, spec in cfg.cameras.items()}


def camera_config(name: str, spec: CameraSpec):
    """The LeRobot CameraConfig of one camera: the class from LeRobot's own registry, the source field
    from spabench.bench.camera_sources, then `extra` (any other field of that LeRobot class)."""
    import importlib

    from lerobot.cameras.configs import CameraConfig

    from spabench.bench.camera_sources import CAMERA_SOURCES

    source = CAMERA_SOURCES[spec.type]
    if source.lerobot_module:
        importlib.import_module(source.lerobot_module)   # registers the type with LeRobot
    cls = CameraConfig.get_choice_class(spec.type)
    kwargs = {**source.kwargs(name, spec.index_or_path), **source.defaults, **dict(spec.extra)}
    try:
        return cls(fps=spec.fps, width=spec.width, height=spec.height, **kwargs)
    except TypeError as exc:
        import dataclasses

        allowed = ", ".join(f.name for f in dataclasses.fields(cls))
        raise ConfigError(f"bench config, field 'cameras.{name}.extra': {exc} (allowed fields of "
                          f"{cls.__name__}: {allowed})") from None


class SO101Bench(Bench):
    """LeRobot SO101Follower (built with make_robot_from_config) behind the safety envelope."""

    kind = "so101"

    cfg: SO101BenchConfig

    def __init__(self, cfg: SO101BenchConfig, *, workspace: ArmEnvelope | None = None):
        super().__init__(cfg, workspace=workspace)
        self.calibration_dir = resolve_path(cfg.calibration_dir)
        self.calibration_path = self.calibration_dir / f"{cfg.robot_id}.json"
        self.calibration: dict[str, dict[str, int]] | None = None
        self._calibration_sha: str | None = None

    @property
    def calibration_file(self) -> str:
        return str(self.calibration_path.resolve())

    @property
    def calibration_id(self) -> str:
        digest = self._calibration_sha
        if digest is None and self.calibration_path.is_file():
            digest = hashlib.sha256(self.calibration_path.read_bytes()).hexdigest()
        return f"{self.cfg.robot_id}@sha256:{(digest or 'missing')[:16]}"

    def _make_robot(self):
        from lerobot.robots import make_robot_from_config
        from lerobot.robots.so_follower import SO101FollowerConfig

        robot_cfg = SO101FollowerConfig(
            port=self.cfg.port,
            id=self.cfg.robot_id,
            calibration_dir=self.calibration_dir,
            cameras=camera_configs(self.cfg),
            # One clamp: spabench's SafetyEnvelope bounds every step against the observed state.
            # LeRobot's own clamp would read the bus a second time per tick and print every clip.
            max_relative_target=None,
            disable_torque_on_disconnect=self.cfg.disable_torque_on_disconnect,
            use_degrees=self.cfg.use_degrees,
            num_read_retries=self.cfg.num_read_retries,
        )
        return make_robot_from_config(robot_cfg)

    # ------------------------------------------------------------------ connect discipline
    def _before_connect(self) -> None:
        from spabench.bench.errors import BenchFault
        from spabench.bench.ports import AUTO

        if self.cfg.port == AUTO:
            raise BenchFault("bench.port is auto: a session drives only the port written down. Run "
                             "`spabench bench check bench=<this bench>` to find it, then set bench.port.")
        self.calibration = load_calibration_file(self.calibration_path, self.cfg)
        self._calibration_sha = hashlib.sha256(self.calibration_path.read_bytes()).hexdigest()
        if self.cfg.port.startswith("/") and not Path(self.cfg.port).exists():
            raise BenchFault(f"serial port {self.cfg.port} does not exist (bench config field 'port'). "
                             "Plug in the arm's controller board and find its port with `lerobot-find-port`.")

    def _connect_robot(self, robot) -> None:
        """LeRobot's connect() minus its torque-first order: open the bus (handshake only), compare the
        calibration while torque is still off, and only then connect the cameras and let LeRobot
        configure the motors (which ends with Torque_Enable=1). A mismatch never torques the arm."""
        bus = robot.bus
        bus.connect()
        reject_late_replies(bus.packet_handler)   # before the first read: calibration, state, health
        try:
            stored = self._confirmed_calibration(bus)
        except DRIVER_ERRORS as exc:
            raise self._fault(exc, "calibration check") from exc
        if not self._matches(stored):
            raise self._mismatch(stored)
        for cam in robot.cameras.values():
            cam.connect()
        with _torque_held_off(bus) as written:   # configure() ends by enabling torque: not before the check
            robot.configure()
            limit = self.cfg.health.gripper_max_torque_limit
            if limit is not None:  # after LeRobot's configure(), which writes its own 500
                bus.write("Max_Torque_Limit", GRIPPER, int(limit))
            try:
                self._check_torque_limits(bus, written)
            except DRIVER_ERRORS as exc:
                raise self._fault(exc, "torque limit read-back") from exc
        bus.enable_torque()

    def _check_torque_limits(self, bus, written: dict[str, int]) -> None:
        """Every Max_Torque_Limit written while connecting, read back with torque still off: a servo
        that acknowledged the write but kept another value would otherwise press harder than the
        config says (the gripper's cap is what keeps a squeezed object from burning its motor)."""
        retries = max(1, int(self.cfg.num_read_retries))
        for motor, value in written.items():
            read = int(bus.read("Max_Torque_Limit", motor, normalize=False, num_retry=retries))
            if read != value:
                from spabench.bench.errors import BenchFault

                raise BenchFault(
                    f"motor '{motor}' did not take its torque limit: Max_Torque_Limit {value} was written and "
                    f"{read} read back (on {self.cfg.port}). The arm was not torqued. Power-cycle the arm and "
                    "try again; if it persists, the servo's EEPROM is locked or the servo is faulty: check it "
                    "with Feetech's FD software or replace it.")

    @property
    def _file_calibration(self) -> dict[str, dict[str, int]]:
        """The calibration file's values, read before every connect (never compared unread)."""
        if self.calibration is None:
            raise SafetyError(f"calibration file {self.calibration_path} was not read before the comparison")
        return self.calibration

    def _matches(self, stored: dict[str, dict[str, int]]) -> bool:
        return all(stored[j][k] == self._file_calibration[j][k] for j in JOINTS for k in stored[j])

    def _confirmed_calibration(self, bus, reads: int = 3) -> dict[str, dict[str, int]]:
        """The stored calibration, read again until it matches the file or two reads agree: a status
        packet that arrived late (a loaded computer) can shift one reading onto the next register."""
        previous = None
        for _ in range(reads):
            stored = self._stored_calibration(bus)
            if self._matches(stored) or stored == previous:
                return stored
            previous = stored
            bus.port_handler.clearPort()
        return stored

    def _stored_calibration(self, bus) -> dict[str, dict[str, int]]:
        """What the motors' EEPROM holds (the registers LeRobot's is_calibrated compares), read with
        the configured retries so that one lost status packet is not a refusal."""
        retries = max(1, int(self.cfg.num_read_retries))
        registers = {"homing_offset": "Homing_Offset", "range_min": "Min_Position_Limit",
                     "range_max": "Max_Position_Limit"}
        return {joint: {key: int(bus.read(reg, joint, normalize=False, num_retry=retries))
                        for key, reg in registers.items()} for joint in JOINTS}

    def _mismatch(self, stored: dict) -> SafetyError:
        diffs = []
        for joint in JOINTS:
            file_cal, motor_cal = self._file_calibration[joint], stored[joint]
            for key in ("homing_offset", "range_min", "range_max"):
                if file_cal[key] != motor_cal[key]:
                    diffs.append(f"{joint}.{key} file {file_cal[key]} vs motor {motor_cal[key]}")
        return SafetyError(
            f"calibration mismatch: {self.calibration_path} does not match the calibration stored in the "
            f"motors on {self.cfg.port} ({'; '.join(diffs) or 'unknown difference'}). Either the arm was "
            f"recalibrated or a motor swapped since the file was written, or the file belongs to another "
            f"arm. The robot was disconnected without torque ever being enabled. "
            f"{calibrate_hint(self.cfg, self.calibration_path)} "
            "To write the file's values into the motors instead, run the same command and press ENTER at "
            "its first prompt.")

    def _describe_connect_error(self, exc: BaseException) -> str:
        return (f"could not connect to the SO-101 follower on {self.cfg.port}: {exc}\n"
                "Check the arm's power supply and serial cable, that every motor is daisy-chained, and that "
                "`port` is the arm's controller (`lerobot-find-port`). Wrong model numbers or missing ids "
                "mean a motor was replaced or not set up (`lerobot-setup-motors`).")

    def _describe_bus_fault(self, exc: BaseException, what: str) -> str:
        return (f"the SO-101 servo bus on {self.cfg.port} stopped answering during {what}: {exc}. "
                "Check the arm's power supply and USB cable. The attempt is invalid, not a policy failure.")

    # ------------------------------------------------------------------ fast paths over the bus
    def _read_state(self) -> np.ndarray:
        values = self.robot.bus.sync_read("Present_Position", num_retry=self.cfg.num_read_retries)
        return np.array([values[j] for j in JOINTS], dtype=np.float64)

    @property
    def health_config(self):
        return self.cfg.health

    def _read_health(self):
        """Present_Load .. Present_Current of all six motors in one sync read (addresses from LeRobot's
        STS table): one bus transaction, so a sample fits in the slack of a control tick."""
        import time

        import scservo_sdk as scs
        from lerobot.motors.feetech.tables import STS_SMS_SERIES_CONTROL_TABLE as TABLE

        from spabench.bench.health import HealthSample

        bus = self.robot.bus
        regs = {name: TABLE[name] for name in ("Present_Load", "Present_Voltage", "Present_Temperature",
                                               "Status", "Present_Current")}
        start = min(addr for addr, _ in regs.values())
        length = max(addr + size for addr, size in regs.values()) - start
        reader = self.__dict__.get("_health_reader")
        if reader is None or reader.port is not bus.port_handler:
            reader = scs.GroupSyncRead(bus.port_handler, bus.packet_handler, start, length)
            for joint in JOINTS:
                reader.addParam(MOTOR_IDS[joint])
            self._health_reader = reader
        for _ in range(1 + int(self.cfg.num_read_retries)):
            comm = reader.txRxPacket()
            if comm == scs.COMM_SUCCESS and all(len(v) == length for v in reader.data_dict.values()):
                break
            # bus_replies skips a late status packet of another size; a short one fails the length check
            bus.port_handler.clearPort()
        else:
            raise ConnectionError(f"health sync read of {length} bytes from address {start} failed: "
                                  f"{bus.packet_handler.getTxRxResult(comm)}")
        t = time.monotonic()

        def column(name: str) -> np.ndarray:
            addr, size = regs[name]
            return np.array([reader.getData(MOTOR_IDS[j], addr, size) for j in JOINTS], dtype=np.int64)

        load = column("Present_Load")
        load = np.where(load & (1 << 10), -(load & 0x3FF), load & 0x3FF)  # sign bit 10 (LeRobot's encoding)
        return HealthSample(t=t, temperature_c=column("Present_Temperature").astype(float),
                            current_ma=(column("Present_Current") & 0x7FFF) * CURRENT_UNIT_MA,
                            load=load.astype(float), voltage_v=column("Present_Voltage") / 10.0,
                            status=column("Status"))

    def inspect_bus(self, say: Callable[[str], None] = lambda _: None):
        """Every motor's id, model, firmware, calibration, health and position, read with torque off
        and the port closed again without a write (spabench.bench.inspection)."""
        from spabench.bench.inspection import read_bus

        return read_bus(self, say)

    def use_port(self, port: str) -> None:
        """Point the (not yet connected) bench at `port`: what `bench check` found for `port: auto`."""
        if self._connected:
            raise RuntimeError("use_port on a connected bench")
        self.cfg = dataclasses.replace(self.cfg, port=port)
        self._robot = None

    def _send_hold(self, measured: np.ndarray) -> np.ndarray:
        """Copy the raw present positions into the goal registers: an exact hold, no rounding drift."""
        bus = self.robot.bus
        try:
            raw = bus.sync_read("Present_Position", normalize=False, num_retry=self.cfg.num_read_retries)
            bus.sync_write("Goal_Position", raw, normalize=False)
        except DRIVER_ERRORS as exc:
            raise self._fault(exc, "hold") from exc
        self.last_sent = measured.copy()
        return measured.copy()

    def _force_close(self) -> None:
        """Release the port even when the bus is dead; torque off motor by motor where possible."""
        robot = self._robot
        bus = getattr(robot, "bus", None)
        if bus is not None and bus.is_connected:
            if self.cfg.disable_torque_on_disconnect and not self._keep_torque:
                failures = 0
                for motor in bus.motors:
                    try:
                        bus.write("Torque_Enable", motor, 0, num_retry=1)
                        failures = 0
                    except Exception:  # noqa: BLE001 - a missing motor must not stop the others
                        failures += 1
                        if failures >= 2:  # two in a row: the bus itself is gone
                            break
            try:
                bus.port_handler.closePort()
            except Exception:  # noqa: BLE001
                logger.debug("closing %s failed", self.cfg.port, exc_info=True)
        super()._force_close()
