"""A ledger that cannot be trusted or written is one clear error, never a traceback.

`check_sqlite` runs `PRAGMA quick_check` when a ledger is opened (milliseconds for a campaign's
ledger): a damaged file is refused before anything connects. `storage_errors` turns a failed write
(disk full, I/O error, file system gone) into `LedgerStorageError`, which the run loop treats as
"stop the session, the arm holds".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spabench.errors import SpabenchError
from spabench.storage_advice import storage_advice


class LedgerDamaged(SpabenchError):
    """The ledger file fails its integrity check: nothing reads from or writes to it."""

    def __init__(self, path, problem: str):
        super().__init__(
            f"{path}: the ledger is damaged ({problem}); nothing was read from it or written to it. "
            "Restore it from a backup (or the copy made by `spabench ledger copy`), or check it with "
            f"`sqlite3 {path} 'PRAGMA integrity_check'`")
        self.path = path


class LedgerStorageError(SpabenchError):
    """A ledger write failed (disk full, no file descriptor left, I/O error): the change was not
    recorded; the message says which, as storage_advice finds it."""

    def __init__(self, path, problem: str, *, database: bool = False, opening: bool = False):
        if database:
            fix = "Check the database server (its disk, its log), then resume with the same command"
        else:
            fix = storage_advice(Path(path).parent, problem)
        what = ("cannot open the ledger ({}); nothing was changed" if opening
                else "cannot write the ledger ({}); the change was not recorded").format(problem)
        super().__init__(f"{path}: {what}. {fix}")
        self.path = path


class LedgerUnavailable(LedgerStorageError):
    """The connection to a shared ledger's database was lost and did not come back within the
    reconnect time: the change was not recorded (the database is the cause, never the disk)."""

    def __init__(self, location: str, problem: str, waited_s: float):
        SpabenchError.__init__(
            self, f"{location}: lost the connection to the ledger's database and could not reconnect within "
            f"{waited_s:g} s (last error: {problem}); the change was not recorded. Check that the database "
            "server is running and reachable, then resume with the same command (reconnect_s=SECONDS sets "
            "how long a bench keeps trying)")
        self.path = location


class ConnectionLost(Exception):
    """Internal: a shared ledger's connection broke inside an operation; the Ledger reconnects and
    runs the whole operation again (never shown to the operator)."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


_DAMAGE_WORDS = ("malformed", "not a database", "corrupt", "encrypted")


def check_sqlite(conn: sqlite3.Connection, path: Path | str) -> None:
    """Raise LedgerDamaged unless `PRAGMA quick_check` says ok."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        raise LedgerDamaged(path, str(exc).splitlines()[0]) from None
    problems = [str(r[0]) for r in rows if str(r[0]).lower() != "ok"]
    if problems:
        more = f" and {len(problems) - 1} more problem(s)" if len(problems) > 1 else ""
        raise LedgerDamaged(path, f"quick_check: {problems[0][:160]}{more}")


def _is_storage_failure(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, sqlite3.Error):
        return not isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError))
    module = type(exc).__module__ or ""
    return module.startswith("psycopg") and type(exc).__name__ in (
        "OperationalError", "DiskFull", "InternalError", "AdminShutdown", "ConnectionFailure")


@contextmanager
def storage_errors(path: Path | str, storage: Any = None) -> Iterator[None]:
    """Translate a storage failure inside the block into LedgerStorageError / LedgerDamaged, or, when
    `storage` says its connection broke (a shared ledger's server restarted), ConnectionLost."""
    try:
        yield
    except SpabenchError:
        raise
    except BaseException as exc:
        problem = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200] or type(exc).__name__
        if storage is not None and storage.connection_lost(exc):
            raise ConnectionLost(problem) from None
        if not _is_storage_failure(exc):
            raise
        if isinstance(exc, sqlite3.DatabaseError) and any(w in problem.lower() for w in _DAMAGE_WORDS):
            raise LedgerDamaged(path, problem) from None
        raise LedgerStorageError(path, problem, database=bool(storage is not None and storage.multi_bench)) from None
