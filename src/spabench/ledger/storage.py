"""The ledger's storage interface: one SQL dialect, two back ends (SQLite file, PostgreSQL schema).

The Ledger writes every statement once, with `?` placeholders and plain SQL both engines accept; a
back end supplies connections, transactions, a few dialect words (DDL types, the lease clock, row
locks that skip what other benches hold) and its own integrity/locking hooks. SQLite serialises
writers (`BEGIN IMMEDIATE`) and so runs one bench per campaign; PostgreSQL takes row locks and runs
several.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spabench.errors import DataError

Row = dict[str, Any]
LEDGER_RESERVE_BYTES = 1 << 20   # room for the WAL frames of a few last writes


class Tx:
    """The statements of one transaction (or of one read): rows come back as dicts."""

    def __init__(self, storage: Storage, cursor: Any):
        self._storage = storage
        self._cur = cursor

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self._cur.execute(self._storage.sql(sql), tuple(params))
        if self._cur.description is None:
            return []
        return [self._storage.row(self._cur, r) for r in self._cur.fetchall()]

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.execute(sql, params)
        return rows[0] if rows else None

    def one_row(self, sql: str, params: Sequence[Any] = ()) -> Row:
        """The row of a query that always returns one (an aggregate, RETURNING, a foreign key's row)."""
        row = self.one(sql, params)
        if row is None:
            raise LookupError(f"no row for {sql!r} {tuple(params)!r}")
        return row

    def many(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        self._cur.executemany(self._storage.sql(sql), [tuple(p) for p in seq])

    def insert_id(self, sql: str, params: Sequence[Any], id_column: str) -> int:
        """Run an INSERT and return the new row's generated id."""
        return int(self.one_row(f"{sql} RETURNING {id_column}", params)[id_column])


class Storage(ABC):
    """One open ledger database. Thread-safe: every use holds the storage's lock."""

    kind: str = ""
    multi_bench: bool = False          # several benches may write at once (row locks and leases)
    skip_locked: str = ""              # appended to a claim query: lock the row, skip rows others hold
    for_update: str = ""               # appended to a read that the transaction goes on to change
    ddl_words: dict[str, str] = {}

    def __init__(self, location: str, readonly: bool):
        self.location = location
        self.readonly = readonly
        self._lock = threading.RLock()

    def __str__(self) -> str:
        return self.location

    # ---- dialect
    def sql(self, text: str) -> str:
        return text

    @staticmethod
    def row(cursor: Any, values: Any) -> Row:
        return {d[0]: v for d, v in zip(cursor.description, values, strict=True)}

    @abstractmethod
    def now_epoch(self) -> str:
        """An SQL expression for the ledger's clock in epoch seconds (all benches share it)."""

    def ddl(self, text: str) -> str:
        return text.format(**self.ddl_words)

    # ---- transactions
    @abstractmethod
    def _begin(self) -> Any: ...

    @abstractmethod
    def _commit(self, cursor: Any) -> None: ...

    @abstractmethod
    def _rollback(self, cursor: Any) -> None: ...

    @abstractmethod
    def _cursor(self) -> Any: ...

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction: all of it or none of it."""
        with self._lock:
            cur = self._begin()
            try:
                yield Tx(self, cur)
            except BaseException:
                self._rollback(cur)
                raise
            self._commit(cur)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self._lock:
            return Tx(self, self._cursor()).execute(sql, params)

    @abstractmethod
    def create_schema(self, ddl: str) -> None:
        """Create the tables in an empty database (SQLite file / PostgreSQL schema)."""

    def columns(self, table: str) -> list[str]:
        """The columns of `table`, in order."""
        return [r["name"] for r in self.query(self.columns_sql, (table,))]

    columns_sql = "SELECT name FROM pragma_table_info(?) ORDER BY cid"

    def add_column(self, table: str, column: str, sql_type: str) -> None:
        """Add a column a later release of the schema has (its rows read NULL)."""
        with self.write() as tx:
            tx.execute(f'ALTER TABLE {table} ADD COLUMN "{column}" {self.ddl(sql_type)}')

    @abstractmethod
    def close(self) -> None: ...

    def reset_sequences(self) -> None:  # noqa: B027 - a no-op by default, not abstract: SQLite needs nothing
        """After rows were copied in with their ids: the next generated id follows the largest (SQLite's
        INTEGER PRIMARY KEY does so by itself; PostgreSQL resets its sequences)."""

    def try_bench_lock(self, bench_id: str) -> bool:
        """Hold 'one live process per bench id' for the life of this connection (PostgreSQL)."""
        return True

    def release_reserve(self) -> bool:
        """Give back the space kept for closing attempts on a full disk; True when there was some."""
        return False

    # ---- connection loss (a shared ledger's server restarted or stopped)
    def connection_lost(self, exc: BaseException) -> bool:
        """`exc` means the connection broke (the operation may be run again on a new one)."""
        return False

    def reconnect(self, deadline: float) -> None:
        """Replace a broken connection, trying until `deadline` (time.monotonic()); raises the last
        connection error when it passes."""
        raise RuntimeError(f"{self.kind} storage does not reconnect")

    def server_start_epoch(self) -> str:
        """An SQL expression for when the database server last started (epoch seconds): no lease
        lapses sooner than a full lease after it, so a server restart never hands a set over."""
        return "0"


class SQLiteStorage(Storage):
    """One campaign = one SQLite file in WAL mode; one writer process, any number of readers.

    A writer keeps a small reserve file beside the database (`<ledger>.reserve`): when the disk fills
    during a rollout, giving it back lets the session still record the attempt as invalid instead
    of leaving it 'running' until the next run."""

    kind = "sqlite"
    ddl_words = {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL"}

    def __init__(self, path: Path, readonly: bool = False, create: bool = False):
        super().__init__(str(path), readonly)
        self.path = Path(path)
        if readonly:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30.0)
        else:
            conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
        if not readonly:
            conn.execute("PRAGMA synchronous = FULL")   # a committed attempt survives a power cut
        self.conn = conn
        self.reserve = self.path.with_name(self.path.name + ".reserve")
        if not readonly:
            self._keep_reserve()

    def _keep_reserve(self) -> None:
        """Best effort: a disk already full gets no reserve (the free-space check refuses attempts)."""
        if self.reserve.exists() and self.reserve.stat().st_size >= LEDGER_RESERVE_BYTES:
            return
        try:
            with open(self.reserve, "wb") as fh:
                fh.write(b"\0" * LEDGER_RESERVE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:
            self.reserve.unlink(missing_ok=True)

    def release_reserve(self) -> bool:
        try:
            self.reserve.unlink()
        except FileNotFoundError:
            return False
        return True

    def now_epoch(self) -> str:
        return "((julianday('now') - 2440587.5) * 86400.0)"

    def _cursor(self):
        return self.conn.cursor()

    def _begin(self):
        cur = self.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")    # the write lock up front: no upgrade deadlock
        return cur

    def _commit(self, cur) -> None:
        cur.execute("COMMIT")

    def _rollback(self, cur) -> None:
        cur.execute("ROLLBACK")

    def create_schema(self, ddl: str) -> None:
        mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise DataError(self.path, f"SQLite refused WAL mode (got {mode}); put the campaign on a "
                            "local file system")
        self.conn.executescript(self.ddl(ddl))

    def journal_mode(self) -> str:
        with self._lock:
            return self.conn.execute("PRAGMA journal_mode").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self.conn.close()
