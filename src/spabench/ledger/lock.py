"""One process per campaign: an exclusive OS lock taken before a session touches anything.

SQLite ledgers: `fcntl.flock` on `<campaign>/ledger.lock` (the OS drops it when the holder exits,
even by kill -9, so a stale lock never needs clearing by hand). The file holds the holder's host,
pid and start time, for the refusal message only; the lock itself is the kernel's. PostgreSQL
ledgers give the same guarantee per bench id through `Storage.try_bench_lock` (an advisory lock
held by the session's connection); `Ledger.lock_session` picks the right one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from spabench.errors import SpabenchError

LOCK_FILENAME = "ledger.lock"


class LedgerLocked(SpabenchError):
    """Another live process holds the campaign (or, on PostgreSQL, the bench id)."""

    def __init__(self, what: str, holder: dict | None):
        h = holder or {}
        who = (f"host {h.get('host', '?')}, pid {h.get('pid', '?')}, since {h.get('since', '?')}"
               if h else "holder unknown")
        super().__init__(f"{what} is in use by another spabench session ({who}); one session per "
                         "campaign at a time: wait for it to end (or stop it), then run the command again")
        self.holder = h


def holder_record(**extra) -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"), **extra}


class CampaignLock:
    """Exclusive lock on a campaign folder for the life of one session (a context manager)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILENAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> dict | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def acquire(self, **extra) -> CampaignLock:
        if self._fd is not None:
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise SpabenchError(f"{self.path}: cannot open the campaign lock ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerLocked(f"campaign {self.folder}", self.holder()) from None
        except OSError as exc:
            os.close(fd)
            raise SpabenchError(f"{self.path}: cannot lock the campaign ({exc.strerror or exc})") from None
        self._fd = fd
        try:  # who holds it, for the next process's message (best effort: a full disk must not stop us)
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder_record(**extra)) + "\n").encode(), 0)
        except OSError:
            pass
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> CampaignLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
