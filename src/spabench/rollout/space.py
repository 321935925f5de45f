"""Refuse to start an attempt that cannot be recorded: free space against the expected episode size.

The estimate is the larger of (a) the campaign's own recorded episodes, bytes per second of rollout
scaled to this trial's timer, and (b) a conservative first guess from the camera frame sizes (an
H.264 'ultrafast' stream of a tabletop scene is far below 1/20 of the raw frames; the HDF5 row of a
step is under 2 KiB). Twice that, plus a fixed reserve for the ledger and the encoder's buffers,
must be free on the campaign's file system.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from spabench.errors import SpabenchError
from spabench.storage_advice import RESERVE_BYTES

__all__ = ["NoSpaceForAttempt", "check_free_space", "expected_episode_bytes", "measured_bytes_per_s"]

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
