"""The bus part of `bench check`: the servo readout (spabench.bench.inspection) judged into items.

Fails: a port that does not open, a motor that does not answer or is another model, mixed firmware,
a calibration file that is missing or does not match the motors (with the exact `lerobot-calibrate`
line), a supply below bench.health.min_voltage_v, a Status error bit, a motor at the rollout's
overheat limit, a resting pose outside the joint limits or the whole-arm envelope. Shown without
failing: a warm motor, torque on (a session holds the arm), the distance from the home pose.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spabench.bench.health import STATUS_BITS, status_names
from spabench.commission.record import CheckRecord
from spabench.suite.vocabulary import JOINTS

STATUS_VOLTAGE = 1 << next(bit for bit, name in STATUS_BITS.items() if name == "voltage")


def check_bus(bench: Any, record: CheckRecord, say: Callable[[str], None] = lambda _: None) -> None:
    """Read the bus with torque off and add its items to `record` (parts['bus'])."""
    readout = bench.inspect_bus(say)
    if readout is None:
        record.add("bus", "bus", True, f"the {bench.kind} bench has no servo bus to check")
        return
    record.parts["bus"] = readout.as_dict()
    if readout.found_port:
        record.add("bus", "port", True, f"bench.port is auto: the arm answers on {readout.found_port} "
                   f"(write `port: {readout.found_port}` in the bench file; a run needs it)")
    if readout.calibration_error:
        record.add("calibration", "file", False, readout.calibration_error)
    if readout.error:
        record.add("bus", readout.port, False, readout.error)
        return
    for m in readout.motors:
        if not m.answered:
            record.add("bus", m.name, False, m.error)
        elif m.model_number != m.expected_model_number:
            record.add("bus", m.name, False,
                       f"motor '{m.name}' (id {m.id}) reports model number {m.model_number}, expected "
                       f"{m.expected_model} ({m.expected_model_number}): a motor was replaced or not set up "
                       "(`lerobot-setup-motors`)")
        else:
            record.add("bus", m.name, True, f"motor '{m.name}' id {m.id}, {m.expected_model}, firmware {m.firmware}")
    firmware = {m.firmware for m in readout.motors if m.answered}
    if len(firmware) > 1:
        listing = ", ".join(f"{m.name} {m.firmware}" for m in readout.motors if m.answered)
        record.add("bus", "firmware", False, f"the motors run different firmware versions ({listing}); "
                   "LeRobot refuses mixed firmware: update them with Feetech's software")
    _judge_calibration(readout, record)
    if readout.health_error:
        record.add("health", "registers", False, readout.health_error)
    _judge_health(bench, readout, record)
    _judge_pose(bench, readout, record)


def _judge_calibration(readout: Any, record: CheckRecord) -> None:
    if readout.calibration_error or not all(m.answered for m in readout.motors):
        return
    if not readout.calibration_mismatch:
        record.add("calibration", "file", True, f"the motors match {readout.calibration_file}")
        return
    diffs = [f"{m.name}.{k} file {m.file_calibration[k]} vs motor {m.stored_calibration[k]}"
             for m in readout.motors if m.stored_calibration and m.file_calibration
             for k in ("homing_offset", "range_min", "range_max") if m.stored_calibration[k] != m.file_calibration[k]]
    record.add("calibration", "file", False,
               f"calibration mismatch: {readout.calibration_file} does not match the motors "
               f"({'; '.join(diffs) or readout.calibration_mismatch}); recalibrate with `{readout.calibrate_command}`")


def _judge_health(bench: Any, readout: Any, record: CheckRecord) -> None:
    cfg = bench.health_config
    low = sorted((m for m in readout.motors if m.voltage_v is not None and m.voltage_v < cfg.min_voltage_v),
                 key=lambda m: m.voltage_v)
    if low:   # one supply feeds every motor: one line, naming the lowest reading
        others = f" ({len(low)} motors below it: {', '.join(m.name for m in low)})" if len(low) > 1 else ""
        record.add("health", "supply", False,
                   f"supply: motor '{low[0].name}' reads {low[0].voltage_v:.1f} V, below bench.health.min_voltage_v "
                   f"{cfg.min_voltage_v:g} V{others}: check the power supply")
    for m in readout.motors:
        if m.voltage_v is None:
            continue
        bits = (m.status or 0) & ~(STATUS_VOLTAGE if m in low else 0)   # the supply line already says it
        if bits:
            record.add("health", m.name, False,
                       f"status: motor '{m.name}' reports Status 0x{bits:02x} ({', '.join(status_names(bits))}): "
                       "power-cycle the arm; if it stays, check the motor with Feetech's software")
        if m.temperature_c is not None and m.temperature_c >= cfg.max_temperature_c:
            record.add("health", m.name, False, f"temperature: motor '{m.name}' at {m.temperature_c:.0f} C, at the "
                       f"overheat limit {cfg.max_temperature_c:g} C: let it cool")
        elif m.temperature_c is not None and m.temperature_c >= cfg.warn_temperature_c:
            record.add("health", m.name, True, f"temperature: motor '{m.name}' at {m.temperature_c:.0f} C; `run` "
                       f"waits until every motor is below {cfg.resume_temperature_c:g} C", warn=True)
    if all(m.voltage_v is not None for m in readout.motors):
        volts = min(m.voltage_v for m in readout.motors)
        hottest = max(readout.motors, key=lambda m: m.temperature_c or 0.0)
        record.add("health", "motors", True, f"supply {volts:.1f} V (min {cfg.min_voltage_v:g} V), hottest "
                   f"{hottest.name} {hottest.temperature_c:.0f} C")
    held = [m.name for m in readout.motors if m.torque_enable]
    if held:
        record.add("health", "torque", True, f"torque is on at {', '.join(held)} (a session holds the arm); the "
                   "check read only", warn=True)


def _judge_pose(bench: Any, readout: Any, record: CheckRecord) -> None:
    if readout.pose is None:
        return
    pose = np.array([readout.pose[j] for j in JOINTS], dtype=float)
    env = bench.envelope
    outside = [f"{j} {v:.1f} (limits {lo:g}..{hi:g})" for j, v, lo, hi in zip(JOINTS, pose, env.lo, env.hi, strict=True)
               if not lo <= v <= hi]
    if outside:
        record.add("pose", "joint limits", False, f"the arm rests outside its joint limits: {', '.join(outside)}; "
                   "move it by hand inside before `run` (bench.joint_limits)")
    if env.workspace is not None:
        worst = env.workspace.worst(pose)
        if worst.depth > 0:
            record.add("pose", "envelope", False, f"the arm rests outside the whole-arm envelope: "
                       f"{env.workspace.describe(worst)} (hardware/bench.yaml arm_envelope); move it by hand inside")
        else:
            record.add("pose", "envelope", True, "the arm rests inside the whole-arm envelope")
    off = np.abs(pose - bench.home_pose)
    i = int(np.argmax(off))
    at_home = bool(off[i] <= 2 * bench.cfg.home_tolerance_deg)
    record.parts["bus"]["home_offsets"] = {j: round(float(v), 2) for j, v in zip(JOINTS, pose - bench.home_pose,
                                                                                 strict=True)}
    record.add("pose", "home", True, "the arm rests at its home pose" if at_home else
               f"the arm rests {off[i]:.1f} away from its home pose at {JOINTS[i]}; `run` drives it home first")
