"""Refuse to start an attempt that cannot be recorded: free space against the expected episode size.

The estimate is the larger of (a) the campaign's own recorded episodes, bytes per second of rollout
scaled to this trial's timer, and (b) a conservative first guess from the camera frame sizes (an
H.264 'ultrafast' stream of a tabletop scene is far below 1/20 of the raw frames; the HDF5 row of a
step is under 2 KiB). Twice that, plus a fixed reserve for the ledger and the encoder's buffers,
must be free on the campaign's file system.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

from spabench.errors import SpabenchError

RESERVE_BYTES = 32 * 1024 * 1024
SAFETY_FACTOR = 2.0
H5_BYTES_PER_STEP = 2048
VIDEO_FRACTION_OF_RAW = 1 / 20
_SAMPLE = 5  # recent finished episodes measured


class NoSpaceForAttempt(SpabenchError):
    """Too little free space to record the next attempt: it is not started."""


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measured_bytes_per_s(episodes_dir: Path) -> float | None:
    """Bytes per second of recorded rollout in the most recent finished episodes, if any."""
    import h5py

    rates = []
    folders = [p for p in episodes_dir.iterdir() if p.is_dir() and not p.name.endswith(".partial")] \
        if episodes_dir.is_dir() else []
    for folder in sorted(folders, key=lambda p: p.stat().st_mtime)[-_SAMPLE:]:
        try:
            with h5py.File(folder / "episode.h5", "r") as f:
                duration = float(f.attrs.get("duration_s", 0.0))
        except (OSError, ValueError, KeyError):
            continue
        if duration > 0.5:
            rates.append(_folder_bytes(folder) / duration)
    return max(rates) if rates else None


def expected_episode_bytes(timer_s: float, control_hz: float, camera_shapes: dict[str, tuple],
                           episodes_dir: Path | None = None, video: bool = True) -> int:
    steps = float(timer_s) * float(control_hz)
    raw_per_step = sum(int(w) * int(h) * 3 for h, w, *_ in camera_shapes.values()) if video else 0
    guess = steps * (H5_BYTES_PER_STEP + raw_per_step * VIDEO_FRACTION_OF_RAW)
    measured = measured_bytes_per_s(episodes_dir) if episodes_dir is not None else None
    if measured is not None:
        guess = max(guess, measured * float(timer_s))
    return int(guess)


def check_free_space(folder: Path, expected_bytes: int, what: str) -> int:
    """Raise NoSpaceForAttempt unless SAFETY_FACTOR x expected + RESERVE_BYTES are free; returns free bytes."""
    free = shutil.disk_usage(folder).free
    need = int(SAFETY_FACTOR * expected_bytes + RESERVE_BYTES)
    if free < need:
        raise NoSpaceForAttempt(
            f"{folder}: {free / 2**20:.0f} MiB free, {what} needs about {need / 2**20:.0f} MiB "
            f"(an episode of about {expected_bytes / 2**20:.0f} MiB, twice over, plus "
            f"{RESERVE_BYTES // 2**20} MiB for the ledger); the attempt was not started. Free space "
            "(or move the campaign to a larger disk), then resume with the same command")
    return free


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def _errnos(problem: str) -> set[int]:
    """Error numbers a failure's text names ("[Errno 24]", HDF5's "errno = 24") or implies."""
    found = {int(n) for n in re.findall(r"(?:\[Errno |errno = )(\d+)", problem)}
    for number in (*_NO_SPACE, *_NO_DESCRIPTORS):
        if os.strerror(number).lower() in problem.lower():
            found.add(number)
    return found


def storage_advice(folder: Path, problem: str) -> str:
    """What to do after a write failed, from its real cause: a full disk, too many open files (the
    process's descriptor limit, not the disk), or a disk that is not full (check it)."""
    numbers = _errnos(problem)
    if numbers & set(_NO_DESCRIPTORS):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return (f"The process had too many open files (its limit is {soft}); the disk is not the cause. Find what "
                "held them (e.g. a flooded console: operator.console.max_connections) or raise the limit (ulimit -n), "
                "then resume with the same command")
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        free = None
    if numbers & set(_NO_SPACE) or (free is not None and free < RESERVE_BYTES):
        return "Free space (or move the campaign to a larger disk), then resume with the same command"
    where = f" ({free / 2**20:.0f} MiB free: it is not full)" if free is not None else ""
    return f"Check the disk{where} and the error above, then resume with the same command"
