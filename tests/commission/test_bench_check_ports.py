"""`bench check` finds the arm's port (`bench.port: auto`) and never reads a port another process holds
(issue 37: "port found (reuse LeRobot's port discovery where the port is not given)").

Real parts: LeRobot's FeetechMotorsBus pinging the emulated SO-101 on pseudo-terminals, a real second
process holding a port open, /proc. Mocked, because no USB device exists here: pyserial's enumeration
(`serial.tools.list_ports.comports`), which reports the emulators' ptys as USB adapters (CH343 ids) and
one pty as a non-USB serial port that must never be written to.

Failed before: `bench.port=auto` was taken as a path ("could not open the servo bus on auto"), and a port
held by another process was read anyway (its packets would collide with a running session's)."""

from __future__ import annotations

import os
import subprocess
import sys
import tty
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.commission.test_bench_check_bus import HOME, check, no_torque_or_goal_written
from tests.support.feetech_bus import EmulatedBus

INST_PING = 0x01
REPO = Path(__file__).resolve().parents[2]


def usb(device: str, vid: int | None = 0x1A86) -> SimpleNamespace:
    return SimpleNamespace(device=device, vid=vid, pid=0x55D3 if vid else None)


@pytest.fixture
def arm():
    with EmulatedBus(initial_deg=HOME) as bus:
        yield bus


@pytest.fixture
def console_pty():
    """A serial port that is not a USB adapter (think /dev/ttyS0): its other end records what it is sent."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    yield os.ttyname(slave), master
    os.close(master)
    os.close(slave)


def enumerate_as(monkeypatch, ports: list[SimpleNamespace]) -> None:
    from serial.tools import list_ports

    monkeypatch.setattr(list_ports, "comports", lambda *a, **k: list(ports))


def received(master: int) -> bytes:
    try:
        return os.read(master, 4096)
    except (BlockingIOError, OSError):
        return b""


def test_auto_finds_the_arm_on_the_usb_port_where_all_six_motors_answer(arm, calib, tmp_path, capsys,
                                                                        monkeypatch, console_pty):
    console, console_master = console_pty
    with EmulatedBus(initial_deg=HOME, motors={"shoulder_pan": 1, "shoulder_lift": 2}) as other:
        enumerate_as(monkeypatch, [usb(other.port), usb(arm.port), usb(console, vid=None)])
        code, text, report = check(arm, calib, tmp_path / "check", capsys, "bench.port=auto")
        assert other.instruction_counts.get(INST_PING, 0) >= 1   # probed, and passed over: 2 of 6 ids
        assert other.register_writes("Torque_Enable") == [] and other.goal_writes() == []
    assert code == 0, text
    assert report["parts"]["bus"]["port"] == arm.port and report["parts"]["bus"]["found_port"] == arm.port
    found = [i for i in report["items"] if i["part"] == "bus" and i["name"] == "port"]
    assert found and f"write `port: {arm.port}`" in found[0]["message"]
    assert received(console_master) == b"", "a non-USB serial port was written to"
    no_torque_or_goal_written(arm)


def test_auto_with_no_arm_answering_fails_naming_every_port_tried(calib, tmp_path, capsys, monkeypatch, console_pty):
    console, _ = console_pty
    with EmulatedBus(initial_deg=HOME, motors={"gripper": 6}) as other:
        enumerate_as(monkeypatch, [usb(other.port), usb(console, vid=None)])
        code, text, _ = check(other, calib, tmp_path / "check", capsys, "bench.port=auto")
    assert code != 0
    fail = [line for line in text.splitlines() if line.startswith("FAIL bus")]
    assert fail and "no SO-101 answered on any USB serial port" in fail[0], text
    assert f"{other.port}: 1 of 6 SO-101 motor ids answered" in fail[0] and console not in fail[0]


def test_a_port_another_process_holds_is_neither_read_nor_probed(arm, calib, tmp_path, capsys, monkeypatch):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'rb', buffering=0); "
                               "print('open', flush=True); time.sleep(120)", arm.port],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        before = dict(arm.instruction_counts)
        code, text, _ = check(arm, calib, tmp_path / "check", capsys)
        assert code != 0
        assert f"serial port {arm.port} is open in another process: pid {holder.pid}" in text, text
        enumerate_as(monkeypatch, [usb(arm.port)])
        code, text, _ = check(arm, calib, tmp_path / "check2", capsys, "bench.port=auto")
        assert code != 0 and f"{arm.port}: in use, not probed" in text, text
        assert arm.instruction_counts == before, "the bus of a port in use was written to"
    finally:
        holder.kill()
        holder.wait()
    no_torque_or_goal_written(arm)


def test_a_run_never_drives_an_auto_port(calib):
    """A session drives only the port written down: `auto` is refused before anything opens."""
    from spabench.bench.config import BenchConfig
    from spabench.bench.errors import BenchFault

    data = yaml.safe_load((REPO / "conf/bench/so101_emulated.yaml").read_text())
    bench = BenchConfig.from_mapping({**data, "port": "auto", "calibration_dir": str(calib)}).make_bench()
    with pytest.raises(BenchFault, match="bench.port is auto: a session drives only the port written down"):
        bench.connect()
