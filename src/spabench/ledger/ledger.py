"""A campaign's durable state: the plan, attempts, scores with history, claims, events.

Every state change is one transaction, so a crash, a dead server or Ctrl-C never leaves half a change
behind. The statements are written once over the storage interface (storage.py): a SQLite file (WAL)
for one bench, or a PostgreSQL schema for several benches claiming scene sets under leases. The
ledger holds no episode payloads, only where they are (bench id and path).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError, DataError, SpabenchError
from spabench.ledger.integrity import (
    ConnectionLost,
    LedgerStorageError,
    LedgerUnavailable,
    check_sqlite,
    storage_errors,
)
from spabench.ledger.lock import CampaignLock
from spabench.ledger.schema import (
    DDL,
    FINISH_STATUSES,
    LATER_COLUMNS,
    LATER_INDEXES,
    OPERATOR_INVALIDATED,
    OUTCOME_COLUMNS,
    SCHEMA_VERSION,
    TRIAL_COLUMNS,
    AttemptRow,
    ScoreRow,
    TrialRow,
)
from spabench.ledger.storage import Row, SQLiteStorage, Storage, Tx
from spabench.suite.rules import STOP_REASONS, UNSAFE, failure_mode_applies, unsafe_applies
from spabench.suite.vocabulary import (
    CONDITIONS,
    FAILURE_MODES,
    INSTRUCTION_VARIANTS,
    SCENE_CONDITIONS,
    TASKS,
)

log = logging.getLogger(__name__)

# How long a shared ledger's lost connection is retried before the session stops (`reconnect_s`).
DEFAULT_RECONNECT_S = 180.0


def _reconnecting(method: Callable) -> Callable:
    """Run a ledger operation; when a shared ledger's connection breaks inside it (the server restarted
    or stopped), reconnect with backoff for up to `reconnect_s` and run the whole operation again.

    Every operation is one transaction (or reads only), so running it again after a lost connection
    repeats nothing that was committed; the one ambiguity, a COMMIT sent just before the connection
    broke, is resolved by begin_attempt and finish_attempt themselves (`_retrying`). Only the
    outermost operation of a thread retries."""

    @functools.wraps(method)
    def run(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        tl = self._tl
        if getattr(tl, "active", False):
            return method(self, *args, **kwargs)
        tl.active, tl.retrying = True, False
        since: float | None = None
        try:
            while True:
                try:
                    return method(self, *args, **kwargs)
                except ConnectionLost as exc:
                    since = since if since is not None else time.monotonic()
                    self._reconnect(exc.problem, since)
                    tl.retrying = True
        finally:
            tl.active, tl.retrying = False, False

    return run


class LedgerError(SpabenchError):
    """An operation the campaign's current state does not allow (unknown id, wrong status)."""


class SceneSetTaken(LedgerError):
    """A bench's scene set is now another bench's (its lease lapsed while it was paused or stalled
    and `holder` took the set over): nothing was written."""

    def __init__(self, message: str, *, evaluation_id: str | None, holder: str | None):
        super().__init__(message)
        self.evaluation_id, self.holder = evaluation_id, holder


class ClaimLost(SceneSetTaken):
    """A bench tried to finish an attempt whose scene set another bench has taken over (its lease
    lapsed): nothing was written; `status` is what the attempt is now."""

    def __init__(self, message: str, *, attempt_id: str, status: str, evaluation_id: str | None = None,
                 holder: str | None = None):
        super().__init__(message, evaluation_id=evaluation_id, holder=holder)
        self.attempt_id, self.status = attempt_id, status


class BenchSessionActive(LedgerError):
    """Another live process already works this campaign under the same bench id."""


class ScoreConflict(LedgerError):
    """A score saved against a version of the rater's scores that is no longer the latest (another
    tab, console or session saved first): nothing was written. `current` is the score saved
    meanwhile (None if it was withdrawn), `version` the version to re-score against."""

    def __init__(self, message: str, *, attempt_id: str, rater: str, current: ScoreRow | None, version: int):
        super().__init__(message)
        self.attempt_id, self.rater, self.current, self.version = attempt_id, rater, current, version


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):          # numpy arrays and scalars
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True)


def _grouped(rows: list[Row], key: str, items: str, item: Callable[[Row], Any]) -> list[dict[str, Any]]:
    """Rows grouped by `key` in their order: [{key: value, items: [item(row), ...]}, ...]."""
    out: dict[Any, dict[str, Any]] = {}
    for r in rows:
        out.setdefault(r[key], {key: r[key], items: []})[items].append(item(r))
    return list(out.values())


def _is_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    import numpy as np

    return isinstance(value, np.bool_)


def validate_plan(rows: Iterable[TrialRow | Mapping[str, Any]], source: str = "plan", *,
                  review: bool = False) -> list[TrialRow]:
    """Plan rows as TrialRows, or one DataError naming the row, field and allowed values.

    `review`: a review campaign of imported recordings (`import lerobot` without cells=): its task and
    condition are the recordings' own words, not the suite's vocabulary (checked non-empty only)."""
    out: list[TrialRow] = []
    seen_ids: set[str] = set()
    seen_orders: set[int] = set()
    seen_pairs: set[tuple[str, str]] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, TrialRow):
            missing = [c for c in TRIAL_COLUMNS if c not in row]
            if missing:
                raise DataError(source, f"missing column(s) {', '.join(missing)}", row=i,
                                allowed=TRIAL_COLUMNS)
            try:
                row = TrialRow.from_mapping(row)
            except (TypeError, ValueError) as exc:
                raise DataError(source, str(exc), row=i) from None
        checks: tuple[tuple[str, str, tuple[str, ...]], ...] = (
            ("task", row.task, TASKS),
            ("condition", row.condition, CONDITIONS),
            ("scene_condition", row.scene_condition, SCENE_CONDITIONS),
            ("instruction_variant", row.instruction_variant, INSTRUCTION_VARIANTS),
        )
        if review:
            for name in ("task", "condition", "scene_condition"):
                if not isinstance(getattr(row, name), str) or not getattr(row, name).strip():
                    raise DataError(source, "must be a non-empty string", row=i, field=name)
            checks = checks[3:]
        for name, value, allowed in checks:
            if value not in allowed:
                raise DataError(source, f"unknown value {value!r}", row=i, field=name, allowed=allowed)
        for name in ("trial_id", "evaluation_id", "policy", "card", "alias", "scene_id", "cell"):
            if not isinstance(getattr(row, name), str) or not getattr(row, name):
                raise DataError(source, "must be a non-empty string", row=i, field=name)
        if not row.instruction.strip():
            raise DataError(source, "empty instruction", row=i, field="instruction")
        if not row.timer_s > 0:
            raise DataError(source, f"timer_s must be > 0, got {row.timer_s}", row=i, field="timer_s")
        if row.trial_id in seen_ids:
            raise DataError(source, f"duplicate trial_id {row.trial_id!r}", row=i, field="trial_id")
        if row.order in seen_orders:
            raise DataError(source, f"duplicate order {row.order}", row=i, field="order")
        if (row.evaluation_id, row.policy) in seen_pairs:
            raise DataError(source, f"policy {row.policy!r} planned twice for {row.evaluation_id}",
                            row=i, field="evaluation_id")
        seen_ids.add(row.trial_id)
        seen_orders.add(row.order)
        seen_pairs.add((row.evaluation_id, row.policy))
        out.append(row)
    return out


def _campaign_folder(path: Path) -> tuple[Path, Path | None]:
    """(campaign folder, explicit SQLite file or None) for a folder, a ledger file or a pointer."""
    if path.is_dir():
        return path, None
    if path.name in (Ledger.FILENAME, Ledger.POINTER):
        return path.parent, None
    return path.parent, path


class Ledger:
    """One campaign's ledger. Use `Ledger.create` once (planner), then `Ledger.open`.

    The SQLite ledger is `<campaign>/ledger.sqlite`; a PostgreSQL ledger is one schema in a lab's
    database, and the campaign folder keeps a pointer to it (`ledger.pg.json`: URL without password
    and schema name), so every command that takes a campaign folder works on either.
    """

    FILENAME = "ledger.sqlite"
    POINTER = "ledger.pg.json"

    def __init__(self, path: Path, storage: Storage):
        self.path = path                 # the SQLite file or the pointer file (for messages)
        self.storage = storage
        self._readonly = storage.readonly
        self._session_lock: CampaignLock | None = None   # lock.py: one session per campaign / bench
        self._bench_locked: str | None = None
        # Called inside finish_attempt's transaction between reading the attempt and writing it: tests
        # stall a bench exactly there (None otherwise).
        self.finish_checked: Callable[[str], None] | None = None
        self.reconnect_s = DEFAULT_RECONNECT_S   # a shared ledger: how long a lost connection is retried
        self._tl = threading.local()             # per thread: inside an operation, running it again
        self._columns: list[str] | None = None    # the attempts table's columns (later ones may be missing)

    @property
    def location(self) -> str:
        """Where the ledger lives: a file path, or a PostgreSQL URL (no password) and schema."""
        return self.storage.location

    @property
    def backend(self) -> str:
        return self.storage.kind

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def exists(cls, campaign_dir: str | os.PathLike) -> bool:
        folder = Path(campaign_dir)
        return (folder / cls.FILENAME).is_file() or (folder / cls.POINTER).is_file()

    @classmethod
    def create(cls, path: str | os.PathLike, plan_rows: Iterable[TrialRow | Mapping[str, Any]],
               config_hash: str, meta: Mapping[str, Any] | None = None, *, url: str | None = None,
               grant: str | None = None, review: bool = False) -> Ledger:
        """Write a new ledger holding the plan; refuses to touch an existing one.

        `path` is the campaign's `ledger.sqlite` (or its folder). With `url` (postgresql://...), the
        ledger is a new schema in that database and the folder gets the pointer instead. A SQLite file
        is built as `<path>.partial` and linked into place only when complete, so a failed plan never
        leaves a half-written ledger behind; a PostgreSQL plan is one transaction. `grant` names the
        PostgreSQL role of the lab's benches, given exactly what a bench needs on the new tables.
        """
        path = Path(path)
        if path.is_dir() or path.suffix == "":
            path = path / cls.FILENAME
        folder = path.parent
        if cls.exists(folder) or path.exists():
            raise ConfigError(cls._exists_message(path))
        if not isinstance(config_hash, str) or not config_hash:
            raise ConfigError(f"{path}: config_hash must be a non-empty string")
        rows = validate_plan(plan_rows, source=f"{path} (plan)", review=review)
        if not rows:
            raise DataError(f"{path} (plan)", "the plan holds no trials")
        all_meta = dict(meta or {})
        all_meta.update(schema_version=SCHEMA_VERSION, config_hash=config_hash, created_at=_now(),
                        n_trials=len(rows))
        all_meta.setdefault("campaign", "")
        return cls._build(path, url, all_meta["campaign"], lambda st: cls._fill(st, rows, all_meta, config_hash),
                          grant=grant)

    @classmethod
    def _build(cls, path: Path, url: str | None, campaign: str, fill: Callable[[Storage], None],
               grant: str | None = None) -> Ledger:
        """Make a new ledger at `path` (SQLite) or in a new schema at `url`, filled by `fill`, and put it
        in place only once it is complete (a failure leaves nothing behind)."""
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        if url not in (None, "", "sqlite"):
            from spabench.ledger.postgres import new_campaign_storage, write_pointer

            pg = new_campaign_storage(url, campaign)
            try:
                fill(pg)
                if grant:
                    pg.grant_bench(grant)
                write_pointer(folder / cls.POINTER, pg, campaign)
            except BaseException:
                pg.drop_schema()
                pg.close()
                raise
            pg.close()
            return cls.open(folder)
        if grant:
            raise ConfigError(f"ledger_grant={grant!r} is for a PostgreSQL ledger (set ledger=postgresql://...)")
        tmp = path.with_name(path.name + ".partial")
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)
        storage = SQLiteStorage(tmp)
        try:
            fill(storage)
        except BaseException:
            storage.close()
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)
            raise
        storage.close()
        try:
            os.link(tmp, path)          # atomic and never clobbers a ledger created meanwhile
        except FileExistsError:
            tmp.unlink(missing_ok=True)
            raise ConfigError(cls._exists_message(path)) from None
        except OSError:                 # file systems without hard links
            if path.exists():
                tmp.unlink(missing_ok=True)
                raise ConfigError(cls._exists_message(path)) from None
            os.replace(tmp, path)
        tmp.unlink(missing_ok=True)
        return cls.open(path)

    @classmethod
    def _fill(cls, storage: Storage, rows: list[TrialRow], all_meta: Mapping[str, Any], config_hash: str) -> None:
        storage.create_schema(DDL)
        with storage.write() as tx:
            tx.many("INSERT INTO meta (key, value) VALUES (?, ?)",
                    [(k, _dumps(v)) for k, v in sorted(all_meta.items())])
            cols = ", ".join(f'"{c}"' for c in TRIAL_COLUMNS)
            marks = ", ".join("?" for _ in TRIAL_COLUMNS)
            tx.many(f"INSERT INTO trials ({cols}) VALUES ({marks})",
                    [tuple(int(v) if isinstance(v, bool) else v for v in (getattr(r, c) for c in TRIAL_COLUMNS))
                     for r in rows])
            first: dict[str, int] = {}
            for r in rows:
                first[r.evaluation_id] = min(first.get(r.evaluation_id, r.order), r.order)
            tx.many("INSERT INTO scene_sets (evaluation_id, first_order) VALUES (?, ?)", sorted(first.items()))
            cls._insert_event(tx, None, "campaign_planned", {"n_trials": len(rows), "config_hash": config_hash})

    @classmethod
    def _exists_message(cls, path: Path) -> str:
        campaign = ""
        folder = path.parent if path.suffix else path
        sqlite_path = folder / cls.FILENAME
        try:
            conn = sqlite3.connect(f"{sqlite_path.resolve().as_uri()}?mode=ro", uri=True)
            row = conn.execute("SELECT value FROM meta WHERE key = 'campaign'").fetchone()
            conn.close()
            campaign = f" (campaign {json.loads(row[0])!r})" if row else ""
        except (sqlite3.Error, ValueError):
            pass
        what = folder / cls.POINTER if (folder / cls.POINTER).is_file() else sqlite_path
        return (f"{what} already exists{campaign}: a campaign is already planned in {folder}. "
                f"Resume it with `spabench run campaign={folder}`, or plan into a new folder (out=<new dir>); "
                "an existing ledger is never overwritten")

    @classmethod
    def open(cls, path: str | os.PathLike, expect_hash: str | tuple[str, ...] | None = None, readonly: bool = False, *,
             url: str | None = None, lock: bool = False, bench_id: str | None = None) -> Ledger:
        """Open an existing ledger (a campaign folder, its ledger.sqlite or its pointer).

        With `expect_hash` (one hash, or the hashes a campaign may carry), refuse one planned from a
        different config. `url` replaces the pointer's
        connection URL (e.g. each bench connects as its own role); the schema stays the pointer's.
        `lock=True` (a writer session): take the campaign lock before anything else (`lock_session`);
        a second process gets LedgerLocked. Every SQLite open runs `PRAGMA quick_check` first.
        """
        path = Path(path)
        folder, explicit = _campaign_folder(path)
        pointer = folder / cls.POINTER
        file_lock = None
        if lock and not readonly and not pointer.is_file() and Path(folder).is_dir():
            file_lock = CampaignLock(folder).acquire()   # before the ledger is even opened
        try:
            ledger = cls._open_unlocked(path, folder, explicit, pointer, expect_hash, readonly, url)
        except BaseException:
            if file_lock is not None:
                file_lock.release()
            raise
        ledger._session_lock = file_lock
        if lock and file_lock is None and not readonly and bench_id is not None:  # PostgreSQL: per bench
            try:
                ledger.lock_session(bench_id)
            except BaseException:
                ledger.close()
                raise
        return ledger

    @classmethod
    def _open_unlocked(cls, path, folder, explicit, pointer, expect_hash, readonly, url) -> Ledger:
        if explicit is None and pointer.is_file():
            from spabench.ledger.postgres import open_pointer

            storage: Storage = open_pointer(pointer, readonly=readonly, url=url)
            where: Path = pointer
        else:
            where = explicit or folder / cls.FILENAME
            if not where.is_file():
                raise ConfigError(f"{where}: no campaign ledger here; plan one first with "
                                  "`spabench plan campaign=<name> out=<dir>`")
            if url is not None:   # a URL would be ignored here: the caller meant another ledger
                raise ConfigError(f"ledger={url}: this campaign's ledger is the SQLite file {where}; ledger= "
                                  "gives the connection URL of a campaign planned on PostgreSQL (allowed "
                                  "here: leave it out, null or sqlite)")
            try:
                storage = SQLiteStorage(where, readonly=readonly)
            except sqlite3.OperationalError as exc:  # the file is there but cannot be opened now
                raise LedgerStorageError(where, str(exc), opening=True) from None
            except sqlite3.DatabaseError as exc:     # e.g. "file is not a database"
                raise DataError(where, f"not a spabench ledger ({exc})") from None
            try:
                check_sqlite(storage.conn, where)
            except BaseException:
                storage.close()
                raise
        try:
            rows = storage.query("SELECT key, value FROM meta")
        except Exception as exc:
            storage.close()
            if isinstance(exc, SpabenchError):
                raise
            raise DataError(where, f"not a spabench ledger ({str(exc).splitlines()[0]})") from None
        meta = {r["key"]: json.loads(r["value"]) for r in rows}
        if meta.get("schema_version") != SCHEMA_VERSION:
            storage.close()
            raise DataError(where, f"ledger schema version {meta.get('schema_version')!r} is not supported",
                            field="schema_version", allowed=[SCHEMA_VERSION])
        if not readonly and isinstance(storage, SQLiteStorage):
            for statement in LATER_INDEXES:
                storage.conn.execute(statement)
        if not readonly:
            cls._add_later_columns(storage, where)
        accepted = (expect_hash,) if isinstance(expect_hash, str) else tuple(expect_hash or ())
        if expect_hash is not None and meta.get("config_hash") not in accepted:
            expect_hash = accepted[0]
            storage.close()
            name = meta.get("campaign") or "?"
            raise ConfigError(
                f"{where}: campaign '{name}' was planned with config hash {str(meta.get('config_hash'))[:12]}, "
                f"but the current campaign config and scene files hash to {expect_hash[:12]}. The suite "
                f"(tasks/, hardware/bench.yaml apart from its arm_envelope safety limits) or "
                f"conf/campaign/{name}.yaml changed since planning, so "
                "resuming would break scene matching across policies. Restore the files the campaign was "
                "planned with (e.g. check out the planning commit), or plan a new campaign into a new "
                f"folder: `spabench plan campaign={name} out=<new dir>`"
            )
        return cls(where, storage)

    @staticmethod
    def _add_later_columns(storage: Storage, where: Path) -> None:
        """Give a ledger planned before a later column that column (see schema.LATER_COLUMNS). A
        PostgreSQL bench role may not alter the tables: then the attempts go without it (warned)."""
        have: dict[str, list[str]] = {}
        for table, column, sql_type in LATER_COLUMNS:
            if column in have.setdefault(table, storage.columns(table)):
                continue
            try:
                storage.add_column(table, column, sql_type)
            except SpabenchError:
                raise
            except Exception as exc:
                if isinstance(storage, SQLiteStorage):
                    raise
                log.warning("%s: cannot add column %s.%s (%s); ask the schema's owner to open it once",
                            where, table, column, str(exc).strip().splitlines()[0])

    def release_reserve(self) -> bool:
        """Give back the ledger's reserve (SQLite) so the last writes fit on a full disk."""
        return self.storage.release_reserve()

    def close(self) -> None:
        try:
            self.storage.close()
        finally:
            if self._session_lock is not None:
                self._session_lock.release()
                self._session_lock = None

    def lock_session(self, bench_id: str | None = None) -> None:
        """Hold this campaign (SQLite: the folder's OS lock; PostgreSQL: the bench id) until close."""
        if self._session_lock is not None or self._bench_locked is not None:
            return
        if self.storage.kind == "sqlite":
            self._session_lock = CampaignLock(Path(self.path).parent).acquire()
            return
        self.lock_bench(bench_id or "default")

    @property
    def locked(self) -> bool:
        """This process holds the session lock (required for mark_interrupted)."""
        return self._session_lock is not None or self._bench_locked is not None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def _write(self) -> Iterator[Tx]:
        """One write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: row locks); a storage failure
        (disk full, I/O error) is a LedgerStorageError, a damaged file LedgerDamaged (integrity.py)."""
        if self._readonly:
            raise LedgerError(f"{self.path}: opened read-only")
        with storage_errors(self.path, self.storage), self.storage.write() as tx:
            yield tx

    def _query(self, sql: str, params: tuple = ()) -> list[Row]:
        with storage_errors(self.path, self.storage):
            return self.storage.query(sql, params)

    def _one(self, table: str, key: str, value: str) -> Row:
        """The row of `table` whose `key` is `value`, or the ledger's error naming the unknown id."""
        rows = self._query(f"SELECT * FROM {table} WHERE {key} = ?", (value,))
        if not rows:
            raise LedgerError(f"{self.path}: unknown {key} {value!r}")
        return rows[0]

    @property
    def _retrying(self) -> bool:
        """This thread runs an operation again after a reconnect (its first run may have committed)."""
        return bool(getattr(self._tl, "retrying", False))

    def _reconnect(self, problem: str, since: float) -> None:
        """A new connection to the shared ledger's database within `reconnect_s` of the first loss, or
        LedgerUnavailable; this bench's session lock goes with the connection and is taken again."""
        log.warning("%s: lost the connection to the ledger's database (%s); reconnecting for up to %g s",
                    self.location, problem, self.reconnect_s)
        try:
            self.storage.reconnect(since + self.reconnect_s)
        except Exception as exc:
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise LedgerUnavailable(self.location, last or problem, self.reconnect_s) from None
        if self._bench_locked is not None and not self.storage.try_bench_lock(self._bench_locked):
            raise BenchSessionActive(f"{self.location}: after reconnecting, bench {self._bench_locked!r} has "
                                     "another live session; this one stops")
        log.warning("%s: reconnected to the ledger's database after %.1f s", self.location,
                    time.monotonic() - since)

    @staticmethod
    def _insert_event(tx: Tx, attempt_id: str | None, kind: str, payload: Mapping[str, Any]) -> int:
        return tx.insert_id("INSERT INTO events (attempt_id, t, kind, payload) VALUES (?, ?, ?, ?)",
                            (attempt_id, _now(), kind, _dumps(dict(payload))), "event_id")

    @staticmethod
    def _trial(row: Row) -> TrialRow:
        return TrialRow.from_mapping(row)

    @staticmethod
    def _attempt(row: Row) -> AttemptRow:
        values = {k: row[k] for k in row if k in AttemptRow.__dataclass_fields__}
        values["dry_run"] = bool(values.get("dry_run", 0))
        return AttemptRow(**values)

    @staticmethod
    def _score(row: Row) -> ScoreRow:
        return ScoreRow(row["attempt_id"], row["rater"], bool(row["success"]), row["failure_mode"], row["note"],
                        row["scored_at"], row["reason"], row["superseded_at"])

    def _attempt_row(self, tx: Tx, attempt_id: str, lock: bool = False) -> Row:
        """The attempt's row; `lock`: held until the transaction ends (PostgreSQL; SQLite's write
        transaction already excludes every other writer)."""
        row = tx.one("SELECT * FROM attempts WHERE attempt_id = ?" + (self.storage.for_update if lock else ""),
                     (attempt_id,))
        if row is None:
            raise LedgerError(f"{self.path}: unknown attempt_id {attempt_id!r}")
        return row

    # ------------------------------------------------------------------ meta and plan
    @_reconnecting
    def meta(self) -> dict[str, Any]:
        return {r["key"]: json.loads(r["value"]) for r in self._query("SELECT key, value FROM meta")}

    @property
    def config_hash(self) -> str:
        return self.meta()["config_hash"]

    @property
    def campaign(self) -> str:
        return self.meta().get("campaign", "")

    def aliases(self) -> dict[str, str]:
        """policy -> blind alias (not for operator-facing output)."""
        return dict(self.meta().get("aliases", {}))

    def journal_mode(self) -> str:
        """SQLite's journal mode ('wal'); a PostgreSQL ledger has none ('')."""
        return self.storage.journal_mode() if isinstance(self.storage, SQLiteStorage) else ""

    @_reconnecting
    def trials(self) -> list[TrialRow]:
        return [self._trial(r) for r in self._query('SELECT * FROM trials ORDER BY "order"')]

    @_reconnecting
    def trial(self, trial_id: str) -> TrialRow:
        return self._trial(self._one("trials", "trial_id", trial_id))

    # A dry run's attempt (dry_run=1) never consumes its trial: only a counted complete attempt does.
    _PENDING = ('SELECT t.* FROM trials t WHERE NOT EXISTS (SELECT 1 FROM attempts a '
                "WHERE a.trial_id = t.trial_id AND a.status = 'complete' AND a.dry_run = 0)")

    @_reconnecting
    def next_trial(self, evaluation_id: str | None = None) -> TrialRow | None:
        """The lowest-order trial without a complete attempt (invalid attempts are re-run);
        with `evaluation_id`, the next one of that scene set."""
        if evaluation_id is None:
            rows = self._query(self._PENDING + ' ORDER BY t."order" LIMIT 1')
        else:
            rows = self._query(self._PENDING + ' AND t.evaluation_id = ? ORDER BY t."order" LIMIT 1',
                               (evaluation_id,))
        return self._trial(rows[0]) if rows else None

    @_reconnecting
    def pending_trials(self) -> list[TrialRow]:
        return [self._trial(r) for r in self._query(self._PENDING + ' ORDER BY t."order"')]

    # ------------------------------------------------------------------ attempts
    @_reconnecting
    def begin_attempt(self, trial_id: str, episode_path: str | os.PathLike | None = None, *,
                      bench_id: str | None = None, bench_kind: str | None = None, operator: str | None = None,
                      dry_run: bool = False, alignment: float | None = None,
                      alignment_override: str | None = None) -> str:
        """Start an attempt (status running) and return its id, e.g. 'E0137-P2-a1'.

        `alignment`: the scene's lowest alignment score at "scene ready" (None: no reference yet);
        `alignment_override`: the person's reason to start below the alignment threshold. Refused while
        the same bench has another attempt running, and while another bench holds a live claim on the
        trial's scene set."""
        if alignment is not None and not (isinstance(alignment, (int, float)) and 0.0 <= alignment <= 1.0):
            raise LedgerError(f"{self.path}: begin_attempt: alignment {alignment!r} (allowed: null or 0..1)")
        if alignment_override is not None and (not isinstance(alignment_override, str)
                                               or not alignment_override.strip()):
            raise LedgerError(f"{self.path}: begin_attempt: alignment_override must be null or a non-empty reason")
        columns = self._attempt_columns()
        with self._write() as tx:
            trial = tx.one("SELECT evaluation_id FROM trials WHERE trial_id = ?", (trial_id,))
            if trial is None:
                raise LedgerError(f"{self.path}: unknown trial_id {trial_id!r}")
            claim = tx.one(f"SELECT bench_id, lease_expires > {self.storage.now_epoch()} AS live FROM scene_sets "
                           f"WHERE evaluation_id = ?{self.storage.for_update}", (trial["evaluation_id"],))
            if claim is not None and claim["bench_id"] not in (None, bench_id) and claim["live"]:
                raise SceneSetTaken(f"{self.path}: scene set {trial['evaluation_id']} is claimed by bench "
                                    f"{claim['bench_id']!r}; bench {bench_id!r} does not run its trials",
                                    evaluation_id=trial["evaluation_id"], holder=claim["bench_id"])
            done = tx.one("SELECT attempt_id FROM attempts WHERE trial_id = ? AND status = 'complete' "
                          "AND dry_run = 0", (trial_id,))
            if done is not None:
                raise LedgerError(f"{self.path}: trial {trial_id} already has a complete attempt "
                                  f"({done['attempt_id']}); it is not run again")
            running = tx.one("SELECT attempt_id, trial_id FROM attempts WHERE status = 'running' "
                             "AND COALESCE(bench_id, '') = ?", (bench_id or "",))
            if running is not None and self._retrying and running["trial_id"] == trial_id:
                return running["attempt_id"]   # committed just before the connection broke
            if running is not None:
                raise LedgerError(f"{self.path}: attempt {running['attempt_id']} is still running; finish it "
                                  "or call mark_interrupted() when resuming after a crash")
            n = int(tx.one_row("SELECT COALESCE(MAX(n), 0) AS n FROM attempts WHERE trial_id = ?", (trial_id,))["n"]) + 1
            attempt_id = f"{trial_id}-a{n}"
            path = None if episode_path is None else str(episode_path)
            gate = {"alignment": None if alignment is None else float(alignment),
                    "alignment_override": None if alignment_override is None else alignment_override.strip()}
            # a shared ledger its bench role could not give the later columns keeps them in the event only
            extra = [c for c, v in gate.items() if v is not None and c in columns]
            names = ", ".join(["attempt_id", "trial_id", "n", "status", "started_at", "episode_path", "bench_id",
                               "bench_kind", "operator", "dry_run", *extra])
            tx.execute(f"INSERT INTO attempts ({names}) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?"
                       + ", ?" * len(extra) + ")",
                       (attempt_id, trial_id, n, _now(), path, bench_id, bench_kind, operator, int(bool(dry_run)),
                        *(gate[c] for c in extra)))
            self._insert_event(tx, attempt_id, "attempt_started", {
                "trial_id": trial_id, "episode_path": path, "bench_id": bench_id, "bench_kind": bench_kind,
                "operator": operator, "dry_run": bool(dry_run), **gate})
        return attempt_id

    def _attempt_columns(self) -> list[str]:
        if self._columns is None:
            self._columns = self.storage.columns("attempts")
        return self._columns

    @_reconnecting
    def finish_attempt(self, attempt_id: str, status: str, stop_reason: str | None,
                       episode_path: str | os.PathLike | None = None, *,
                       invalid_reason: str | None = None, unsafe_by: str | None = None,
                       unsafe_note: str = "") -> None:
        """End a running attempt as 'complete' (to be scored) or 'invalid' (to be re-run).

        `unsafe_by` (a rater): the operator e-stopped it for unsafe policy behaviour, so it is complete
        and, in the same transaction, scored as the policy's failure (failure mode 'unsafe')."""
        if unsafe_by is not None and (status, stop_reason) != ("complete", "estop"):
            raise LedgerError(f"{self.path}: attempt {attempt_id}: an unsafe e-stop finishes as complete with "
                              f"stop_reason 'estop' (got {status!r}, {stop_reason!r})")
        if unsafe_by is not None and (not isinstance(unsafe_by, str) or not unsafe_by.strip()):
            raise LedgerError(f"{self.path}: attempt {attempt_id}: unsafe_by must name the rater")
        if status not in FINISH_STATUSES:
            raise LedgerError(f"{self.path}: attempt {attempt_id}: status {status!r} "
                              f"(allowed: {', '.join(FINISH_STATUSES)})")
        if stop_reason is not None and stop_reason not in STOP_REASONS:
            raise LedgerError(f"{self.path}: attempt {attempt_id}: stop_reason {stop_reason!r} "
                              f"(allowed: {', '.join(STOP_REASONS)})")
        if status == "invalid" and not invalid_reason:
            raise LedgerError(f"{self.path}: attempt {attempt_id}: an invalid attempt needs an invalid_reason")
        if status == "complete" and invalid_reason:
            raise LedgerError(f"{self.path}: attempt {attempt_id}: a complete attempt has no invalid_reason "
                              f"(got {invalid_reason!r})")
        with self._write() as tx:
            row = self._attempt_row(tx, attempt_id)
            if self._retrying and (row["status"], row["stop_reason"]) == (status, stop_reason):
                return                # committed just before the connection broke
            if row["status"] != "running" and self._taken_over(tx, attempt_id):
                raise self._lost_claim(tx, attempt_id, status)   # interrupted by the set's new holder
            if row["status"] != "running":
                raise LedgerError(f"{self.path}: attempt {attempt_id} is {row['status']}, not running"
                                  + (f" ({row['invalid_reason']})" if row["invalid_reason"] else ""))
            if self.finish_checked is not None:
                self.finish_checked(attempt_id)
            path = None if episode_path is None else str(episode_path)
            # The compare-and-set: the attempt is still running and its scene set is still its bench's
            # (or nobody's), checked in the same statement that writes it. What was read above may be
            # stale by now: another bench may have taken the set over and interrupted this attempt.
            done = tx.execute(
                "UPDATE attempts SET status = ?, ended_at = ?, stop_reason = ?, invalid_reason = ?, "
                "episode_path = COALESCE(?, episode_path) WHERE attempt_id = ? AND status = 'running' "
                "AND EXISTS (SELECT 1 FROM scene_sets s JOIN trials t ON t.evaluation_id = s.evaluation_id "
                " WHERE t.trial_id = attempts.trial_id AND (s.bench_id IS NULL "
                " OR s.bench_id = COALESCE(attempts.bench_id, ''))) RETURNING attempt_id",
                (status, _now(), stop_reason, invalid_reason, path, attempt_id))
            if not done:
                raise self._lost_claim(tx, attempt_id, status)
            self._insert_event(tx, attempt_id, "attempt_finished",
                               {"status": status, "stop_reason": stop_reason, "invalid_reason": invalid_reason})
            if unsafe_by is not None:
                tx.execute("INSERT INTO scores (attempt_id, rater, success, failure_mode, note, scored_at) "
                           "VALUES (?, ?, 0, ?, ?, ?)", (attempt_id, unsafe_by, UNSAFE, unsafe_note or "", _now()))
                self._insert_event(tx, attempt_id, "scored", {"rater": unsafe_by, "success": False,
                                                              "failure_mode": UNSAFE, "source": "estop_cause"})

    @staticmethod
    def _taken_over(tx: Tx, attempt_id: str) -> bool:
        """The attempt was interrupted by another bench taking its lapsed scene set over."""
        ev = tx.one("SELECT payload FROM events WHERE attempt_id = ? AND kind = 'attempt_interrupted' "
                    "ORDER BY event_id DESC LIMIT 1", (attempt_id,))
        return ev is not None and bool(json.loads(ev["payload"]).get("lease_lapsed"))

    def _lost_claim(self, tx: Tx, attempt_id: str, status: str) -> ClaimLost:
        """Why a finish changed nothing: the attempt is no longer running (another bench took its scene
        set over and interrupted it), or its set is now another bench's."""
        row = self._attempt_row(tx, attempt_id)
        claim = tx.one("SELECT s.evaluation_id, s.bench_id FROM scene_sets s JOIN trials t "
                       "ON t.evaluation_id = s.evaluation_id WHERE t.trial_id = ?", (row["trial_id"],))
        holder = claim["bench_id"] if claim else None
        taker = holder
        if row["status"] != "running":
            ev = tx.one("SELECT payload FROM events WHERE attempt_id = ? AND kind = 'attempt_interrupted' "
                        "ORDER BY event_id DESC LIMIT 1", (attempt_id,))
            taker = json.loads(ev["payload"]).get("by_bench", holder) if ev else holder
        state = row["status"] + (f" ({row['invalid_reason']})" if row["invalid_reason"] else "")
        return ClaimLost(
            f"{self.location}: attempt {attempt_id} was not recorded as {status}: bench {row['bench_id']!r} no "
            f"longer holds scene set {claim['evaluation_id'] if claim else '?'} (its lease lapsed and bench "
            f"{taker!r} took the set over); the attempt is {state} and its trial is run by the set's holder. "
            "Nothing was changed; the recording stays where it is",
            attempt_id=attempt_id, status=row["status"], evaluation_id=claim["evaluation_id"] if claim else None,
            holder=taker)

    @_reconnecting
    def mark_interrupted(self, bench_id: str | None = None) -> list[str]:
        """On resume: every attempt still 'running' becomes invalid ('interrupted'); returns their ids.

        With `bench_id` only that bench's (several benches share a PostgreSQL ledger; each resumes its
        own, and a bench that takes over a lapsed claim interrupts the dead holder's attempts).
        Only under the session lock (campaign lock / bench lock): otherwise a second process would
        kill a live attempt."""
        if bench_id is None and self.storage.multi_bench:
            raise LedgerError(f"{self.location}: a shared ledger has other benches' attempts running; "
                              "mark_interrupted(bench_id=...) names the bench whose attempts were interrupted")
        if self.storage.multi_bench and self._bench_locked != bench_id:
            raise LedgerError(f"{self.location}: mark_interrupted(bench_id={bench_id!r}) runs only under that "
                              "bench's lock (lock_bench first)")
        if not self.locked:
            raise LedgerError(f"{self.path}: mark_interrupted runs only under the campaign lock "
                              "(open the ledger with lock=True)")
        with self._write() as tx:
            return self._interrupt(tx, "status = 'running'" + (" AND bench_id = ?" if bench_id else ""),
                                   (bench_id,) if bench_id else (), {})

    def _interrupt(self, tx: Tx, where: str, params: tuple, payload: Mapping[str, Any]) -> list[str]:
        ids = [r["attempt_id"] for r in
               tx.execute(f"SELECT attempt_id FROM attempts WHERE {where} ORDER BY started_at, attempt_id", params)]
        now = _now()
        for attempt_id in ids:
            tx.execute("UPDATE attempts SET status = 'invalid', ended_at = ?, stop_reason = 'interrupted', "
                       "invalid_reason = 'interrupted' WHERE attempt_id = ?", (now, attempt_id))
            self._insert_event(tx, attempt_id, "attempt_interrupted", payload)
        return ids

    @_reconnecting
    def episode_recovered(self, attempt_id: str, episode_path: str, ended_at: str | None = None,
                          detail: Mapping[str, Any] | None = None) -> None:
        """A finished attempt's recording was completed after a crash (spabench.record.recovery):
        the attempt points at the folder that exists, and, when the recorder died with the process,
        ends when its last recorded row did rather than when the crash was noticed. (i9, issue 9)"""
        with self._write() as tx:
            row = self._attempt_row(tx, attempt_id)
            if row["status"] == "running":
                raise LedgerError(f"{self.path}: attempt {attempt_id} is still running")
            tx.execute("UPDATE attempts SET episode_path = ?, ended_at = COALESCE(?, ended_at) WHERE attempt_id = ?",
                       (str(episode_path), ended_at, attempt_id))
            self._insert_event(tx, attempt_id, "episode_recovered",
                               {"episode_path": str(episode_path), "ended_at": ended_at, **dict(detail or {})})

    @_reconnecting
    def invalidate_attempt(self, attempt_id: str, reason: str, rater: str) -> None:
        """A complete attempt becomes invalid after the fact (e.g. the scene was wrong): its trial is
        re-run, its scores stay in the history, and the decision is logged with who made it."""
        where = f"{self.path}: invalidate {attempt_id}"
        if not isinstance(reason, str) or not reason.strip():
            raise LedgerError(f"{where}: a reason is required")
        if not isinstance(rater, str) or not rater.strip():
            raise LedgerError(f"{where}: rater must be a non-empty string")
        with self._write() as tx:
            row = self._attempt_row(tx, attempt_id)
            if row["status"] != "complete":
                raise LedgerError(f"{where}: attempt is {row['status']}; only complete attempts are invalidated")
            tx.execute("UPDATE attempts SET status = 'invalid', invalid_reason = ? WHERE attempt_id = ?",
                       (f"{OPERATOR_INVALIDATED}: {reason.strip()}", attempt_id))
            self._insert_event(tx, attempt_id, "attempt_invalidated", {"rater": rater, "reason": reason.strip()})

    @_reconnecting
    def attempt(self, attempt_id: str) -> AttemptRow:
        return self._attempt(self._one("attempts", "attempt_id", attempt_id))

    @_reconnecting
    def attempts(self) -> list[AttemptRow]:
        """Every attempt, in plan order."""
        return [self._attempt(r) for r in self._query(
            'SELECT a.* FROM attempts a JOIN trials t USING (trial_id) ORDER BY t."order", a.n')]

    @_reconnecting
    def attempts_for(self, trial_id: str) -> list[AttemptRow]:
        return [self._attempt(r) for r in self._query(
            "SELECT * FROM attempts WHERE trial_id = ? ORDER BY n", (trial_id,))]

    @_reconnecting
    def unscored_attempts(self, rater: str | None = None) -> list[AttemptRow]:
        """Complete attempts without any score (with `rater`: without a score by that rater), in plan order."""
        by = "" if rater is None else " AND s.rater = ?"
        return [self._attempt(r) for r in self._query(
            "SELECT a.* FROM attempts a JOIN trials t USING (trial_id) WHERE a.status = 'complete' "
            f"AND NOT EXISTS (SELECT 1 FROM scores s WHERE s.attempt_id = a.attempt_id{by}) "
            'ORDER BY t."order", a.n', () if rater is None else (rater,))]

    @_reconnecting
    def first_complete_attempt(self, evaluation_id: str) -> AttemptRow | None:
        """The earliest complete attempt of an evaluation (any policy): the operator's reference."""
        rows = self._query(
            "SELECT a.* FROM attempts a JOIN trials t USING (trial_id) WHERE t.evaluation_id = ? "
            "AND a.status = 'complete' ORDER BY CASE WHEN a.episode_path IS NULL THEN 1 ELSE 0 END, "
            "a.ended_at, a.attempt_id LIMIT 1", (evaluation_id,))
        return self._attempt(rows[0]) if rows else None

    # ------------------------------------------------------------------ scores and events
    @_reconnecting
    def record_score(self, attempt_id: str, rater: str, success: bool, failure_mode: str | None = None,
                     note: str = "", *, reason: str | None = None, expect_version: int | None = None) -> None:
        """The binary outcome of a complete attempt; failure_mode annotates failures only.

        A second score by the same rater is a correction: it needs `reason`, and the earlier score
        stays in the history (superseded). `expect_version` (see `score_version`) is what the caller
        saw: if the rater's scores changed since, nothing is written and ScoreConflict says what was
        saved meanwhile, so that a second tab cannot silently replace the first tab's score."""
        where = f"{self.path}: score for {attempt_id}"
        if not _is_bool(success):
            raise LedgerError(f"{where}: success must be a bool, got {success!r}")
        success = bool(success)
        if failure_mode is not None and failure_mode not in FAILURE_MODES and failure_mode != UNSAFE:
            raise LedgerError(f"{where}: failure_mode {failure_mode!r} (allowed: {', '.join(FAILURE_MODES)}; "
                              f"{UNSAFE} after an e-stop for unsafe policy behaviour)")
        if success and failure_mode is not None:
            raise LedgerError(f"{where}: a successful attempt has no failure_mode (got {failure_mode!r})")
        if not isinstance(rater, str) or not rater.strip():
            raise LedgerError(f"{where}: rater must be a non-empty string")
        if reason is not None and (not isinstance(reason, str) or not reason.strip()):
            raise LedgerError(f"{where}: reason must be a non-empty string")
        if expect_version is not None and (not isinstance(expect_version, int) or isinstance(expect_version, bool)
                                           or expect_version < 0):
            raise LedgerError(f"{where}: expect_version must be a count (int >= 0), got {expect_version!r}")
        with self._write() as tx:
            row = self._attempt_row(tx, attempt_id, lock=True)   # PostgreSQL: one scorer of an attempt at a time
            if expect_version is not None:
                version = self._score_version(tx, attempt_id, rater)
                if version != expect_version:
                    latest = tx.one("SELECT * FROM scores WHERE attempt_id = ? AND rater = ? ORDER BY score_id DESC "
                                    "LIMIT 1", (attempt_id, rater))
                    mine = (rater, bool(success), failure_mode, note or "")
                    if self._retrying and latest is not None and version == expect_version + 1 and \
                            (latest["rater"], bool(latest["success"]), latest["failure_mode"], latest["note"]) == mine:
                        return            # committed just before the connection broke
                    meanwhile = self._score(latest) if latest is not None and latest["superseded_at"] is None else None
                    raise ScoreConflict(
                        f"{where}: rater {rater!r} saved a score of this attempt after this one was begun "
                        f"(version {version}, expected {expect_version}); nothing was written",
                        attempt_id=attempt_id, rater=rater, current=meanwhile, version=version)
            if row["status"] != "complete":
                raise LedgerError(f"{where}: attempt is {row['status']}; only complete attempts are scored "
                                  "(invalid attempts are re-run, never failures)")
            trial = tx.one_row("SELECT task, condition FROM trials WHERE trial_id = ?", (row["trial_id"],))
            if failure_mode == UNSAFE:
                problem = unsafe_applies(row["stop_reason"])
            else:
                problem = failure_mode_applies(failure_mode, trial["task"], trial["condition"]) if failure_mode else None
            if problem:
                raise LedgerError(f"{where}: {problem}")
            current = tx.one("SELECT score_id FROM scores WHERE attempt_id = ? AND rater = ? "
                             "AND superseded_at IS NULL", (attempt_id, rater))
            now = _now()
            if current is not None:
                if reason is None:
                    raise LedgerError(f"{where}: already scored by rater {rater!r}; a correction needs a reason "
                                      "(record_score(..., reason='...'); the earlier score stays in the history)")
                tx.execute("UPDATE scores SET superseded_at = ? WHERE score_id = ?", (now, current["score_id"]))
            tx.execute("INSERT INTO scores (attempt_id, rater, success, failure_mode, note, scored_at, reason) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (attempt_id, rater, int(success), failure_mode, note or "", now,
                        reason.strip() if reason else None))
            payload = {"rater": rater, "success": success, "failure_mode": failure_mode}
            if current is not None:
                payload["reason"] = (reason or "").strip()   # a rescore without a reason was refused above
            self._insert_event(tx, attempt_id, "scored" if current is None else "rescored", payload)

    @staticmethod
    def _score_version(tx: Tx, attempt_id: str, rater: str) -> int:
        return int(tx.one_row("SELECT COUNT(*) AS n FROM scores WHERE attempt_id = ? AND rater = ?",
                              (attempt_id, rater))["n"])

    @_reconnecting
    def score_version(self, attempt_id: str, rater: str) -> int:
        """How many scores `rater` ever saved for the attempt (rows are never deleted): the version a
        score form carries back to record_score. Per rater, because raters never replace each other's
        scores, and a blind second rater must not learn from a refusal that someone else scored."""
        return int(self._query("SELECT COUNT(*) AS n FROM scores WHERE attempt_id = ? AND rater = ?",
                               (attempt_id, rater))[0]["n"])

    @_reconnecting
    def scores_for(self, attempt_id: str) -> list[ScoreRow]:
        """The current score of each rater of an attempt (corrections applied), first rater first."""
        return [self._score(r) for r in self._query(
            "SELECT * FROM scores WHERE attempt_id = ? AND superseded_at IS NULL ORDER BY score_id", (attempt_id,))]

    @_reconnecting
    def score_history(self, attempt_id: str) -> list[ScoreRow]:
        """Every score ever recorded for an attempt, superseded ones included, oldest first."""
        return [self._score(r) for r in self._query(
            "SELECT * FROM scores WHERE attempt_id = ? ORDER BY score_id", (attempt_id,))]

    @_reconnecting
    def log_event(self, attempt_id: str | None, kind: str, payload: Mapping[str, Any] | None = None) -> int:
        """Append one audit event (its own transaction); returns the event id."""
        if not isinstance(kind, str) or not kind:
            raise LedgerError(f"{self.path}: event kind must be a non-empty string")
        try:
            _dumps(dict(payload or {}))
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"{self.path}: event {kind!r} payload is not JSON-serialisable: {exc}") from None
        with self._write() as tx:
            if attempt_id is not None:
                self._attempt_row(tx, attempt_id)
            return self._insert_event(tx, attempt_id, kind, payload or {})

    @_reconnecting
    def events(self, attempt_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM events WHERE 1 = 1", list[Any]()
        if attempt_id is not None:
            sql, params = sql + " AND attempt_id = ?", params + [attempt_id]
        if kind is not None:
            sql, params = sql + " AND kind = ?", params + [kind]
        return [{"event_id": int(r["event_id"]), "attempt_id": r["attempt_id"], "t": r["t"], "kind": r["kind"],
                 "payload": json.loads(r["payload"])} for r in self._query(sql + " ORDER BY event_id", tuple(params))]

    # ------------------------------------------------------------------ summaries
    @_reconnecting
    def progress(self) -> dict[str, int]:
        r = self._query(
            "SELECT (SELECT COUNT(*) FROM trials) AS trials, "
            "(SELECT COUNT(DISTINCT trial_id) FROM attempts WHERE status = 'complete' AND dry_run = 0) AS complete, "
            "(SELECT COUNT(*) FROM attempts WHERE status = 'running') AS running, "
            "(SELECT COUNT(*) FROM attempts WHERE status = 'invalid') AS invalid_attempts, "
            "(SELECT COUNT(*) FROM attempts a WHERE status = 'complete' AND NOT EXISTS "
            " (SELECT 1 FROM scores s WHERE s.attempt_id = a.attempt_id)) AS unscored")[0]
        out = {k: int(v) for k, v in r.items()}
        out["pending"] = out["trials"] - out["complete"]
        return out

    @_reconnecting
    def duplicate_complete(self) -> list[dict[str, Any]]:
        """Trials with more than one complete attempt (possible only in a ledger written before finishing
        was a compare-and-set): each trial with its complete attempts, bench and current scores."""
        rows = self._query(
            "SELECT a.trial_id, a.attempt_id, a.bench_id, a.ended_at FROM attempts a JOIN trials t USING (trial_id) "
            "WHERE a.status = 'complete' AND a.dry_run = 0 AND a.trial_id IN (SELECT trial_id FROM attempts "
            "WHERE status = 'complete' AND dry_run = 0 "
            'GROUP BY trial_id HAVING COUNT(*) > 1) ORDER BY t."order", a.n')
        return _grouped(rows, "trial_id", "attempts", lambda r: {
            "attempt_id": r["attempt_id"], "bench_id": r["bench_id"], "ended_at": r["ended_at"],
            "scores": [("success" if s.success else "failure") for s in self.scores_for(r["attempt_id"])]})

    @_reconnecting
    def split_sets(self) -> list[dict[str, Any]]:
        """Scene sets whose complete attempts were run on more than one bench (a takeover between two of
        its trials): the set's policies were not compared on one staged scene. Each with its trials'
        benches."""
        rows = self._query(
            "SELECT t.evaluation_id, a.trial_id, a.bench_id FROM attempts a JOIN trials t USING (trial_id) "
            "WHERE a.status = 'complete' AND a.dry_run = 0 AND t.evaluation_id IN (SELECT t2.evaluation_id "
            "FROM attempts a2 JOIN trials t2 USING (trial_id) WHERE a2.status = 'complete' AND a2.dry_run = 0 "
            "GROUP BY t2.evaluation_id "
            'HAVING COUNT(DISTINCT COALESCE(a2.bench_id, \'\')) > 1) ORDER BY t."order", a.n')
        out = _grouped(rows, "evaluation_id", "trials", lambda r: (r["trial_id"], r["bench_id"]))
        for entry in out:
            entry["benches"] = sorted({b or "?" for _, b in entry["trials"]})
        return out

    @_reconnecting
    def outcomes(self):
        """One row per finished attempt: complete+scored (valid) and invalid (valid=False, success=False).

        Complete attempts without a score are not outcomes yet (see `unscored_attempts`). With several
        raters the first to score an attempt is the primary rater, and their latest score (after any
        correction) is the outcome; `scored_by_n` counts raters, `corrections` superseded scores.
        """
        import pandas as pd

        rows = self._query(
            "SELECT t.policy, t.task, t.condition, t.evaluation_id, s.success, t.matched_group, "
            "t.instruction_variant, s.failure_mode, a.status, t.trial_id, a.attempt_id, a.episode_path, "
            "t.alias, t.scene_id, t.cell, t.withheld, a.stop_reason, a.invalid_reason, s.rater, "
            "(SELECT COUNT(DISTINCT s2.rater) FROM scores s2 WHERE s2.attempt_id = a.attempt_id) AS scored_by_n, "
            "(SELECT COUNT(*) FROM scores s3 WHERE s3.attempt_id = a.attempt_id "
            " AND s3.superseded_at IS NOT NULL) AS corrections, "
            "a.bench_kind, a.bench_id, a.dry_run "
            "FROM attempts a JOIN trials t USING (trial_id) "
            "LEFT JOIN scores s ON s.attempt_id = a.attempt_id AND s.superseded_at IS NULL AND s.rater = "
            " (SELECT s0.rater FROM scores s0 WHERE s0.attempt_id = a.attempt_id ORDER BY s0.score_id LIMIT 1) "
            "WHERE a.status = 'invalid' OR (a.status = 'complete' AND s.attempt_id IS NOT NULL) "
            'ORDER BY t."order", a.n')
        records = []
        for r in rows:
            rec = {k: v for k, v in r.items() if k != "status"}
            valid = r["status"] == "complete"
            rec["valid"] = valid
            rec["success"] = bool(r["success"]) if valid else False
            rec["withheld"] = bool(r["withheld"])
            rec["dry_run"] = bool(r["dry_run"])
            rec["scored_by_n"] = int(r["scored_by_n"])
            rec["corrections"] = int(r["corrections"])
            if not valid:
                rec["failure_mode"] = None
            records.append(rec)
        frame = pd.DataFrame.from_records(records, columns=list(OUTCOME_COLUMNS))
        return frame.astype({"success": bool, "valid": bool, "withheld": bool, "dry_run": bool,
                             "scored_by_n": int, "corrections": int})

    # ------------------------------------------------------------------ claims (several benches)
    @_reconnecting
    def lock_bench(self, bench_id: str) -> None:
        """One live process per bench id (PostgreSQL: a session advisory lock, released when the process
        dies); refused with the holder's host, pid and start time. SQLite: the campaign lock does it."""
        import socket

        if not self.storage.try_bench_lock(bench_id):
            started = [e for e in self.events(kind="bench_session_started") if e["payload"].get("bench_id") == bench_id]
            who = started[-1]["payload"] if started else {}
            since = started[-1]["t"] if started else "?"
            raise BenchSessionActive(
                f"{self.location}: bench {bench_id!r} already has a live session (host {who.get('host', '?')}, "
                f"pid {who.get('pid', '?')}, since {since}); give this bench another bench_id=NAME, or stop "
                "the other process first")
        self._bench_locked = bench_id
        with self._write() as tx:
            self._insert_event(tx, None, "bench_session_started",
                               {"bench_id": bench_id, "host": socket.gethostname(), "pid": os.getpid()})

    @_reconnecting
    def claim_scene_set(self, bench_id: str, lease_s: float) -> str | None:
        """Claim the next scene set (every policy's trial of one evaluation id) for `bench_id`.

        One transaction: the lowest-order set with a pending trial that is free, already this bench's,
        or whose holder's lease lapsed; PostgreSQL locks the row and skips rows other benches are
        claiming at this moment (FOR UPDATE SKIP LOCKED). Taking over a lapsed lease interrupts the dead
        holder's running attempt in that set. Returns the evaluation id, or None when nothing is free.
        """
        if not bench_id:
            raise LedgerError(f"{self.path}: claims need a bench_id")
        if not lease_s > 0:
            raise LedgerError(f"{self.path}: lease_s must be > 0, got {lease_s}")
        with self._write() as tx:
            clock = tx.one_row(f"SELECT {self.storage.now_epoch()} AS now, {self.storage.server_start_epoch()} AS up")
            now, up = float(clock["now"]), float(clock["up"])
            # a lease that ran out while the server was down (stopped, restarting) lapses only a full
            # lease after the server came back: its bench gets that long to reconnect and renew, so a
            # restart or a stop of the server never hands a set over
            grace_over = int(now >= up + float(lease_s))
            row = tx.one(
                "SELECT s.evaluation_id, s.bench_id, s.lease_expires FROM scene_sets s WHERE EXISTS "
                "(SELECT 1 FROM trials t WHERE t.evaluation_id = s.evaluation_id AND NOT EXISTS "
                " (SELECT 1 FROM attempts a WHERE a.trial_id = t.trial_id AND a.status = 'complete' "
                "  AND a.dry_run = 0)) "
                "AND (s.bench_id IS NULL OR s.bench_id = ? OR (s.lease_expires < ? AND "
                " (s.lease_expires >= ? OR ? = 1))) "
                "ORDER BY CASE WHEN s.bench_id = ? THEN 0 ELSE 1 END, s.first_order LIMIT 1"
                + self.storage.skip_locked, (bench_id, now, up, grace_over, bench_id))
            if row is None:
                return None
            eid, holder = row["evaluation_id"], row["bench_id"]
            interrupted: list[str] = []
            if holder not in (None, bench_id):
                interrupted = self._interrupt(
                    tx, "status = 'running' AND bench_id = ? AND trial_id IN "
                        "(SELECT trial_id FROM trials WHERE evaluation_id = ?)", (holder, eid),
                    {"lease_lapsed": True, "from_bench": holder, "by_bench": bench_id})
            tx.execute("UPDATE scene_sets SET bench_id = ?, lease_expires = ?, claimed_at = ? WHERE evaluation_id = ?",
                       (bench_id, now + float(lease_s), _now(), eid))
            self._insert_event(tx, None, "scene_set_claimed", {
                "evaluation_id": eid, "bench_id": bench_id, "lease_s": float(lease_s),
                "from_bench": holder if holder != bench_id else None, "resumed": holder == bench_id,
                "interrupted": interrupted})
        return eid

    @_reconnecting
    def renew_claim(self, bench_id: str, evaluation_id: str, lease_s: float) -> bool:
        """Extend this bench's lease; False when the set is no longer this bench's (taken over)."""
        with self._write() as tx:
            rows = tx.execute(f"UPDATE scene_sets SET lease_expires = {self.storage.now_epoch()} + ? "
                              "WHERE evaluation_id = ? AND bench_id = ? RETURNING evaluation_id",
                              (float(lease_s), evaluation_id, bench_id))
        return bool(rows)

    @_reconnecting
    def release_claim(self, bench_id: str, evaluation_id: str) -> None:
        """Give a set back (its trials are done, or the bench stops)."""
        with self._write() as tx:
            rows = tx.execute("UPDATE scene_sets SET bench_id = NULL, lease_expires = NULL "
                              "WHERE evaluation_id = ? AND bench_id = ? RETURNING evaluation_id",
                              (evaluation_id, bench_id))
            if rows:
                self._insert_event(tx, None, "scene_set_released",
                                   {"evaluation_id": evaluation_id, "bench_id": bench_id})

    @_reconnecting
    def claims(self) -> list[dict[str, Any]]:
        """Every scene set with its holder and seconds left on the lease (negative: lapsed)."""
        rows = self._query(f"SELECT evaluation_id, first_order, bench_id, lease_expires, claimed_at, "
                           f"{self.storage.now_epoch()} AS now FROM scene_sets ORDER BY first_order")
        return [{"evaluation_id": r["evaluation_id"], "bench_id": r["bench_id"], "claimed_at": r["claimed_at"],
                 "lease_left_s": None if r["lease_expires"] is None else float(r["lease_expires"]) - float(r["now"])}
                for r in rows]
