"""What to tell the operator after a write failed, from its real cause.

A failed recording or ledger write is not always a full disk: a flooded console once left the
process without file descriptors, and "Free space or fix the disk" sent the operator to a disk with
gigabytes free. The error numbers a failure names decide; where it names none (SQLite's "unable to
open database file"), the process is asked at once whether it can still open a file.
"""

from __future__ import annotations

import errno
import os
import re
import resource  # imported up front: with no descriptor left, an import cannot open its file
import shutil
from pathlib import Path

__all__ = ["storage_advice", "RESERVE_BYTES"]

RESERVE_BYTES = 32 * 1024 * 1024   # kept free for the ledger and the encoder's buffers
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def _errnos(problem: str) -> set[int]:
    """Error numbers a failure's text names ("[Errno 24]", HDF5's "errno = 24") or implies."""
    found = {int(n) for n in re.findall(r"(?:\[Errno |errno = )(\d+)", problem)}
    for number in (*_NO_SPACE, *_NO_DESCRIPTORS):
        if os.strerror(number).lower() in problem.lower():
            found.add(number)
    return found


def _out_of_descriptors() -> bool:
    """Whether this process cannot open one more file right now (EMFILE / ENFILE)."""
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError as exc:
        return exc.errno in _NO_DESCRIPTORS
    os.close(fd)
    return False


def storage_advice(folder: Path, problem: str) -> str:
    """What to do after a write failed, from its real cause: a full disk, too many open files (the
    process's descriptor limit, not the disk), or a disk that is not full (check it)."""
    numbers = _errnos(problem)
    if numbers & set(_NO_DESCRIPTORS) or (not numbers and _out_of_descriptors()):
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
