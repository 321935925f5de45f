"""The ledger's tables and row records.

One campaign = one ledger (a SQLite file, or a schema in a PostgreSQL database). `trials` is the
frozen plan (written once by the planner); `attempts` are executions of a trial (a trial with only
invalid attempts is still pending: invalid is re-run, never a failure) and say which bench ran them,
under which operator; `scores` are the raters' binary outcome and failure mode per complete attempt,
with history (a correction supersedes the earlier row, which stays); `scene_sets` are the claim
units of several benches (every policy's trial of one evaluation id) with their leases; `events` is
an append-only audit log; `meta` holds the config hash and the blind aliases.

The DDL is written once for both back ends; `{serial}` and `{real}` are the only dialect words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

SCHEMA_VERSION = 2

ATTEMPT_STATUSES: tuple[str, ...] = ("planned", "running", "complete", "invalid")
FINISH_STATUSES: tuple[str, ...] = ("complete", "invalid")
# Why an attempt stopped: the rollout's EpisodeResult.stop_reason, plus 'interrupted' for attempts
# found still running when a campaign resumes after a crash or Ctrl-C.

DDL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL                -- JSON
);
CREATE TABLE trials (
    trial_id            TEXT PRIMARY KEY,
    evaluation_id       TEXT NOT NULL,
    policy              TEXT NOT NULL,
    card                TEXT NOT NULL,
    alias               TEXT NOT NULL,
    task                TEXT NOT NULL,
    condition           TEXT NOT NULL,
    scene_id            TEXT NOT NULL,
    scene_condition     TEXT NOT NULL,
    matched_group       TEXT,
    cell                TEXT NOT NULL,
    withheld            INTEGER NOT NULL CHECK (withheld IN (0, 1)),
    instruction         TEXT NOT NULL,
    instruction_variant TEXT NOT NULL CHECK (instruction_variant IN ('original', 'paraphrase')),
    timer_s             REAL NOT NULL CHECK (timer_s > 0),
    "order"             INTEGER NOT NULL UNIQUE,
    control_hz          REAL NOT NULL DEFAULT 30 CHECK (control_hz > 0),  -- i7: the trial's control rate
    UNIQUE (evaluation_id, policy)
);
CREATE INDEX trials_evaluation ON trials (evaluation_id);
CREATE TABLE attempts (
    attempt_id     TEXT PRIMARY KEY,
    trial_id       TEXT NOT NULL REFERENCES trials (trial_id),
    n              INTEGER NOT NULL CHECK (n >= 1),       -- attempt number within the trial (a1, a2, ...)
    status         TEXT NOT NULL CHECK (status IN ('planned', 'running', 'complete', 'invalid')),
    started_at     TEXT,
    ended_at       TEXT,
    episode_path   TEXT,                                  -- relative to the campaign folder on bench_id
    stop_reason    TEXT,
    invalid_reason TEXT,
    bench_id       TEXT,                                  -- which bench ran it (host name by default)
    bench_kind     TEXT,                                  -- bench type (so101, sim, ...): never pooled
    operator       TEXT,                                  -- who reset and ran it
    dry_run        INTEGER NOT NULL DEFAULT 0 CHECK (dry_run IN (0, 1)),
    alignment      {real},                                -- lowest scene alignment at "scene ready" (NULL: no reference)
    alignment_override TEXT,                              -- the person's reason to start below the threshold
    UNIQUE (trial_id, n),
    CHECK (status != 'invalid' OR invalid_reason IS NOT NULL)
);
CREATE INDEX attempts_trial ON attempts (trial_id);
CREATE INDEX attempts_status ON attempts (status);
CREATE INDEX attempts_trial_status ON attempts (trial_id, status);
CREATE TABLE scores (
    score_id      {serial},
    attempt_id    TEXT NOT NULL REFERENCES attempts (attempt_id),
    rater         TEXT NOT NULL,
    success       INTEGER NOT NULL CHECK (success IN (0, 1)),
    failure_mode  TEXT,
    note          TEXT NOT NULL DEFAULT '',
    scored_at     TEXT NOT NULL,
    reason        TEXT,                                   -- why a correction was made (NULL for a first score)
    superseded_at TEXT,                                   -- NULL: the rater's current score
    CHECK (success = 0 OR failure_mode IS NULL)
);
CREATE UNIQUE INDEX scores_current ON scores (attempt_id, rater) WHERE superseded_at IS NULL;
CREATE INDEX scores_attempt ON scores (attempt_id);
CREATE TABLE scene_sets (
    evaluation_id TEXT PRIMARY KEY,
    first_order   INTEGER NOT NULL,
    bench_id      TEXT,                                   -- the bench holding the claim (NULL: free)
    lease_expires {real},                                 -- epoch seconds on the ledger's clock
    claimed_at    TEXT
);
CREATE TABLE events (
    event_id   {serial},
    attempt_id TEXT REFERENCES attempts (attempt_id),
    t          TEXT NOT NULL,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL          -- JSON object
);
CREATE INDEX events_attempt ON events (attempt_id);
"""

# Indexes added to the version-2 schema after it was first released: every writable SQLite open
# creates those still missing (a ledger planned earlier gets them at its next run). Without
# attempts_trial_status, SQLite answered next_trial() through attempts_status, scanning every
# complete attempt per trial: 0.37 s at 2,600 attempts, between every two trials.
LATER_INDEXES: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS attempts_trial_status ON attempts (trial_id, status)",
)

# Columns added to the version-2 schema after it was first released, as (table, column, type with the
# DDL's dialect words): a writable open adds those still missing (at the end of the table, where the
# DDL also puts them), so a ledger planned earlier keeps working; until then its rows read as NULL.
LATER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("attempts", "alignment", "{real}"),
    ("attempts", "alignment_override", "TEXT"),
)


@dataclass(frozen=True)
class TrialRow:
    """One planned trial: one policy on one evaluation (a scene under a condition)."""

    trial_id: str
    evaluation_id: str
    policy: str
    card: str
    alias: str
    task: str
    condition: str
    scene_id: str
    scene_condition: str
    matched_group: str | None
    cell: str
    withheld: bool
    instruction: str
    instruction_variant: str
    timer_s: float
    order: int
    # i7 (issue 7): the planned control rate, beside timer_s (card value unless the campaign overrides)
    control_hz: float = 30.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> TrialRow:
        """Build from a dict-like row (plan CSV, sqlite3.Row); coerces the typed columns."""
        values = {f.name: row[f.name] for f in fields(cls) if f.name != "control_hz" or f.name in row}
        values["withheld"] = _as_bool(values["withheld"])
        values["timer_s"] = float(values["timer_s"])
        values["order"] = int(values["order"])
        if "control_hz" in values:
            values["control_hz"] = float(values["control_hz"])
        if values["matched_group"] in ("", None):
            values["matched_group"] = None
        return cls(**values)


TRIAL_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(TrialRow))


@dataclass(frozen=True)
class AttemptRow:
    attempt_id: str
    trial_id: str
    status: str
    started_at: str | None
    ended_at: str | None
    episode_path: str | None
    stop_reason: str | None
    invalid_reason: str | None
    bench_id: str | None = None
    bench_kind: str | None = None
    operator: str | None = None
    dry_run: bool = False
    n: int = 1
    alignment: float | None = None           # the lowest camera's scene alignment at "scene ready"
    alignment_override: str | None = None    # why it started below the threshold (a person's words)


@dataclass(frozen=True)
class ScoreRow:
    """One rater's score of one attempt; `superseded_at` is set once a correction replaced it."""

    attempt_id: str
    rater: str
    success: bool
    failure_mode: str | None
    note: str
    scored_at: str
    reason: str | None = None
    superseded_at: str | None = None


# The outcomes table (the analysis module's input; also the outcomes-CSV schema).
OUTCOME_COLUMNS: tuple[str, ...] = (
    "policy", "task", "condition", "evaluation_id", "success", "matched_group",
    "instruction_variant", "failure_mode", "valid",
    "trial_id", "attempt_id", "episode_path", "alias",
    "scene_id", "cell", "withheld", "stop_reason", "invalid_reason", "rater",
    "scored_by_n", "corrections", "bench_kind", "bench_id", "dry_run",
)
# Prefix of invalid_reason for a complete attempt a rater invalidated after the fact.
OPERATOR_INVALIDATED = "operator_invalidated"


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int,)) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")
