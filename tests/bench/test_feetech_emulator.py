"""The emulated Feetech bus speaks protocol 0 correctly (checked with raw packets over pyserial)."""

from __future__ import annotations

import time

import pytest
import serial

from tests.support.feetech_bus import (
    INST_PING,
    INST_READ,
    INST_SYNC_READ,
    INST_SYNC_WRITE,
    INST_WRITE,
    REG,
    EmulatedBus,
    checksum,
    encode_sign_magnitude,
    instruction_packet,
)


def transact(port: serial.Serial, packet: bytes, expect: int, timeout: float = 10.0) -> bytes:
    """Write a packet and read `expect` bytes; the timeout only bounds a hang (a test that expects
    silence gives its own short one; measured before: 0.5 s, which a loaded machine can exceed)."""
    port.write(packet)
    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < expect and time.monotonic() < deadline:
        out += port.read(expect - len(out))
    return out


def eventually(read, expected, timeout: float = 10.0):
    """`read()` once it equals `expected` (a silent write has no reply to wait for: the emulator
    applies it when it gets to it); the last value read when the deadline, a hang bound, passed."""
    deadline = time.monotonic() + timeout
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.01)
        value = read()
    return value


@pytest.fixture(params=["process", "thread"])
def link(request):
    with (
        EmulatedBus(initial_deg={"elbow_flex": 10.0}, mode=request.param) as bus,
        serial.Serial(bus.port, 1_000_000, timeout=0.05) as port,
    ):
        yield bus, port


def test_checksum_matches_protocol():
    # FF FF 01 02 01 chk: ping id 1
    assert instruction_packet(1, INST_PING) == bytes([0xFF, 0xFF, 0x01, 0x02, 0x01, 0xFB])
    assert checksum(bytes([1, 4, 2, 56, 2])) == (~(1 + 4 + 2 + 56 + 2)) & 0xFF


def test_ping_and_read_model_number(link):
    bus, port = link
    reply = transact(port, instruction_packet(3, INST_PING), 6)
    assert reply == bytes([0xFF, 0xFF, 3, 2, 0, (~(3 + 2)) & 0xFF])
    reply = transact(port, instruction_packet(3, INST_READ, bytes([3, 2])), 8)
    assert int.from_bytes(reply[5:7], "little") == 777
    assert transact(port, instruction_packet(9, INST_PING), 6, timeout=0.1) == b""  # no such id


def test_corrupt_packet_is_ignored(link):
    bus, port = link
    bad = bytearray(instruction_packet(1, INST_PING))
    bad[-1] ^= 0xFF
    assert transact(port, bytes(bad), 6, timeout=0.1) == b""
    assert len(transact(port, instruction_packet(1, INST_PING), 6)) == 6  # the stream recovers


def test_homing_offset_sign_magnitude_and_present_position(link):
    bus, port = link
    addr, size = REG["Homing_Offset"]
    reply = transact(port, instruction_packet(1, INST_READ, bytes([addr, size])), 8)
    assert int.from_bytes(reply[5:7], "little") == encode_sign_magnitude(-1150, 11) == (1 << 11) | 1150
    reply = transact(port, instruction_packet(3, INST_READ, bytes([REG["Present_Position"][0], 2])), 8)
    assert int.from_bytes(reply[5:7], "little") == bus.deg_to_ticks("elbow_flex", 10.0)


def test_sync_read_skips_missing_ids_and_sync_write_is_silent(link):
    bus, port = link
    bus.remove_motor(2)
    addr = REG["Present_Position"][0]
    reply = transact(port, instruction_packet(0xFE, INST_SYNC_READ, bytes([addr, 2, 1, 2, 3])), 16)
    assert [reply[2], reply[10]] == [1, 3] and len(reply) == 16
    goal = bus.deg_to_ticks("shoulder_pan", 12.0)
    params = bytes([REG["Goal_Position"][0], 2, 1]) + goal.to_bytes(2, "little")
    assert transact(port, instruction_packet(0xFE, INST_SYNC_WRITE, params), 1, timeout=0.1) == b""
    assert eventually(lambda: bus.goal_ticks(1), goal) == goal
    assert bus.present_ticks(1) != goal  # torque is off: the shaft does not move
    transact(port, instruction_packet(1, INST_WRITE, bytes([REG["Torque_Enable"][0], 1])), 6)
    params = bytes([REG["Goal_Position"][0], 2, 1]) + goal.to_bytes(2, "little")
    transact(port, instruction_packet(0xFE, INST_SYNC_WRITE, params), 0, timeout=0.01)
    assert eventually(lambda: bus.present_ticks(1), goal) == goal


def test_goal_is_clipped_to_position_limits_and_motion_is_rate_limited():
    with (
        EmulatedBus(rate_ticks_per_s=1000.0) as bus,
        serial.Serial(bus.port, 1_000_000, timeout=0.05) as port,
    ):
        transact(port, instruction_packet(1, INST_WRITE, bytes([REG["Torque_Enable"][0], 1])), 6)
        start = bus.present_ticks(1)
        beyond = 4000  # above Max_Position_Limit 3322
        transact(port, instruction_packet(1, INST_WRITE, bytes([REG["Goal_Position"][0]])
                                          + beyond.to_bytes(2, "little")), 6)
        mid = bus.present_ticks(1)
        assert start <= mid < 3322  # moving, not teleported (about 1.3 s of travel at 1000 ticks/s)
        # it arrives at the limit and stays there, never beyond it (a deadline only bounds a hang;
        # measured before: one sleep of the expected travel + 0.2 s, which a loaded machine can outlast)
        seen, deadline = [mid], time.monotonic() + 30
        while seen[-1] != 3322 and time.monotonic() < deadline:
            time.sleep(0.02)
            seen.append(bus.present_ticks(1))
        assert seen[-1] == 3322 and max(seen) == 3322, seen[-5:]  # the limit, not the requested 4000


def test_silent_bus_swallows_everything(link):
    bus, port = link
    bus.go_silent()
    assert transact(port, instruction_packet(1, INST_PING), 6, timeout=0.1) == b""
    bus.resume()
    assert len(transact(port, instruction_packet(1, INST_PING), 6)) == 6


def _write(port: serial.Serial, motor_id: int, reg: str, value: int) -> bytes:
    addr, size = REG[reg]
    return transact(port, instruction_packet(motor_id, INST_WRITE, bytes([addr]) + value.to_bytes(size, "little")), 6)


def _read(port: serial.Serial, motor_id: int, reg: str) -> int:
    addr, size = REG[reg]
    reply = transact(port, instruction_packet(motor_id, INST_READ, bytes([addr, size])), 6 + size)
    return int.from_bytes(reply[5:5 + size], "little")


def test_an_ignored_write_is_acknowledged_logged_and_leaves_the_value(link):
    bus, port = link
    bus.ignore_writes(6, "Max_Torque_Limit")
    reply = _write(port, 6, "Max_Torque_Limit", 300)
    assert reply[4] == 0 and len(reply) == 6                      # a plain acknowledgement, no error bit
    assert _read(port, 6, "Max_Torque_Limit") == 1000             # the value it had
    assert [v for _, i, v in bus.register_writes("Max_Torque_Limit") if i == 6] == [300]
    _write(port, 5, "Max_Torque_Limit", 300)                       # the other servos take it
    assert _read(port, 5, "Max_Torque_Limit") == 300


def test_a_grasped_object_blocks_the_gripper_until_it_opened_and_the_arm_moved_away(link):
    bus, port = link
    for motor_id in (1, 6):
        _write(port, motor_id, "Torque_Enable", 1)
    start = bus.present_ticks("gripper")
    bus.grasp("gripper", release=8.0, away_deg=5.0)
    close, open_ = bus.deg_to_ticks("gripper", 0.0), bus.deg_to_ticks("gripper", 60.0)
    _write(port, 6, "Goal_Position", close)
    assert bus.present_ticks("gripper") == start and bus.grasped()   # pressing the object
    _write(port, 6, "Goal_Position", open_)                           # opened, but the arm did not move
    _write(port, 6, "Goal_Position", close)
    assert bus.present_ticks("gripper") == start and bus.grasped()   # gripped again
    _write(port, 6, "Goal_Position", open_)
    pan = bus.present_ticks("shoulder_pan")
    _write(port, 1, "Goal_Position", pan + 100)                        # the arm leaves the object behind
    assert not bus.grasped()
    _write(port, 6, "Goal_Position", close)
    assert bus.present_ticks("gripper") == close
