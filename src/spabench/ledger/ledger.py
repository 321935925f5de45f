"""A campaign's durable state in one SQLite file (WAL): the plan, attempts, scores, events.

Every state change is one `BEGIN IMMEDIATE` transaction, so a crash, a dead server or Ctrl-C never
leaves half a change behind, and one writer process (the bench) can share the file with any number of
readers (a scoring terminal, a live report). The ledger holds no episode payloads, only their paths.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from spabench.errors import ConfigError, DataError, SpabenchError
from spabench.ledger.schema import (
    DDL,
    FINISH_STATUSES,
    OUTCOME_COLUMNS,
    SCHEMA_VERSION,
    STOP_REASONS,
    TRIAL_COLUMNS,
    AttemptRow,
    ScoreRow,
    TrialRow,
)
from spabench.suite.vocabulary import (
    CONDITIONS,
    FAILURE_MODES,
    INSTRUCTION_VARIANTS,
    SCENE_CONDITIONS,
    TASKS,
)

# Failure modes the protocol restricts to some tasks / conditions.
_MODE_CONDITIONS = {"unnecessary_intervention": ("no_intervention", "no_movement")}
_MODE_TASKS = {"wrong_instance": ("object_state", "referential_description")}


class LedgerError(SpabenchError):
    """An operation the campaign's current state does not allow (unknown id, wrong status)."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):          # numpy arrays and scalars
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True)


def _is_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    import numpy as np

    return isinstance(value, np.bool_)


def validate_plan(rows: Iterable[TrialRow | Mapping[str, Any]], source: str = "plan") -> list[TrialRow]:
    """Plan rows as TrialRows, or one DataError naming the row, field and allowed values."""
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
        checks = (
            ("task", row.task, TASKS),
            ("condition", row.condition, CONDITIONS),
            ("scene_condition", row.scene_condition, SCENE_CONDITIONS),
            ("instruction_variant", row.instruction_variant, INSTRUCTION_VARIANTS),
        )
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


class Ledger:
    """One campaign's SQLite ledger. Use `Ledger.create` once (planner), then `Ledger.open`."""

    FILENAME = "ledger.sqlite"

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool):
        self.path = path
        self._conn = conn
        self._readonly = readonly
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
        if readonly:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=30.0)
        else:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
        if not readonly:
            conn.execute("PRAGMA synchronous = FULL")   # a committed attempt survives a power cut
        return conn

    @classmethod
    def create(cls, path: str | os.PathLike, plan_rows: Iterable[TrialRow | Mapping[str, Any]],
               config_hash: str, meta: Mapping[str, Any] | None = None) -> Ledger:
        """Write a new ledger holding the plan; refuses to touch an existing one.

        The file is built as `<path>.partial` and linked into place only when complete, so a failed
        plan never leaves a half-written ledger behind.
        """
        path = Path(path)
        if path.exists():
            raise ConfigError(cls._exists_message(path))
        if not isinstance(config_hash, str) or not config_hash:
            raise ConfigError(f"{path}: config_hash must be a non-empty string")
        rows = validate_plan(plan_rows, source=f"{path} (plan)")
        if not rows:
            raise DataError(f"{path} (plan)", "the plan holds no trials")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".partial")
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)
        all_meta = dict(meta or {})
        all_meta.update(schema_version=SCHEMA_VERSION, config_hash=config_hash, created_at=_now(),
                        n_trials=len(rows))
        all_meta.setdefault("campaign", "")
        conn = cls._connect(tmp)
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise LedgerError(f"{path}: SQLite refused WAL mode (got {mode}); "
                                  "put the campaign on a local file system")
            conn.executescript(DDL)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                             [(k, _dumps(v)) for k, v in sorted(all_meta.items())])
            cols = ", ".join(f'"{c}"' for c in TRIAL_COLUMNS)
            marks = ", ".join("?" for _ in TRIAL_COLUMNS)
            conn.executemany(
                f"INSERT INTO trials ({cols}) VALUES ({marks})",
                [tuple(int(v) if isinstance(v, bool) else v for v in (getattr(r, c) for c in TRIAL_COLUMNS))
                 for r in rows],
            )
            cls._insert_event(conn, None, "campaign_planned",
                              {"n_trials": len(rows), "config_hash": config_hash})
            conn.execute("COMMIT")
        except BaseException:
            conn.close()
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)
            raise
        conn.close()
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

    @staticmethod
    def _exists_message(path: Path) -> str:
        campaign = ""
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            row = conn.execute("SELECT value FROM meta WHERE key = 'campaign'").fetchone()
            conn.close()
            campaign = f" (campaign {json.loads(row[0])!r})" if row else ""
        except (sqlite3.Error, ValueError):
            pass
        folder = path.parent
        return (f"{path} already exists{campaign}: a campaign is already planned in {folder}. "
                f"Resume it with `spabench run campaign={folder}`, or plan into a new folder (out=<new dir>); "
                "an existing ledger is never overwritten")

    @classmethod
    def open(cls, path: str | os.PathLike, expect_hash: str | None = None, readonly: bool = False) -> Ledger:
        """Open an existing ledger; with `expect_hash`, refuse one planned from a different config."""
        path = Path(path)
        if path.is_dir():
            path = path / cls.FILENAME
        if not path.is_file():
            raise ConfigError(f"{path}: no campaign ledger here; plan one first with "
                              "`spabench plan campaign=<name> out=<dir>`")
        try:
            conn = cls._connect(path, readonly=readonly)
            rows = conn.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.DatabaseError as exc:
            raise DataError(path, f"not a spabench ledger ({exc})") from None
        meta = {r["key"]: json.loads(r["value"]) for r in rows}
        if meta.get("schema_version") != SCHEMA_VERSION:
            conn.close()
            raise DataError(path, f"ledger schema version {meta.get('schema_version')!r} is not supported",
                            field="schema_version", allowed=[SCHEMA_VERSION])
        if expect_hash is not None and meta.get("config_hash") != expect_hash:
            conn.close()
            name = meta.get("campaign") or "?"
            raise ConfigError(
                f"{path}: campaign '{name}' was planned with config hash {str(meta.get('config_hash'))[:12]}, "
                f"but the current campaign config and scene files hash to {expect_hash[:12]}. The suite "
                f"(tasks/, hardware/bench.yaml) or conf/campaign/{name}.yaml changed since planning, so "
                "resuming would break scene matching across policies. Restore the files the campaign was "
                "planned with (e.g. check out the planning commit), or plan a new campaign into a new "
                f"folder: `spabench plan campaign={name} out=<new dir>`"
            )
        return cls(path, conn, readonly)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; BEGIN IMMEDIATE takes the write lock up front (no upgrade deadlock)."""
        if self._readonly:
            raise LedgerError(f"{self.path}: opened read-only")
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    @staticmethod
    def _insert_event(conn: sqlite3.Connection, attempt_id: str | None, kind: str,
                      payload: Mapping[str, Any]) -> int:
        cur = conn.execute("INSERT INTO events (attempt_id, t, kind, payload) VALUES (?, ?, ?, ?)",
                           (attempt_id, _now(), kind, _dumps(dict(payload))))
        return int(cur.lastrowid)

    @staticmethod
    def _trial(row: sqlite3.Row) -> TrialRow:
        return TrialRow.from_mapping(row)

    @staticmethod
    def _attempt(row: sqlite3.Row) -> AttemptRow:
        return AttemptRow(**{k: row[k] for k in row.keys() if k in AttemptRow.__dataclass_fields__})

    def _attempt_row(self, conn: sqlite3.Connection, attempt_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM attempts WHERE attempt_id = ?", (attempt_id,)).fetchone()
        if row is None:
            raise LedgerError(f"{self.path}: unknown attempt_id {attempt_id!r}")
        return row

    # ------------------------------------------------------------------ meta and plan
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
        return self._query("PRAGMA journal_mode")[0][0]

    def trials(self) -> list[TrialRow]:
        return [self._trial(r) for r in self._query('SELECT * FROM trials ORDER BY "order"')]

    def trial(self, trial_id: str) -> TrialRow:
        rows = self._query("SELECT * FROM trials WHERE trial_id = ?", (trial_id,))
        if not rows:
            raise LedgerError(f"{self.path}: unknown trial_id {trial_id!r}")
        return self._trial(rows[0])

    _PENDING = ('SELECT t.* FROM trials t WHERE NOT EXISTS (SELECT 1 FROM attempts a '
                "WHERE a.trial_id = t.trial_id AND a.status = 'complete') ORDER BY t.\"order\"")

    def next_trial(self) -> TrialRow | None:
        """The lowest-order trial without a complete attempt (invalid attempts are re-run)."""
        rows = self._query(self._PENDING + " LIMIT 1")
        return self._trial(rows[0]) if rows else None

    def pending_trials(self) -> list[TrialRow]:
        return [self._trial(r) for r in self._query(self._PENDING)]

    # ------------------------------------------------------------------ attempts
    def begin_attempt(self, trial_id: str, episode_path: str | os.PathLike | None = None) -> str:
        """Start an attempt (status running) and return its id, e.g. 'E0137-P2-a1'."""
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM trials WHERE trial_id = ?", (trial_id,)).fetchone() is None:
                raise LedgerError(f"{self.path}: unknown trial_id {trial_id!r}")
            done = conn.execute("SELECT attempt_id FROM attempts WHERE trial_id = ? AND status = 'complete'",
                                (trial_id,)).fetchone()
            if done is not None:
                raise LedgerError(f"{self.path}: trial {trial_id} already has a complete attempt "
                                  f"({done['attempt_id']}); it is not run again")
            running = conn.execute("SELECT attempt_id FROM attempts WHERE status = 'running'").fetchone()
            if running is not None:
                raise LedgerError(f"{self.path}: attempt {running['attempt_id']} is still running; finish it "
                                  "or call mark_interrupted() when resuming after a crash")
            n = conn.execute("SELECT COUNT(*) FROM attempts WHERE trial_id = ?", (trial_id,)).fetchone()[0]
            attempt_id = f"{trial_id}-a{n + 1}"
            path = None if episode_path is None else str(episode_path)
            conn.execute("INSERT INTO attempts (attempt_id, trial_id, status, started_at, episode_path) "
                         "VALUES (?, ?, 'running', ?, ?)", (attempt_id, trial_id, _now(), path))
            self._insert_event(conn, attempt_id, "attempt_started", {"trial_id": trial_id, "episode_path": path})
        return attempt_id

    def finish_attempt(self, attempt_id: str, status: str, stop_reason: str | None,
                       episode_path: str | os.PathLike | None = None, *,
                       invalid_reason: str | None = None) -> None:
        """End a running attempt as 'complete' (to be scored) or 'invalid' (to be re-run)."""
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
        with self._write() as conn:
            row = self._attempt_row(conn, attempt_id)
            if row["status"] != "running":
                raise LedgerError(f"{self.path}: attempt {attempt_id} is {row['status']}, not running")
            path = None if episode_path is None else str(episode_path)
            conn.execute("UPDATE attempts SET status = ?, ended_at = ?, stop_reason = ?, invalid_reason = ?, "
                         "episode_path = COALESCE(?, episode_path) WHERE attempt_id = ?",
                         (status, _now(), stop_reason, invalid_reason, path, attempt_id))
            self._insert_event(conn, attempt_id, "attempt_finished",
                               {"status": status, "stop_reason": stop_reason, "invalid_reason": invalid_reason})

    def mark_interrupted(self) -> list[str]:
        """On resume: every attempt still 'running' becomes invalid ('interrupted'); returns their ids."""
        with self._write() as conn:
            ids = [r["attempt_id"] for r in
                   conn.execute("SELECT attempt_id FROM attempts WHERE status = 'running' ORDER BY started_at")]
            now = _now()
            for attempt_id in ids:
                conn.execute("UPDATE attempts SET status = 'invalid', ended_at = ?, stop_reason = 'interrupted', "
                             "invalid_reason = 'interrupted' WHERE attempt_id = ?", (now, attempt_id))
                self._insert_event(conn, attempt_id, "attempt_interrupted", {})
        return ids

    def attempt(self, attempt_id: str) -> AttemptRow:
        with self._lock:
            return self._attempt(self._attempt_row(self._conn, attempt_id))

    def attempts_for(self, trial_id: str) -> list[AttemptRow]:
        return [self._attempt(r) for r in self._query(
            "SELECT * FROM attempts WHERE trial_id = ? ORDER BY started_at, rowid", (trial_id,))]

    def unscored_attempts(self) -> list[AttemptRow]:
        """Complete attempts without any score, in plan order."""
        return [self._attempt(r) for r in self._query(
            "SELECT a.* FROM attempts a JOIN trials t USING (trial_id) WHERE a.status = 'complete' "
            "AND NOT EXISTS (SELECT 1 FROM scores s WHERE s.attempt_id = a.attempt_id) "
            'ORDER BY t."order", a.started_at')]

    def first_complete_attempt(self, evaluation_id: str) -> AttemptRow | None:
        """The earliest complete attempt of an evaluation (any policy): the operator's reference."""
        rows = self._query(
            "SELECT a.* FROM attempts a JOIN trials t USING (trial_id) WHERE t.evaluation_id = ? "
            "AND a.status = 'complete' ORDER BY a.episode_path IS NULL, a.ended_at, a.rowid LIMIT 1",
            (evaluation_id,))
        return self._attempt(rows[0]) if rows else None

    # ------------------------------------------------------------------ scores and events
    def record_score(self, attempt_id: str, rater: str, success: bool, failure_mode: str | None = None,
                     note: str = "", *, replace: bool = False) -> None:
        """The binary outcome of a complete attempt; failure_mode annotates failures only."""
        where = f"{self.path}: score for {attempt_id}"
        if not _is_bool(success):
            raise LedgerError(f"{where}: success must be a bool, got {success!r}")
        success = bool(success)
        if failure_mode is not None and failure_mode not in FAILURE_MODES:
            raise LedgerError(f"{where}: failure_mode {failure_mode!r} (allowed: {', '.join(FAILURE_MODES)})")
        if success and failure_mode is not None:
            raise LedgerError(f"{where}: a successful attempt has no failure_mode (got {failure_mode!r})")
        if not isinstance(rater, str) or not rater.strip():
            raise LedgerError(f"{where}: rater must be a non-empty string")
        with self._write() as conn:
            row = self._attempt_row(conn, attempt_id)
            if row["status"] != "complete":
                raise LedgerError(f"{where}: attempt is {row['status']}; only complete attempts are scored "
                                  "(invalid attempts are re-run, never failures)")
            trial = conn.execute("SELECT task, condition FROM trials WHERE trial_id = ?",
                                 (row["trial_id"],)).fetchone()
            if failure_mode in _MODE_CONDITIONS and trial["condition"] not in _MODE_CONDITIONS[failure_mode]:
                raise LedgerError(f"{where}: failure_mode {failure_mode!r} is for conditions "
                                  f"{', '.join(_MODE_CONDITIONS[failure_mode])} only (trial is {trial['condition']})")
            if failure_mode in _MODE_TASKS and trial["task"] not in _MODE_TASKS[failure_mode]:
                raise LedgerError(f"{where}: failure_mode {failure_mode!r} is for tasks "
                                  f"{', '.join(_MODE_TASKS[failure_mode])} only (trial is {trial['task']})")
            existing = conn.execute("SELECT 1 FROM scores WHERE attempt_id = ? AND rater = ?",
                                    (attempt_id, rater)).fetchone()
            values = (int(success), failure_mode, note or "", _now(), attempt_id, rater)
            if existing is not None:
                if not replace:
                    raise LedgerError(f"{where}: already scored by rater {rater!r}; pass replace=True to correct it")
                conn.execute("UPDATE scores SET success = ?, failure_mode = ?, note = ?, scored_at = ? "
                             "WHERE attempt_id = ? AND rater = ?", values)
            else:
                conn.execute("INSERT INTO scores (success, failure_mode, note, scored_at, attempt_id, rater) "
                             "VALUES (?, ?, ?, ?, ?, ?)", values)
            self._insert_event(conn, attempt_id, "scored" if existing is None else "rescored",
                               {"rater": rater, "success": success, "failure_mode": failure_mode})

    def scores_for(self, attempt_id: str) -> list[ScoreRow]:
        return [ScoreRow(r["attempt_id"], r["rater"], bool(r["success"]), r["failure_mode"], r["note"],
                         r["scored_at"])
                for r in self._query("SELECT * FROM scores WHERE attempt_id = ? ORDER BY rowid", (attempt_id,))]

    def log_event(self, attempt_id: str | None, kind: str, payload: Mapping[str, Any] | None = None) -> int:
        """Append one audit event (its own transaction); returns the event id."""
        if not isinstance(kind, str) or not kind:
            raise LedgerError(f"{self.path}: event kind must be a non-empty string")
        try:
            _dumps(dict(payload or {}))
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"{self.path}: event {kind!r} payload is not JSON-serialisable: {exc}") from None
        with self._write() as conn:
            if attempt_id is not None:
                self._attempt_row(conn, attempt_id)
            return self._insert_event(conn, attempt_id, kind, payload or {})

    def events(self, attempt_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM events WHERE 1 = 1", []
        if attempt_id is not None:
            sql, params = sql + " AND attempt_id = ?", params + [attempt_id]
        if kind is not None:
            sql, params = sql + " AND kind = ?", params + [kind]
        return [{"event_id": r["event_id"], "attempt_id": r["attempt_id"], "t": r["t"], "kind": r["kind"],
                 "payload": json.loads(r["payload"])} for r in self._query(sql + " ORDER BY event_id", tuple(params))]

    # ------------------------------------------------------------------ summaries
    def progress(self) -> dict[str, int]:
        r = self._query(
            "SELECT (SELECT COUNT(*) FROM trials) AS trials, "
            "(SELECT COUNT(DISTINCT trial_id) FROM attempts WHERE status = 'complete') AS complete, "
            "(SELECT COUNT(*) FROM attempts WHERE status = 'running') AS running, "
            "(SELECT COUNT(*) FROM attempts WHERE status = 'invalid') AS invalid_attempts, "
            "(SELECT COUNT(*) FROM attempts a WHERE status = 'complete' AND NOT EXISTS "
            " (SELECT 1 FROM scores s WHERE s.attempt_id = a.attempt_id)) AS unscored")[0]
        out = {k: int(r[k]) for k in r.keys()}
        out["pending"] = out["trials"] - out["complete"]
        return out

    def outcomes(self):
        """One row per finished attempt: complete+scored (valid) and invalid (valid=False, success=False).

        Complete attempts without a score are not outcomes yet (see `unscored_attempts`). With several
        raters the first to score an attempt is the primary rating.
        """
        import pandas as pd

        rows = self._query(
            "SELECT t.policy, t.task, t.condition, t.evaluation_id, s.success, t.matched_group, "
            "t.instruction_variant, s.failure_mode, a.status, t.trial_id, a.attempt_id, a.episode_path, "
            "t.alias, t.scene_id, t.cell, t.withheld, a.stop_reason, a.invalid_reason, s.rater "
            "FROM attempts a JOIN trials t USING (trial_id) "
            "LEFT JOIN (SELECT * FROM scores WHERE rowid IN (SELECT MIN(rowid) FROM scores GROUP BY attempt_id)) s "
            "ON s.attempt_id = a.attempt_id "
            "WHERE a.status = 'invalid' OR (a.status = 'complete' AND s.attempt_id IS NOT NULL) "
            'ORDER BY t."order", a.started_at, a.rowid')
        records = []
        for r in rows:
            rec = {k: r[k] for k in r.keys() if k != "status"}
            valid = r["status"] == "complete"
            rec["valid"] = valid
            rec["success"] = bool(r["success"]) if valid else False
            rec["withheld"] = bool(r["withheld"])
            records.append(rec)
        frame = pd.DataFrame.from_records(records, columns=list(OUTCOME_COLUMNS))
        return frame.astype({"success": bool, "valid": bool, "withheld": bool})

