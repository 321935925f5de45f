"""The SO-101's servo bus read with torque off: what `spabench bench check` records about the arm.

Safe on a live arm: the port is opened without LeRobot's configure() (which ends with Torque_Enable=1),
every access is a read, and the port is closed without the Torque_Enable=0 writes of LeRobot's
disconnect (an arm held by its servos would drop). Each motor is read on its own, so one motor that
does not answer is named while the others are still reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from spabench.bench.bench import DRIVER_ERRORS
from spabench.bench.bus_replies import reject_late_replies
from spabench.bench.ports import AUTO, find_arm_port, in_use_error, release_bus
from spabench.errors import SpabenchError
from spabench.suite.vocabulary import JOINTS

if TYPE_CHECKING:
    from spabench.bench.so101 import SO101Bench

# Per-motor registers read one by one (name in the readout -> LeRobot's STS control-table name).
MOTOR_REGISTERS: dict[str, str] = {
    "model_number": "Model_Number",
    "firmware_major": "Firmware_Major_Version",
    "firmware_minor": "Firmware_Minor_Version",
    "torque_enable": "Torque_Enable",
    "torque_limit": "Torque_Limit",
    "max_torque_limit": "Max_Torque_Limit",
    "min_voltage_limit": "Min_Voltage_Limit",
    "max_temperature_limit": "Max_Temperature_Limit",
}


@dataclass
class MotorReadout:
    """One motor as the bus reported it (None: not read)."""

    name: str
    id: int
    expected_model: str
    expected_model_number: int
    answered: bool = False
    error: str = ""
    model_number: int | None = None
    firmware: str | None = None
    torque_enable: int | None = None
    torque_limit: int | None = None
    max_torque_limit: int | None = None
    min_voltage_limit: int | None = None
    max_temperature_limit: int | None = None
    stored_calibration: dict[str, int] | None = None
    file_calibration: dict[str, int] | None = None
    voltage_v: float | None = None
    temperature_c: float | None = None
    current_ma: float | None = None
    status: int | None = None
    position: float | None = None


@dataclass
class BusReadout:
    """The whole bus: the port, every motor, the calibration file and the arm's pose."""

    port: str
    robot_id: str
    calibration_file: str
    motors: list[MotorReadout] = field(default_factory=list)
    opened: bool = False
    error: str = ""                      # the port could not be opened / nothing answered
    found_port: str = ""                 # bench.port was auto: where the arm answered
    calibration_error: str = ""          # the file is missing or malformed (with the lerobot-calibrate line)
    calibration_mismatch: str = ""       # the motors' EEPROM differs from the file (same)
    health_error: str = ""
    calibrate_command: str = ""
    pose: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibrate_command(bench: SO101Bench) -> str:
    """The exact `lerobot-calibrate` line that (re)writes this bench's calibration file."""
    from spabench.bench.so101 import ROBOT_TYPE

    return (f"lerobot-calibrate --robot.type={ROBOT_TYPE} --robot.port={bench.cfg.port} "
            f"--robot.id={bench.cfg.robot_id} --robot.calibration_dir={bench.calibration_path.parent}")


def read_bus(bench: SO101Bench, say: Callable[[str], None] = lambda _: None) -> BusReadout:
    """Everything the check reports about the bus, read without torque (module docstring); a port another
    process holds is not read, and `port: auto` is found first (spabench.bench.ports)."""
    from spabench.bench.so101 import MOTOR_IDS, load_calibration_file

    found = ""
    if bench.cfg.port == AUTO:
        found, why = find_arm_port(bench, say)
        if not found:
            return BusReadout(port=AUTO, robot_id=bench.cfg.robot_id, calibration_file=str(bench.calibration_path),
                              error=why)
        bench.use_port(found)
    readout = BusReadout(port=bench.cfg.port, robot_id=bench.cfg.robot_id, found_port=found,
                         calibration_file=str(bench.calibration_path), calibrate_command=calibrate_command(bench))
    try:
        bench.calibration = load_calibration_file(bench.calibration_path, bench.cfg)
    except SpabenchError as exc:
        readout.calibration_error = str(exc)
        bench.calibration = None
    if bench.cfg.port.startswith("/") and not _exists(bench.cfg.port):
        readout.error = (f"serial port {bench.cfg.port} does not exist (bench config field 'port'); plug in the "
                         "arm's controller board and find its port with `lerobot-find-port`")
        return readout
    busy = in_use_error(bench.cfg.port)
    if busy:
        readout.error = busy
        return readout
    try:
        robot = bench.robot
        bus = robot.bus
    except DRIVER_ERRORS as exc:
        readout.error = f"could not build the LeRobot robot for {bench.cfg.port}: {exc}"
        return readout
    from lerobot.motors.feetech.tables import MODEL_NUMBER_TABLE

    for joint in JOINTS:
        motor = bus.motors[joint]
        readout.motors.append(MotorReadout(joint, MOTOR_IDS[joint], motor.model,
                                           int(MODEL_NUMBER_TABLE[motor.model])))
    try:
        bus.connect(handshake=False)   # opens the port only: the per-motor reads below are the handshake
    except DRIVER_ERRORS as exc:
        readout.error = f"could not open the servo bus on {bench.cfg.port}: {exc}".replace("\n", " ")
        return readout
    readout.opened = True
    try:
        reject_late_replies(bus.packet_handler)
        _read_motors(bench, bus, readout)
        answered = [m for m in readout.motors if m.answered]
        if not answered:
            readout.error = (f"no motor answered on {bench.cfg.port}: check the arm's power supply, that every "
                             "motor is daisy-chained, and that the port is the arm's controller (`lerobot-find-port`)")
            return readout
        if len(answered) == len(readout.motors):
            _read_health(bench, readout)
            _read_pose(bench, bus, readout)
    finally:
        release_bus(bus, bench.cfg.port)   # closes the port; no Torque_Enable write
    return readout


def _exists(port: str) -> bool:
    from pathlib import Path

    return Path(port).exists()


def _read_motors(bench: SO101Bench, bus: Any, readout: BusReadout) -> None:
    """Model, firmware, torque state and limits, and the stored calibration of every motor."""
    retries = max(1, int(bench.cfg.num_read_retries))
    file_cal = bench.calibration
    for m in readout.motors:
        try:
            values = {key: int(bus.read(reg, m.name, normalize=False, num_retry=retries))
                      for key, reg in MOTOR_REGISTERS.items()}
        except DRIVER_ERRORS as exc:
            m.error = f"motor '{m.name}' (id {m.id}) does not answer on {bench.cfg.port}: {exc}".replace("\n", " ")
            continue
        m.answered = True
        m.model_number = values["model_number"]
        m.firmware = f"{values['firmware_major']}.{values['firmware_minor']}"
        for key in ("torque_enable", "torque_limit", "max_torque_limit", "min_voltage_limit",
                    "max_temperature_limit"):
            setattr(m, key, values[key])
        if file_cal is not None:
            m.file_calibration = {k: file_cal[m.name][k] for k in ("homing_offset", "range_min", "range_max")}
    if file_cal is None or not all(m.answered for m in readout.motors):
        return
    try:
        stored = bench._confirmed_calibration(bus)
    except DRIVER_ERRORS as exc:
        readout.calibration_mismatch = f"the stored calibration could not be read: {exc}"
        return
    for m in readout.motors:
        m.stored_calibration = stored[m.name]
    if not bench._matches(stored):
        readout.calibration_mismatch = str(bench._mismatch(stored))


def _read_health(bench: SO101Bench, readout: BusReadout) -> None:
    """Supply voltage, temperature, current and Status of all six motors (the health monitor's read)."""
    try:
        sample = bench._read_health()
    except DRIVER_ERRORS as exc:
        readout.health_error = f"the health registers could not be read: {exc}"
        return
    for i, m in enumerate(readout.motors):
        m.voltage_v = round(float(sample.voltage_v[i]), 2)
        m.temperature_c = float(sample.temperature_c[i])
        m.current_ma = round(float(sample.current_ma[i]), 1)
        m.status = int(sample.status[i])


def _read_pose(bench: SO101Bench, bus: Any, readout: BusReadout) -> None:
    """Present positions in the bench's units (degrees; gripper 0..100), under the file's calibration."""
    if bench.calibration is None or not bus.calibration:
        return
    try:
        values = bus.sync_read("Present_Position", num_retry=bench.cfg.num_read_retries)
    except DRIVER_ERRORS as exc:
        readout.health_error = readout.health_error or f"the present positions could not be read: {exc}"
        return
    pose = np.array([float(values[j]) for j in JOINTS])
    readout.pose = {j: round(float(v), 2) for j, v in zip(JOINTS, pose, strict=True)}
    for m in readout.motors:
        m.position = readout.pose[m.name]
