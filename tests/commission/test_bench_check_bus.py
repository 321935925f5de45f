"""`spabench bench check`, the bus part (issue 37): the real CLI, LeRobot's FeetechMotorsBus on the
emulated SO-101 (health registers, write log), never a torque write.

Failed before: `spabench bench check` was an unknown command (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spabench.cli.main import main
from spabench.suite.vocabulary import JOINTS
from tests.support.feetech_bus import EmulatedBus

HOME = {"shoulder_pan": 0.0, "shoulder_lift": -60.0, "elbow_flex": 60.0, "wrist_flex": 60.0, "wrist_roll": 0.0,
        "gripper": 10.0}


@pytest.fixture
def arm():
    with EmulatedBus(initial_deg=HOME) as bus:
        yield bus


def check(bus: EmulatedBus, calib: Path, out: Path, capsys, *extra: str) -> tuple[int, str, dict]:
    code = main(["bench", "check", "bench=so101_emulated", f"bench.port={bus.port}",
                 f"bench.calibration_dir={calib}", f"out={out}", "camera_s=0.5",
                 f"camera_references={out.parent / 'references'}", *extra])
    text = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    return code, text, report


def no_torque_or_goal_written(bus: EmulatedBus) -> None:
    assert [w for w in bus.register_writes("Torque_Enable") if w[2] == 1] == []
    assert bus.register_writes("Torque_Enable") == [] and bus.goal_writes() == []
    assert not any(bus.torque_enabled(j) for j in JOINTS)


def test_a_healthy_arm_at_home_passes_and_nothing_is_written(arm, calib, tmp_path, capsys):
    out = tmp_path / "check"
    code, text, report = check(arm, calib, out, capsys)
    assert code == 0, text
    assert report["result"] == "pass" and report["failures"] == []
    motors = {m["name"]: m for m in report["parts"]["bus"]["motors"]}
    assert set(motors) == set(JOINTS)
    assert all(m["model_number"] == 777 and m["answered"] and m["voltage_v"] > 4.5 and m["status"] == 0
               for m in motors.values())
    assert motors["gripper"]["id"] == 6 and motors["elbow_flex"]["firmware"]
    assert abs(motors["elbow_flex"]["position"] - 60.0) < 1.0
    assert any(i["part"] == "pose" and "home pose" in i["message"] and i["ok"] for i in report["items"])
    assert (out / "report.html").read_text().count("<td>sts3215") == 0   # the table shows model numbers
    assert "PASS" in (out / "report.html").read_text()
    assert "bench check passed" in text
    no_torque_or_goal_written(arm)


def test_a_3_volt_supply_fails_naming_motor_and_value(arm, calib, tmp_path, capsys):
    arm.set_supply_voltage(3.0)
    code, text, report = check(arm, calib, tmp_path / "check", capsys)
    assert code != 0
    lines = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert len(lines) == 1, text   # one supply feeds the six motors: one line, no echo of their voltage bit
    assert lines[0].startswith("FAIL health: supply: motor 'shoulder_pan' reads 3.0 V, below "
                               "bench.health.min_voltage_v 4.5 V (6 motors below it: shoulder_pan,"), text
    assert report["result"] == "fail"
    no_torque_or_goal_written(arm)


def test_a_status_bit_fails_naming_the_motor_and_the_error(arm, calib, tmp_path, capsys):
    arm.set_status_bits("elbow_flex", 0x20)
    code, text, report = check(arm, calib, tmp_path / "check", capsys)
    assert code != 0
    fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert fails == ["FAIL health: status: motor 'elbow_flex' reports Status 0x20 (overload): power-cycle the arm; "
                     "if it stays, check the motor with Feetech's software"], text
    no_torque_or_goal_written(arm)


def test_a_calibration_mismatch_fails_with_the_lerobot_calibrate_line(arm, calib, tmp_path, capsys):
    stored = arm.stored_calibration("wrist_flex")
    arm.set_stored_calibration("wrist_flex", homing_offset=stored["homing_offset"] + 40)
    code, text, report = check(arm, calib, tmp_path / "check", capsys)
    assert code != 0
    fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 1 and fails[0].startswith("FAIL calibration: calibration mismatch"), text
    assert f"wrist_flex.homing_offset file {stored['homing_offset']} vs motor {stored['homing_offset'] + 40}" in fails[0]
    assert (f"`lerobot-calibrate --robot.type=so101_follower --robot.port={arm.port} --robot.id=spabench_follower "
            f"--robot.calibration_dir={calib}`") in fails[0]
    no_torque_or_goal_written(arm)


def test_a_missing_motor_and_a_missing_port_are_named(arm, calib, tmp_path, capsys):
    arm.remove_motor("wrist_roll")
    code, text, _ = check(arm, calib, tmp_path / "one", capsys)
    assert code != 0 and "FAIL bus: motor 'wrist_roll' (id 5) does not answer" in text, text
    code = main(["bench", "check", "bench=so101_emulated", "bench.port=/dev/ttyNOSUCH9", "camera_s=0.5",
                 f"bench.calibration_dir={calib}", f"out={tmp_path / 'two'}",
                 f"camera_references={tmp_path / 'references'}"])
    text = capsys.readouterr().out
    assert code != 0 and "FAIL bus: serial port /dev/ttyNOSUCH9 does not exist" in text, text


def test_the_default_folder_is_dated_under_bench_checks(arm, calib, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "check", "bench=so101_emulated", f"bench.port={arm.port}", "camera_s=0.5",
                 f"bench.calibration_dir={calib}"]) == 0, capsys.readouterr()
    folders = sorted((tmp_path / "bench-checks").iterdir())
    assert [f.name for f in folders][-1] == "references"   # the first check stored the camera references
    folder = folders[0]
    assert len(folders) == 2 and (tmp_path / "bench-checks" / "references" / "spabench_follower" / "wrist.png").is_file()
    assert (folder / "report.json").is_file() and (folder / "report.html").is_file()
    assert folder.name[:4].isdigit() and "_" in folder.name
