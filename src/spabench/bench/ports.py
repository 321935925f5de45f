"""Where the arm is plugged in: the serial port found without a question, and who else has it open.

`lerobot-find-port` asks the operator to unplug the board and compares the list of /dev/tty* before and
after. `spabench bench check` with `bench.port: auto` cannot ask, and must not write to every tty on the
machine (consoles, a GPS, another lab's arm): it takes the serial ports pyserial enumerates with a USB
vendor id (the enumeration LeRobot's `find_available_ports` uses on Windows; on Linux it globs /dev/tty*,
which includes the consoles), leaves out any port another process holds open, and sends each one only
PING, the read-only instruction LeRobot's handshake sends. The port on which all six SO-101 motor ids
answer is the arm's; none or several is a clear error that names what was tried.

A port another process holds open is never probed and never read by `bench check`: a session (or
`lerobot-teleoperate`, or ModemManager) on the same bus would see its packets collide with ours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.bench.bench import DRIVER_ERRORS
from spabench.suite.vocabulary import JOINTS

if TYPE_CHECKING:
    from spabench.bench.so101 import SO101Bench

logger = logging.getLogger(__name__)

AUTO = "auto"   # the bench file's `port:` value that asks `bench check` to find the arm


def port_holders(port: str) -> list[tuple[int, str]]:
    """(pid, command) of every other process with `port` open, read from /proc (empty where there is none).

    Compares device numbers, so a symlink (/dev/serial/by-id/...) and its target count as the same port."""
    try:
        st = os.stat(port)
    except OSError:
        return []
    if not stat.S_ISCHR(st.st_mode) or not Path("/proc/self/fd").is_dir():
        return []
    holders: list[tuple[int, str]] = []
    me = os.getpid()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == me:
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:   # gone, or another user's process we may not read
            continue
        for fd in fds:
            try:
                target = os.stat(fd)
            except OSError:
                continue
            if stat.S_ISCHR(target.st_mode) and target.st_rdev == st.st_rdev:
                holders.append((int(proc.name), _command(proc)))
                break
    return holders


def _command(proc: Path) -> str:
    with contextlib.suppress(OSError):
        words = (proc / "cmdline").read_bytes().split(b"\0")
        return " ".join(w.decode(errors="replace") for w in words if w)[:120]
    return "?"


def in_use_error(port: str) -> str:
    """The refusal for a port another process holds open, or "" when nobody else has it."""
    holders = port_holders(port)
    if not holders:
        return ""
    who = "; ".join(f"pid {pid} ({cmd})" for pid, cmd in holders)
    return (f"serial port {port} is open in another process: {who}. A session or another tool may be driving "
            "the arm; bench check reads the bus only when nothing else uses it (stop that process first)")


def usb_serial_ports() -> list[str]:
    """The serial ports with a USB vendor id, sorted: the adapters an SO-101 controller board shows up as."""
    from serial.tools import list_ports  # type: ignore[import-untyped]

    return sorted({p.device for p in list_ports.comports() if p.vid is not None})


def release_bus(bus: Any, port: str) -> None:
    """Close a bus opened for reading without LeRobot's Torque_Enable=0 writes (an arm held by its
    servos would drop); the port is released even when the close fails."""
    try:
        bus.disconnect(disable_torque=False)
    except Exception:  # noqa: BLE001 - what was read is what matters; release the port anyway
        logger.debug("closing %s failed", port, exc_info=True)
        with contextlib.suppress(Exception):
            bus.port_handler.closePort()


def _answers_as_so101(bench: SO101Bench) -> list[int]:
    """The SO-101 motor ids that answer PING on the bench's port (the port is closed again, nothing written)."""
    bus = bench.robot.bus
    bus.connect(handshake=False)
    try:
        return [bus.motors[j].id for j in JOINTS if bus.ping(j) is not None]
    finally:
        release_bus(bus, bench.cfg.port)


def find_arm_port(bench: SO101Bench, say: Callable[[str], None] = lambda _: None) -> tuple[str, str]:
    """(port, "") for the one USB serial port where all six motors answer, else ("", why not)."""
    from spabench.bench.so101 import SO101Bench

    tried: list[str] = []
    found: list[str] = []
    for port in usb_serial_ports():
        busy = in_use_error(port)
        if busy:
            tried.append(f"{port}: in use, not probed")
            continue
        say(f"bench check: looking for the arm on {port} ...")
        probe = SO101Bench(dataclasses.replace(bench.cfg, port=port))
        try:
            ids = _answers_as_so101(probe)
        except DRIVER_ERRORS as exc:
            tried.append(f"{port}: could not open ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
            continue
        if len(ids) == len(JOINTS):
            found.append(port)
        tried.append(f"{port}: {len(ids)} of {len(JOINTS)} SO-101 motor ids answered")
    if len(found) == 1:
        return found[0], ""
    listing = "; ".join(tried) or "no USB serial port is present"
    if found:
        return "", (f"bench.port is auto and an SO-101 answers on {len(found)} ports ({', '.join(found)}): set "
                    "bench.port to this bench's arm (`lerobot-find-port` tells them apart by unplugging one)")
    return "", (f"bench.port is auto and no SO-101 answered on any USB serial port ({listing}): check the "
                "arm's power and USB cable, or set bench.port (`lerobot-find-port` finds it)")
