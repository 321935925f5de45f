"""A stateful Feetech STS3215 servo bus on a pseudo-terminal, for tests and benchmarks.

The unmodified LeRobot stack (SO101Follower -> FeetechMotorsBus -> scservo_sdk -> pyserial)
opens `EmulatedBus.port` like a USB serial adapter and talks protocol 0 to six emulated servos:

    instruction packet  FF FF id len inst params... chk      chk = ~(id + len + inst + params) & 0xFF
    status packet       FF FF id len err  params... chk      len = len(params) + 2

Supported instructions: PING (also broadcast), READ, WRITE, REG_WRITE, ACTION, SYNC_READ (each
listed id answers in turn, missing ids stay silent), SYNC_WRITE (no reply), RESET (no-op).

Each motor keeps a 256-byte memory map (EEPROM + SRAM, little endian) and a continuous position.
Present_Position = (position after homing) as LeRobot reads it: actual - Homing_Offset, folded into
0..4095 (angle feedback mode 0, which LeRobot selects by clearing Phase bit 4). Goal_Position and
Present_Position use sign-magnitude with bit 15, Homing_Offset with bit 11. With torque enabled the
position moves toward the goal at `rate_ticks_per_s` (None: instantly), clipped to the position
limits like the real servo does in position mode.

The servos run in a child process by default (mode="thread" runs them in a thread of this process);
EmulatedBus talks to them over a socket: inspection (goal_ticks, present_deg, register, snapshot,
goal_writes, register_writes, instruction_counts) and fault injection: go_silent()/resume(), late_reply(id, reg, length) (an answer the client gave up on
arrives just before the answer to its next instruction), remove_motor(id)/
restore_motor(id), set_model_number(id, n), set_stored_calibration(id, ...) (the motors' EEPROM no
longer matches the calibration file), move_by_hand(), set_rate(). Every inspection first lets the
servos handle all bytes the client already wrote, so the effect of a reply-less SYNC_WRITE is visible.

Motor health (what spabench.bench.health reads): with torque on, a motor draws current in proportion
to its position error (a P controller), from an idle draw up to its stall current scaled by the lower
of Max_Torque_Limit and Torque_Limit (per mille; LeRobot writes 500 to the gripper). Temperature
follows a first-order model, dT/dt = (ambient - T) / tau + heat * I^2, integrated exactly between
accesses; Present_Voltage is the supply minus the motor's own sag (R * I). Status sets bit 0 (voltage
outside Min/Max_Voltage_Limit) and bit 2 (above Max_Temperature_Limit) itself; other bits are
injected. The servo's own protections (torque unloading) are not modelled: the harness must act first.
Injection: stall(id, direction) (the motor cannot move past where it is: an obstacle or a squeezed
object), unstall(), set_temperature(), set_thermal(), set_supply_voltage(), set_status_bits().
grasp(gripper) puts an object between the fingers: the gripper cannot close past where it is now;
it lets go once the gripper opened `release` ticks beyond that point and then another joint moved
`away` ticks (the arm left the object behind), and grips it again if it closes before the arm left.
ignore_writes(id, reg): the servo acknowledges writes of that register but keeps its value (the STS
manual's Lock register does not do this: with Lock = 1 an EEPROM write takes effect and is only not
kept through a power-off; a servo that drops the value is a fault the harness must catch by reading it
back).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import socket
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CALIBRATION_FILE = REPO_ROOT / "hardware" / "calibration" / "so101_follower" / "spabench_follower.json"

# SO-101 follower wiring: joint name -> servo id (LeRobot's SOFollower uses the same ids).
SO101_MOTORS: dict[str, int] = {
    "shoulder_pan": 1,
    "shoulder_lift": 2,
    "elbow_flex": 3,
    "wrist_flex": 4,
    "wrist_roll": 5,
    "gripper": 6,
}
GRIPPER_IDS = frozenset({6})

STS3215_MODEL_NUMBER = 777
RESOLUTION = 4096
BROADCAST_ID = 0xFE

INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REG_WRITE = 0x04
INST_ACTION = 0x05
INST_RESET = 0x06
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83

# STS3215 control table: name -> (address, size). Addresses from the Feetech STS manual.
REG: dict[str, tuple[int, int]] = {
    "Firmware_Major_Version": (0, 1),
    "Firmware_Minor_Version": (1, 1),
    "Model_Number": (3, 2),
    "ID": (5, 1),
    "Baud_Rate": (6, 1),
    "Return_Delay_Time": (7, 1),
    "Response_Status_Level": (8, 1),
    "Min_Position_Limit": (9, 2),
    "Max_Position_Limit": (11, 2),
    "Max_Temperature_Limit": (13, 1),
    "Max_Voltage_Limit": (14, 1),
    "Min_Voltage_Limit": (15, 1),
    "Max_Torque_Limit": (16, 2),
    "Phase": (18, 1),
    "Unloading_Condition": (19, 1),
    "LED_Alarm_Condition": (20, 1),
    "P_Coefficient": (21, 1),
    "D_Coefficient": (22, 1),
    "I_Coefficient": (23, 1),
    "Minimum_Startup_Force": (24, 2),
    "CW_Dead_Zone": (26, 1),
    "CCW_Dead_Zone": (27, 1),
    "Protection_Current": (28, 2),
    "Angular_Resolution": (30, 1),
    "Homing_Offset": (31, 2),
    "Operating_Mode": (33, 1),
    "Protective_Torque": (34, 1),
    "Protection_Time": (35, 1),
    "Overload_Torque": (36, 1),
    "Torque_Enable": (40, 1),
    "Acceleration": (41, 1),
    "Goal_Position": (42, 2),
    "Goal_Time": (44, 2),
    "Goal_Velocity": (46, 2),
    "Torque_Limit": (48, 2),
    "Lock": (55, 1),
    "Present_Position": (56, 2),
    "Present_Velocity": (58, 2),
    "Present_Load": (60, 2),
    "Present_Voltage": (62, 1),
    "Present_Temperature": (63, 1),
    "Status": (65, 1),
    "Moving": (66, 1),
    "Present_Current": (69, 2),
    "Maximum_Acceleration": (85, 1),
}
SIGN_BITS = {"Homing_Offset": 11, "Goal_Position": 15, "Present_Position": 15, "Present_Velocity": 15,
             "Present_Load": 10}
PRESENT_BLOCK = range(56, 71)          # Present_Position .. Present_Current: refreshed on every read
CURRENT_UNIT_MA = 6.5                  # Present_Current: one count is 6.5 mA (STS3215 manual)
STATUS_VOLTAGE, STATUS_TEMPERATURE = 0x01, 0x04


@dataclass
class Electrical:
    """The servos' electrical and thermal model (shared by all six; injections change it)."""

    idle_ma: float = 40.0             # torque on, at its goal
    ma_per_tick: float = 10.0         # P controller: current per tick of position error
    stall_ma: float = 2700.0          # STS3215 stall current at full torque limit
    ambient_c: float = 25.0
    tau_s: float = 300.0              # thermal time constant of a motor in its case
    heat_c_per_a2s: float = 0.5       # initial heating slope per A^2 (about 1 C/s at the gripper's stall)
    supply_v: float = 12.0
    sag_ohm: float = 0.2
READ_ONLY_ADDRESSES = frozenset(range(0, 5)) | frozenset(range(56, 71))
GOAL_ADDR = REG["Goal_Position"][0]
HOMING_ADDR = REG["Homing_Offset"][0]
TORQUE_ADDR = REG["Torque_Enable"][0]
PRESENT_ADDR = REG["Present_Position"][0]

FACTORY_DEFAULTS: dict[str, int] = {
    "Firmware_Major_Version": 3,
    "Firmware_Minor_Version": 10,
    "Model_Number": STS3215_MODEL_NUMBER,
    "Baud_Rate": 0,  # 1 Mbaud
    "Return_Delay_Time": 250,
    "Response_Status_Level": 1,
    "Min_Position_Limit": 0,
    "Max_Position_Limit": RESOLUTION - 1,
    "Max_Temperature_Limit": 70,
    "Max_Voltage_Limit": 140,
    "Min_Voltage_Limit": 40,
    "Max_Torque_Limit": 1000,
    "Phase": 0x0C,
    "Unloading_Condition": 44,
    "LED_Alarm_Condition": 47,
    "P_Coefficient": 32,
    "D_Coefficient": 32,
    "I_Coefficient": 0,
    "Minimum_Startup_Force": 16,
    "CW_Dead_Zone": 1,
    "CCW_Dead_Zone": 1,
    "Protection_Current": 500,
    "Angular_Resolution": 1,
    "Homing_Offset": 0,
    "Operating_Mode": 0,
    "Protective_Torque": 20,
    "Protection_Time": 200,
    "Overload_Torque": 80,
    "Torque_Enable": 0,
    "Acceleration": 0,
    "Torque_Limit": 1000,
    "Lock": 1,
    "Present_Voltage": 121,
    "Present_Temperature": 31,
    "Maximum_Acceleration": 0,
}


def checksum(body: bytes | bytearray) -> int:
    """Protocol 0 checksum over id, length, instruction/error and parameters."""
    return ~sum(body) & 0xFF


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    return ((1 << sign_bit) if value < 0 else 0) | min(abs(int(value)), (1 << sign_bit) - 1)


def decode_sign_magnitude(raw: int, sign_bit: int) -> int:
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if (raw >> sign_bit) & 1 else magnitude


def status_packet(motor_id: int, error: int = 0, params: bytes | bytearray = b"") -> bytes:
    body = bytes([motor_id, len(params) + 2, error]) + bytes(params)
    return b"\xff\xff" + body + bytes([checksum(body)])


def instruction_packet(motor_id: int, inst: int, params: bytes | bytearray = b"") -> bytes:
    """Build an instruction packet (used by the emulator's own tests)."""
    body = bytes([motor_id, len(params) + 2, inst]) + bytes(params)
    return b"\xff\xff" + body + bytes([checksum(body)])


@dataclass
class GoalWrite:
    """One Goal_Position write as the servo received it (present-frame ticks, after decoding)."""

    t: float
    motor_id: int
    ticks: int


@dataclass
class EmulatedMotor:
    """One STS3215: memory map plus a continuous position in the present (homed) frame."""

    motor_id: int
    mem: bytearray = field(default_factory=lambda: bytearray(256))
    position: float = 2047.0  # present-frame ticks (what Present_Position reports)
    goal: float = 2047.0      # present-frame ticks, already clipped to the limits
    last_update: float = field(default_factory=time.monotonic)
    pending: tuple[int, bytes] | None = None  # REG_WRITE waiting for ACTION
    present: bool = True      # False: removed from the bus (does not answer)
    temperature: float = 31.0  # degrees C (continuous; Present_Temperature is its integer part)
    current_ma: float = 0.0
    blocked_at: float | None = None   # stall(): the motor cannot move past this position...
    blocked_dir: int = 0              # ...in this direction (+1 up, -1 down, 0 both)
    status_bits: int = 0              # injected Status bits (besides voltage and temperature)
    ignored: set[int] = field(default_factory=set)   # ignore_writes(): addresses whose writes are dropped

    def get(self, name: str) -> int:
        addr, size = REG[name]
        raw = int.from_bytes(self.mem[addr:addr + size], "little")
        return decode_sign_magnitude(raw, SIGN_BITS[name]) if name in SIGN_BITS else raw

    def put(self, name: str, value: int) -> None:
        addr, size = REG[name]
        raw = encode_sign_magnitude(value, SIGN_BITS[name]) if name in SIGN_BITS else int(value)
        self.mem[addr:addr + size] = (raw & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    @property
    def limits(self) -> tuple[int, int]:
        return self.get("Min_Position_Limit"), self.get("Max_Position_Limit")

    def clip_to_limits(self, ticks: float) -> float:
        lo, hi = self.limits
        if hi > lo and self.get("Operating_Mode") == 0:
            return min(max(ticks, lo), hi)
        return ticks


class ServoBusCore:
    """The servos' state and the protocol logic. Runs wherever the server loop runs (child or thread).

    Public methods are the control interface EmulatedBus calls over its RPC socket; they take and
    return JSON-friendly values (ids or joint names, ints, floats, lists, dicts).
    """

    def __init__(self, motors: Mapping[str, int], calibration: Mapping[str, Mapping[str, int]],
                 initial_ticks: Mapping[str, float], rate_ticks_per_s: float | None):
        self.motor_ids = dict(motors)
        self.rate_ticks_per_s = rate_ticks_per_s
        self.electrical = Electrical()
        self.silent = False
        self.stray = bytearray()                 # late status packets, sent before the next reply
        self.goal_log: list[list] = []           # [t, motor_id, ticks]
        self.write_log: list[list] = []          # [t, motor_id, address, [bytes]]: every write received
        self.counts: dict[int, int] = {}         # instruction -> packets received
        self.grasps: dict[int, dict] = {}        # grasp(): gripper id -> the object between its fingers
        self.motors: dict[int, EmulatedMotor] = {}
        for name, motor_id in self.motor_ids.items():
            motor = EmulatedMotor(motor_id)
            for reg, value in FACTORY_DEFAULTS.items():
                motor.put(reg, value)
            motor.put("ID", motor_id)
            cal = calibration.get(name)
            if cal is not None:
                motor.put("Homing_Offset", cal["homing_offset"])
                motor.put("Min_Position_Limit", cal["range_min"])
                motor.put("Max_Position_Limit", cal["range_max"])
            motor.position = motor.goal = float(initial_ticks[name])
            motor.temperature = float(FACTORY_DEFAULTS["Present_Temperature"])
            self._sync_goal_register(motor)
            self._sync_health_registers(motor)
            self.motors[motor_id] = motor

    # ------------------------------------------------------------------ control interface (RPC)
    def ping(self) -> bool:
        return True

    def present_ticks(self, key: str | int) -> int:
        motor = self._motor(key)
        self._advance(motor, time.monotonic())
        return int(round(motor.position)) % RESOLUTION

    def register(self, key: str | int, reg: str) -> int:
        if reg == "Present_Position":
            return self.present_ticks(key)
        return self._motor(key).get(reg)

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Every named register of every motor, plus the continuous position and goal."""
        out = {}
        for name, motor_id in self.motor_ids.items():
            motor = self.motors.get(motor_id)
            if motor is None:
                continue
            self._advance(motor, time.monotonic())
            self._sync_health_registers(motor)
            regs: dict[str, float] = {reg: motor.get(reg) for reg in REG}
            regs["Present_Position"] = int(round(motor.position)) % RESOLUTION
            regs["position"], regs["goal"], regs["present_on_bus"] = motor.position, motor.goal, motor.present
            regs["temperature"], regs["current_ma"] = motor.temperature, motor.current_ma
            out[name] = regs
        return out

    def goal_writes(self, motor_id: int | None = None) -> list[list]:
        return [g for g in self.goal_log if motor_id is None or g[1] == motor_id]

    def instruction_counts(self) -> dict[int, int]:
        return dict(self.counts)

    def register_writes(self, reg: str) -> list[list]:
        """[t, motor_id, value] for every write that covered register `reg` (any instruction)."""
        addr, size = REG[reg]
        out = []
        for t, motor_id, start, data in self.write_log:
            if start <= addr and addr + size <= start + len(data):
                raw = bytes(data[addr - start:addr - start + size])
                out.append([t, motor_id, int.from_bytes(raw, "little")])
        return out

    def set_silent(self, silent: bool) -> None:
        self.silent = bool(silent)

    def late_reply(self, key: str | int, addr: int, length: int) -> None:
        """Queue motor `key`'s status packet for a READ of `length` bytes at `addr`, sent ahead of the
        next instruction's reply (or alone, for an instruction without one): what a reply looks like
        that came after the client's packet timeout, from a servo or a host too slow to meet it."""
        motor = self._motor(key)
        self.stray += status_packet(motor.motor_id, 0, self._read_bytes(motor, addr, length, time.monotonic()))

    def set_present_on_bus(self, key: str | int, present: bool) -> None:
        self._motor(key).present = bool(present)

    def set_register(self, key: str | int, reg: str, value: int) -> None:
        """Raw EEPROM/SRAM poke (e.g. a wrong Model_Number); bypasses the servo's write rules."""
        self._motor(key).put(reg, value)

    def set_stored_calibration(self, key: str | int, homing_offset: int | None = None,
                               range_min: int | None = None, range_max: int | None = None) -> None:
        motor = self._motor(key)
        if homing_offset is not None:
            self._write_homing_offset(motor, homing_offset)
        if range_min is not None:
            motor.put("Min_Position_Limit", range_min)
        if range_max is not None:
            motor.put("Max_Position_Limit", range_max)

    def move_by_hand(self, key: str | int, ticks: float) -> None:
        motor = self._motor(key)
        motor.position = motor.goal = float(ticks)
        motor.last_update = time.monotonic()
        self._sync_goal_register(motor)

    def set_rate(self, rate_ticks_per_s: float | None) -> None:
        now = time.monotonic()
        for motor in self.motors.values():
            self._advance(motor, now)
        self.rate_ticks_per_s = rate_ticks_per_s

    def stall(self, key: str | int, direction: int = 0) -> None:
        """The motor cannot move past where it is now in `direction` (+1, -1; 0: not at all)."""
        motor = self._motor(key)
        self._advance(motor, time.monotonic())
        motor.blocked_at, motor.blocked_dir = motor.position, int(direction)

    def unstall(self, key: str | int) -> None:
        motor = self._motor(key)
        self._advance(motor, time.monotonic())
        motor.blocked_at, motor.blocked_dir = None, 0
        self.grasps.pop(motor.motor_id, None)

    def set_temperature(self, key: str | int, celsius: float) -> None:
        motor = self._motor(key)
        self._advance(motor, time.monotonic())
        motor.temperature = float(celsius)
        self._sync_health_registers(motor)

    def set_thermal(self, **params: float) -> None:
        """Change the electrical/thermal model (fields of Electrical), e.g. tau_s=2 to cool fast."""
        now = time.monotonic()
        for motor in self.motors.values():
            self._advance(motor, now)
        for name, value in params.items():
            if not hasattr(self.electrical, name):
                raise ValueError(f"unknown electrical parameter {name!r}")
            setattr(self.electrical, name, float(value))
        for motor in self.motors.values():
            self._sync_health_registers(motor)

    def set_status_bits(self, key: str | int, bits: int) -> None:
        motor = self._motor(key)
        motor.status_bits = int(bits)
        self._sync_health_registers(motor)

    def ignore_writes(self, key: str | int, reg: str) -> None:
        """Writes of register `reg` are acknowledged (and logged) but leave its value as it is."""
        addr, size = REG[reg]
        self._motor(key).ignored.update(range(addr, addr + size))

    def grasp(self, key: str | int, release_ticks: float, away_ticks: float) -> None:
        """An object between the fingers of gripper `key`, touching them where the gripper is now."""
        motor = self._motor(key)
        self._advance(motor, time.monotonic())
        motor.blocked_at, motor.blocked_dir = motor.position, -1
        self.grasps[motor.motor_id] = {"at": motor.position, "release": float(release_ticks),
                                       "away": float(away_ticks), "open_pose": None}

    def grasped(self, key: str | int) -> bool:
        self._update_grasps(time.monotonic())
        return self._motor(key).motor_id in self.grasps

    def _update_grasps(self, now: float) -> None:
        """The object stays between the fingers until the gripper opened past it and the arm moved away."""
        for gripper_id, grasp in list(self.grasps.items()):
            gripper = self.motors[gripper_id]
            self._advance(gripper, now)
            arm = {i: m for i, m in self.motors.items() if i != gripper_id}
            for m in arm.values():
                self._advance(m, now)
            if gripper.position < grasp["at"] + grasp["release"]:
                grasp["open_pose"] = None           # closed again before the arm left: gripped again
                continue
            if grasp["open_pose"] is None:
                grasp["open_pose"] = {i: m.position for i, m in arm.items()}
                continue
            if any(abs(m.position - grasp["open_pose"][i]) >= grasp["away"] for i, m in arm.items()):
                del self.grasps[gripper_id]         # the arm left the object behind on the table
                gripper.blocked_at, gripper.blocked_dir = None, 0

    # ------------------------------------------------------------------ servo behaviour
    def _motor(self, key: str | int) -> EmulatedMotor:
        motor_id = self.motor_ids[key] if isinstance(key, str) else int(key)
        return self.motors[motor_id]

    def _advance(self, motor: EmulatedMotor, now: float) -> None:
        dt = max(0.0, now - motor.last_update)
        motor.last_update = now
        self._heat(motor, dt)  # at the current drawn over the interval just ended
        if motor.get("Torque_Enable"):
            if self.rate_ticks_per_s is None:
                motor.position = motor.goal
            else:
                step = self.rate_ticks_per_s * dt
                motor.position += max(-step, min(step, motor.goal - motor.position))
            if motor.blocked_at is not None:
                if motor.blocked_dir >= 0 and motor.position > motor.blocked_at:
                    motor.position = motor.blocked_at
                if motor.blocked_dir <= 0 and motor.position < motor.blocked_at:
                    motor.position = motor.blocked_at
        motor.current_ma = self._current(motor)

    def _current(self, motor: EmulatedMotor) -> float:
        if not motor.get("Torque_Enable"):
            return 0.0
        e = self.electrical
        limit = min(motor.get("Max_Torque_Limit"), motor.get("Torque_Limit"), 1000) / 1000.0
        return min(e.idle_ma + e.ma_per_tick * abs(motor.goal - motor.position), e.stall_ma * limit)

    def _heat(self, motor: EmulatedMotor, dt: float) -> None:
        """First-order thermal model, solved exactly over dt at a constant current."""
        if dt <= 0:
            return
        e = self.electrical
        amps = motor.current_ma / 1000.0
        steady = e.ambient_c + e.heat_c_per_a2s * e.tau_s * amps * amps
        motor.temperature = steady + (motor.temperature - steady) * math.exp(-dt / e.tau_s)

    def _sync_health_registers(self, motor: EmulatedMotor) -> None:
        e = self.electrical
        volts = e.supply_v - e.sag_ohm * motor.current_ma / 1000.0
        decivolts = max(0, min(255, int(round(volts * 10))))
        status = motor.status_bits
        if not motor.get("Min_Voltage_Limit") <= decivolts <= motor.get("Max_Voltage_Limit"):
            status |= STATUS_VOLTAGE
        if motor.temperature > motor.get("Max_Temperature_Limit"):
            status |= STATUS_TEMPERATURE
        direction = 1 if motor.goal >= motor.position else -1
        motor.put("Present_Current", int(round(motor.current_ma / CURRENT_UNIT_MA)))
        motor.put("Present_Load", direction * int(round(1000 * motor.current_ma / e.stall_ma)))
        motor.put("Present_Voltage", decivolts)
        motor.put("Present_Temperature", max(0, min(255, int(motor.temperature))))
        motor.put("Status", status & 0xFF)

    def _sync_goal_register(self, motor: EmulatedMotor) -> None:
        motor.put("Goal_Position", int(round(motor.goal)))

    def _write_homing_offset(self, motor: EmulatedMotor, offset: int) -> None:
        # The physical shaft does not move: re-express position and goal in the new frame.
        shift = motor.get("Homing_Offset") - offset
        motor.put("Homing_Offset", offset)
        motor.position = (motor.position + shift) % RESOLUTION
        motor.goal = (motor.goal + shift) % RESOLUTION
        self._sync_goal_register(motor)

    def _read_bytes(self, motor: EmulatedMotor, addr: int, length: int, now: float) -> bytes:
        if addr < PRESENT_BLOCK.stop and addr + length > PRESENT_BLOCK.start:
            self._advance(motor, now)
            motor.put("Present_Position", int(round(motor.position)) % RESOLUTION)
            moving = abs(motor.goal - motor.position) > 0.5 and bool(motor.get("Torque_Enable"))
            motor.put("Moving", int(moving))
            self._sync_health_registers(motor)
        return bytes(motor.mem[addr:addr + length])

    def _write_bytes(self, motor: EmulatedMotor, addr: int, data: bytes, now: float) -> None:
        self._advance(motor, now)
        self.write_log.append([now, motor.motor_id, addr, list(data)])
        end = addr + len(data)
        for offset, byte in enumerate(data):
            a = addr + offset
            if a in READ_ONLY_ADDRESSES or a in (HOMING_ADDR, HOMING_ADDR + 1) or a in motor.ignored:
                continue
            motor.mem[a] = byte
        if addr <= HOMING_ADDR + 1 and end > HOMING_ADDR:
            merged = bytearray(motor.mem[HOMING_ADDR:HOMING_ADDR + 2])
            for offset, byte in enumerate(data):
                if HOMING_ADDR <= addr + offset <= HOMING_ADDR + 1:
                    merged[addr + offset - HOMING_ADDR] = byte
            self._write_homing_offset(motor, decode_sign_magnitude(int.from_bytes(merged, "little"), 11))
        if addr <= GOAL_ADDR + 1 and end > GOAL_ADDR:
            requested = motor.get("Goal_Position")
            motor.goal = motor.clip_to_limits(float(requested))
            self.goal_log.append([now, motor.motor_id, requested])
        if addr <= TORQUE_ADDR < end and not motor.get("Torque_Enable"):
            motor.goal = motor.position  # torque off: the servo holds where it is when re-enabled
            self._sync_goal_register(motor)
        motor.current_ma = self._current(motor)  # a new goal or torque limit changes the draw at once
        new_id = motor.get("ID")
        if new_id != motor.motor_id and new_id not in self.motors:
            self.motors.pop(motor.motor_id)
            motor.motor_id = new_id
            self.motors[new_id] = motor

    def _answering(self, motor_id: int) -> EmulatedMotor | None:
        motor = self.motors.get(motor_id)
        return motor if motor is not None and motor.present else None

    def handle(self, motor_id: int, inst: int, params: bytes) -> bytes:
        """Execute one instruction packet; return the bytes to send back (possibly none), after any
        late reply queued by late_reply()."""
        stray, self.stray = bytes(self.stray), bytearray()
        reply = stray + self._handle(motor_id, inst, params)
        if self.grasps:
            self._update_grasps(time.monotonic())
        return reply

    def _handle(self, motor_id: int, inst: int, params: bytes) -> bytes:
        now = time.monotonic()
        self.counts[inst] = self.counts.get(inst, 0) + 1
        if self.silent:
            return b""
        out = bytearray()
        if inst == INST_SYNC_WRITE and len(params) >= 2:
            addr, length = params[0], params[1]
            block = params[2:]
            for i in range(0, len(block) - length, length + 1):
                motor = self._answering(block[i])
                if motor is not None:
                    self._write_bytes(motor, addr, block[i + 1:i + 1 + length], now)
            return b""
        if inst == INST_SYNC_READ and len(params) >= 2:
            addr, length = params[0], params[1]
            for target in params[2:]:
                motor = self._answering(target)
                if motor is not None:
                    out += status_packet(target, 0, self._read_bytes(motor, addr, length, now))
            return bytes(out)
        targets = sorted(self.motors) if motor_id == BROADCAST_ID else [motor_id]
        for target in targets:
            motor = self._answering(target)
            if motor is None:
                continue
            reply: bytes | None = b""
            if inst == INST_READ and len(params) >= 2:
                reply = self._read_bytes(motor, params[0], params[1], now)
            elif inst == INST_WRITE and len(params) >= 1:
                self._write_bytes(motor, params[0], params[1:], now)
            elif inst == INST_REG_WRITE and len(params) >= 1:
                motor.pending = (params[0], bytes(params[1:]))
            elif inst == INST_ACTION:
                if motor.pending is not None:
                    self._write_bytes(motor, motor.pending[0], motor.pending[1], now)
                    motor.pending = None
            elif inst not in (INST_PING, INST_RESET):
                reply = None  # unknown instruction: real servos stay silent
            if reply is None:
                continue
            # Broadcast instructions get no status except PING; status level 0 answers only PING/READ.
            if motor_id == BROADCAST_ID and inst != INST_PING:
                continue
            if motor.get("Response_Status_Level") == 0 and inst not in (INST_PING, INST_READ):
                continue
            out += status_packet(motor.motor_id, 0, reply)
        return bytes(out)


def serve(core: ServoBusCore, master: int, ctrl, stop: threading.Event | None = None) -> None:
    """The server loop: answer instruction packets on the pty master and control calls on ctrl.

    Before answering a control call, every byte the client already wrote is handled, so a test that
    inspects the servos sees the effect of everything LeRobot sent (SYNC_WRITE has no reply to wait on).
    """
    buf = bytearray()
    ctrl_buf = bytearray()

    def drain_serial(quiet_s: float) -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except BlockingIOError:
                chunk = b""
            except OSError:  # no client has the slave open right now
                chunk = b""
            if chunk:
                buf.extend(chunk)
                replies = bytearray()
                while (packet := _take_packet(buf)) is not None:
                    replies += core.handle(*packet)
                if replies:
                    with contextlib.suppress(OSError):
                        os.write(master, replies)
                continue
            if quiet_s <= 0 or not select.select([master], [], [], quiet_s)[0]:
                return

    while stop is None or not stop.is_set():
        ready, _, _ = select.select([master, ctrl], [], [], 0.05)
        if master in ready:
            drain_serial(0.0)
        if ctrl in ready:
            data = ctrl.recv(65536)
            if not data:  # the owner is gone
                return
            ctrl_buf.extend(data)
            while b"\n" in ctrl_buf:
                line, _, rest = bytes(ctrl_buf).partition(b"\n")
                ctrl_buf[:] = rest
                drain_serial(0.001)  # bytes still in the pty's flip buffer arrive within microseconds
                request = json.loads(line)
                if request["m"] == "stop":
                    ctrl.sendall(b'{"r": null}\n')
                    return
                try:
                    result = getattr(core, request["m"])(*request.get("a", []), **request.get("k", {}))
                    reply = {"r": result}
                except Exception as exc:  # noqa: BLE001 - reported to the caller
                    reply = {"e": f"{type(exc).__name__}: {exc}"}
                ctrl.sendall(json.dumps(reply).encode() + b"\n")


class EmulatedBus:
    """Six emulated STS3215 servos behind a pseudo-terminal. Context manager; `.port` is the path.

    calibration: LeRobot calibration (path to a JSON file, or a mapping joint -> dict/MotorCalibration)
        stored into the motors' EEPROM at power-up, or None for factory state (offset 0, limits 0..4095).
    rate_ticks_per_s: how fast a motor with torque enabled moves toward its goal; None = instantly.
    initial_deg: starting joint positions in LeRobot's units (degrees around the calibrated
        mid-range; gripper 0..100). Default: every joint at mid-range.
    mode: "process" (default) serves the bus from a child Python process; "thread" from a thread of
        this process. The SDK busy-waits for each status packet for ~50 ms while holding the GIL; a
        thread in the same process can miss that deadline on a loaded machine, a process does not.
    """

    def __init__(
        self,
        calibration: str | os.PathLike | Mapping | None = DEFAULT_CALIBRATION_FILE,
        *,
        motors: Mapping[str, int] = SO101_MOTORS,
        rate_ticks_per_s: float | None = None,
        initial_deg: Mapping[str, float] | None = None,
        mode: str = "process",
    ):
        if mode not in ("process", "thread"):
            raise ValueError(f"EmulatedBus mode {mode!r} (allowed: process, thread)")
        self.mode = mode
        self.motor_ids = dict(motors)
        self.calibration = _load_calibration(calibration)
        self.rate_ticks_per_s = rate_ticks_per_s
        self.initial_ticks = {
            name: float(self.deg_to_ticks(name, initial_deg[name]) if initial_deg and name in initial_deg
                        else self._mid(name))
            for name in self.motor_ids
        }
        self.port: str = ""
        self._master_fd: int | None = None
        self._slave_fd: int | None = None
        self._ctrl = None
        self._child: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._rpc_lock = threading.Lock()
        self._rpc_buf = bytearray()
        self._saved_switch_interval: float | None = None

    # ------------------------------------------------------------------ lifecycle
    def _core_args(self) -> dict:
        return {"motors": self.motor_ids, "calibration": self.calibration,
                "initial_ticks": self.initial_ticks, "rate_ticks_per_s": self.rate_ticks_per_s}

    def start(self) -> EmulatedBus:
        master, slave = os.openpty()
        tty.setraw(master)
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._master_fd, self._slave_fd = master, slave  # the slave stays open: the pty lives on
        self.port = os.ttyname(slave)
        ours, theirs = socket.socketpair()
        self._ctrl = ours
        if self.mode == "process":
            theirs.set_inheritable(True)
            os.set_inheritable(master, True)
            self._child = subprocess.Popen(
                [sys.executable, "-S", "-c", _CHILD_BOOT, str(Path(__file__).resolve()), str(master),
                 str(theirs.fileno()), json.dumps(self._core_args())],
                pass_fds=(master, theirs.fileno()), close_fds=True,
            )
            theirs.close()
            os.close(master)
            self._master_fd = None
        else:
            self._saved_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._saved_switch_interval, 0.0005))
            core = ServoBusCore(**self._core_args())
            self._thread = threading.Thread(target=serve, args=(core, master, theirs), name="feetech-emulator",
                                            daemon=True)
            self._thread.start()
        self._call("ping")
        return self

    def close(self) -> None:
        if self._ctrl is not None:
            with contextlib.suppress(Exception):  # noqa: BLE001 - already gone
                self._call("stop", timeout_s=2.0)
            self._ctrl.close()
            self._ctrl = None
        if self._child is not None:
            try:
                self._child.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            self._child = None
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        for fd in (self._master_fd, self._slave_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master_fd = self._slave_fd = None
        if self._saved_switch_interval is not None:
            sys.setswitchinterval(self._saved_switch_interval)
            self._saved_switch_interval = None

    def __enter__(self) -> EmulatedBus:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, *args, timeout_s: float = 5.0, **kwargs):
        if self._ctrl is None:
            raise RuntimeError("EmulatedBus is not running: use it as a context manager or call start()")
        with self._rpc_lock:
            self._ctrl.sendall(json.dumps({"m": method, "a": list(args), "k": kwargs}).encode() + b"\n")
            deadline = time.monotonic() + timeout_s
            while b"\n" not in self._rpc_buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self._ctrl], [], [], remaining)[0]:
                    raise TimeoutError(f"emulated bus did not answer {method!r} within {timeout_s} s")
                data = self._ctrl.recv(65536)
                if not data:
                    raise RuntimeError("emulated bus server exited")
                self._rpc_buf.extend(data)
            line, _, rest = bytes(self._rpc_buf).partition(b"\n")
            self._rpc_buf[:] = rest
        reply = json.loads(line)
        if "e" in reply:
            raise RuntimeError(f"emulated bus: {method}: {reply['e']}")
        return reply["r"]

    def settle(self) -> None:
        """Wait until every byte the client has written so far has been handled by the servos."""
        self._call("ping")

    # ------------------------------------------------------------------ units
    def _mid(self, name: str) -> float:
        cal = self.calibration.get(name)
        if cal is None:
            return (RESOLUTION - 1) / 2
        return (cal["range_min"] + cal["range_max"]) / 2

    def deg_to_ticks(self, name: str, value: float) -> int:
        """LeRobot units -> present-frame ticks (degrees around mid-range; gripper 0..100 %)."""
        cal = self.calibration[name]
        if self.motor_ids[name] in GRIPPER_IDS:
            return int(round(cal["range_min"] + value / 100.0 * (cal["range_max"] - cal["range_min"])))
        return int(round(value * (RESOLUTION - 1) / 360.0 + self._mid(name)))

    def ticks_to_deg(self, name: str, ticks: float) -> float:
        """Present-frame ticks -> LeRobot units (the inverse of deg_to_ticks)."""
        cal = self.calibration[name]
        if self.motor_ids[name] in GRIPPER_IDS:
            return (ticks - cal["range_min"]) / (cal["range_max"] - cal["range_min"]) * 100.0
        return (ticks - self._mid(name)) * 360.0 / (RESOLUTION - 1)

    # ------------------------------------------------------------------ inspecting the servos
    # Every accessor first lets the servos handle whatever the client already sent.
    def present_ticks(self, key: str | int) -> int:
        return self._call("present_ticks", key)

    def goal_ticks(self, key: str | int) -> int:
        return self._call("register", key, "Goal_Position")

    def present_deg(self, name: str) -> float:
        return self.ticks_to_deg(name, self.present_ticks(name))

    def goal_deg(self, name: str) -> float:
        return self.ticks_to_deg(name, self.goal_ticks(name))

    def register(self, key: str | int, reg: str) -> int:
        return self._call("register", key, reg)

    def torque_enabled(self, key: str | int) -> bool:
        return bool(self.register(key, "Torque_Enable"))

    def stored_calibration(self, key: str | int) -> dict[str, int]:
        return {"homing_offset": self.register(key, "Homing_Offset"),
                "range_min": self.register(key, "Min_Position_Limit"),
                "range_max": self.register(key, "Max_Position_Limit")}

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Every register of every motor by joint name (plus position, goal, present_on_bus)."""
        return self._call("snapshot")

    def goal_writes(self, name: str | None = None) -> list[GoalWrite]:
        """Every Goal_Position write the servos received, in order (optionally for one joint)."""
        rows = self._call("goal_writes", None if name is None else self.motor_ids[name])
        return [GoalWrite(t, int(i), int(ticks)) for t, i, ticks in rows]

    def register_writes(self, reg: str) -> list[tuple[float, int, int]]:
        """Every write of register `reg` the servos received, in order: (t, motor_id, raw value).
        The write log behind it records every WRITE / SYNC_WRITE / ACTION, whatever the register."""
        return [(t, int(i), int(v)) for t, i, v in self._call("register_writes", reg)]

    @property
    def instruction_counts(self) -> dict[int, int]:
        """Instruction packets received so far, by instruction code (also while silent)."""
        return {int(k): v for k, v in self._call("instruction_counts").items()}

    # ------------------------------------------------------------------ fault injection
    def go_silent(self) -> None:
        """The bus stops answering (power loss, unplugged cable): packets are swallowed."""
        self._call("set_silent", True)

    def resume(self) -> None:
        self._call("set_silent", False)

    def late_reply(self, key: str | int, reg: str, length: int | None = None) -> None:
        """A late answer: motor `key`'s status packet for a read of `length` bytes (default: the
        register's size) from register `reg` reaches the client just before its next reply."""
        addr, size = REG[reg]
        self._call("late_reply", key, addr, size if length is None else int(length))

    def remove_motor(self, key: str | int) -> None:
        """The motor stops answering (unplugged from the daisy chain)."""
        self._call("set_present_on_bus", key, False)

    def restore_motor(self, key: str | int) -> None:
        self._call("set_present_on_bus", key, True)

    def set_model_number(self, key: str | int, model_number: int) -> None:
        self._call("set_register", key, "Model_Number", int(model_number))

    def set_stored_calibration(self, key: str | int, *, homing_offset: int | None = None,
                               range_min: int | None = None, range_max: int | None = None) -> None:
        """Change what the motor's EEPROM holds, so it no longer matches the calibration file."""
        self._call("set_stored_calibration", key, homing_offset, range_min, range_max)

    def move_by_hand(self, name: str, value_deg: float) -> None:
        """Put a joint somewhere (an operator moving the arm, or a collision); the goal follows."""
        self._call("move_by_hand", name, self.deg_to_ticks(name, value_deg))

    def set_rate(self, rate_ticks_per_s: float | None) -> None:
        self._call("set_rate", rate_ticks_per_s)

    def stall(self, name: str, direction: int = 0) -> None:
        """The joint cannot move past where it is now in `direction` (+1: toward larger values, -1:
        smaller, 0: neither): a squeezed object or an obstacle. It draws current while its goal lies
        beyond, and heats up."""
        self._call("stall", name, int(direction))

    def unstall(self, name: str) -> None:
        self._call("unstall", name)

    def set_temperature(self, name: str, celsius: float) -> None:
        """Over-temperature injection: the motor is this hot now (it then follows the thermal model)."""
        self._call("set_temperature", name, float(celsius))

    def set_thermal(self, **params: float) -> None:
        """Change the model (Electrical fields: tau_s, heat_c_per_a2s, ambient_c, stall_ma, ...)."""
        self._call("set_thermal", **params)

    def set_supply_voltage(self, volts: float) -> None:
        self._call("set_thermal", supply_v=float(volts))

    def set_status_bits(self, name: str, bits: int) -> None:
        """Servo error bits reported in Status besides the modelled voltage/temperature bits."""
        self._call("set_status_bits", name, int(bits))

    def ignore_writes(self, key: str | int, reg: str) -> None:
        """The servo acknowledges every write of `reg` but keeps the value it has (a refused write)."""
        self._call("ignore_writes", key, reg)

    def grasp(self, name: str = "gripper", release: float = 8.0, away_deg: float = 5.0) -> None:
        """An object between the gripper's fingers where they are now: the gripper cannot close past it
        (it stalls pressing it) until it opened `release` gripper units beyond it and then another
        joint moved `away_deg` degrees (the arm left the object on the table)."""
        cal = self.calibration[name]
        release_ticks = release / 100.0 * (cal["range_max"] - cal["range_min"])
        self._call("grasp", name, release_ticks, away_deg * (RESOLUTION - 1) / 360.0)

    def grasped(self, name: str = "gripper") -> bool:
        """Whether the object grasp() put there is still between the fingers."""
        return bool(self._call("grasped", name))

    def temperature(self, name: str) -> float:
        """The motor's continuous temperature (C) now."""
        return float(self.snapshot()[name]["temperature"])


EMULATOR_PRIORITY = 50   # SCHED_FIFO: above any bench.realtime_priority a test or benchmark uses


def raise_priority() -> None:
    """Servos answer within microseconds, whatever the host computer does; the SDK waits only ~50 ms.
    The emulator stands in for hardware, so it runs at real-time priority where allowed (it sleeps in
    select() between packets and never spins, so it takes from no one), else at nice -10 (else as is):
    on a machine busy with two test workers a normal-priority emulator missed that window. Its priority
    is above the control process's during a rollout (bench.realtime_priority, 10 in the shipped bench
    files, its other threads one below): at FIFO 1 the emulator once went unanswered for three tries
    while those threads held both cores (benchmarks/console_loop.py, quiet machine)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(EMULATOR_PRIORITY))
    except (OSError, AttributeError):
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, 0, -10)


# The child process: a bare interpreter (-S: no site imports) that loads this file and serves.
_CHILD_BOOT = """
import importlib.util, json, socket, sys
spec = importlib.util.spec_from_file_location("spabench_feetech_bus_child", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
ctrl = socket.socket(fileno=int(sys.argv[3]))
mod.raise_priority()
mod.serve(mod.ServoBusCore(**json.loads(sys.argv[4])), int(sys.argv[2]), ctrl)
"""


def _take_packet(buf: bytearray) -> tuple[int, int, bytes] | None:
    """Pop the first complete, valid instruction packet from buf (garbage before it is dropped)."""
    while True:
        start = buf.find(b"\xff\xff")
        if start < 0:
            del buf[:-1 if buf[-1:] == b"\xff" else len(buf)]
            return None
        if start:
            del buf[:start]
        if len(buf) >= 3 and buf[2] == 0xFF:  # FF FF FF ...: the header starts one byte later
            del buf[0]
            continue
        if len(buf) < 4:
            return None
        length = buf[3]
        if length < 2:
            del buf[:2]
            continue
        total = length + 4
        if len(buf) < total:
            return None
        body = bytes(buf[2:total - 1])
        if checksum(body) != buf[total - 1]:
            del buf[:2]
            continue
        del buf[:total]
        return body[0], body[2], body[3:]


def _load_calibration(calibration) -> dict[str, dict[str, int]]:
    if calibration is None:
        return {}
    if isinstance(calibration, (str, os.PathLike)):
        calibration = json.loads(Path(calibration).read_text())
    out = {}
    for name, cal in calibration.items():
        if not isinstance(cal, Mapping):
            cal = {k: getattr(cal, k) for k in ("id", "drive_mode", "homing_offset", "range_min", "range_max")}
        out[name] = {k: int(v) for k, v in cal.items()}
    return out
