"""The campaign ledger on real SQLite: create/open, attempt lifecycle, scores, resume, concurrency."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from spabench.errors import ConfigError, DataError
from spabench.ledger import OUTCOME_COLUMNS, Ledger, LedgerError

HASH = "c0ffee" * 10 + "abcd"


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- create / open
def test_create_and_open_round_trip(ledger, plan_rows):
    path = ledger.path
    ledger.close()
    with Ledger.open(path, expect_hash=HASH) as again:
        assert again.trials() == plan_rows
        meta = again.meta()
        assert meta["campaign"] == "unit" and meta["config_hash"] == HASH and meta["n_trials"] == 8
        assert again.aliases() == {"pi05": "P2", "vla0": "P1"}
        assert again.trial("E0003-P1").condition == "no_intervention"
    with Ledger.open(path.parent) as by_dir:            # the campaign folder works too
        assert by_dir.next_trial().trial_id == "E0001-P2"


def test_open_refuses_a_changed_config_hash(ledger):
    path = ledger.path
    ledger.close()
    with pytest.raises(ConfigError) as info:
        Ledger.open(path, expect_hash="0" * 64)
    text = str(info.value)
    assert "campaign 'unit'" in text and "spabench plan campaign=unit" in text and str(path) in text


def test_open_missing_ledger(tmp_path):
    with pytest.raises(ConfigError, match="no campaign ledger"):
        Ledger.open(tmp_path / "nothing" / "ledger.sqlite")


def test_open_rejects_a_foreign_sqlite_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    conn.commit()
    conn.close()
    with pytest.raises(DataError, match="schema_version"):
        Ledger.open(path)


def test_create_refuses_to_overwrite(ledger, plan_rows):
    path = ledger.path
    ledger.close()
    before = _sha(path)
    with pytest.raises(ConfigError) as info:
        Ledger.create(path, plan_rows[:2], "f" * 64, {"campaign": "other"})
    assert "already exists" in str(info.value) and "campaign 'unit'" in str(info.value)
    assert _sha(path) == before
    assert not path.with_name("ledger.sqlite.partial").exists()


@pytest.mark.parametrize("field, value, allowed", [
    ("condition", "oodd", "paraphrase_direct"),
    ("task", "juggling", "counting"),
    ("instruction_variant", "rephrased", "original, paraphrase"),
])
def test_create_rejects_bad_plan_rows(tmp_path, plan_rows, field, value, allowed):
    rows = [r.as_dict() for r in plan_rows]
    rows[3][field] = value
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(DataError) as info:
        Ledger.create(path, rows, HASH)
    text = str(info.value)
    assert "row 3" in text and f"field '{field}'" in text and allowed in text
    assert not path.exists() and not path.with_name("ledger.sqlite.partial").exists()


def test_create_rejects_duplicate_trial_ids(tmp_path, plan_rows):
    rows = [r.as_dict() for r in plan_rows]
    rows[5]["trial_id"] = rows[0]["trial_id"]
    with pytest.raises(DataError, match="duplicate trial_id"):
        Ledger.create(tmp_path / "ledger.sqlite", rows, HASH)


# ---------------------------------------------------------------- pragmas and concurrency
def test_wal_mode_and_foreign_keys(ledger):
    assert ledger.journal_mode() == "wal"
    raw = sqlite3.connect(ledger.path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()
    assert ledger._query("PRAGMA foreign_keys")[0]["foreign_keys"] == 1
    with pytest.raises(sqlite3.IntegrityError), ledger._write() as conn:
        conn.execute("INSERT INTO attempts (attempt_id, trial_id, n, status) "
                     "VALUES ('x', 'no-such-trial', 1, 'running')")
    assert ledger.attempts_for("no-such-trial") == []


def test_reader_sees_committed_state_while_a_write_is_open(ledger):
    reader = Ledger.open(ledger.path, readonly=True)
    try:
        with ledger._write() as conn:
            conn.execute("INSERT INTO attempts (attempt_id, trial_id, n, status, started_at) "
                         "VALUES ('E0001-P2-a1', 'E0001-P2', 1, 'complete', '2026-01-01')")
            # the write transaction holds the lock; the reader is not blocked and sees the old state
            assert reader.next_trial().trial_id == "E0001-P2"
            assert reader.progress()["complete"] == 0
        assert reader.next_trial().trial_id == "E0001-P1"
        assert reader.progress()["complete"] == 1
        with pytest.raises(LedgerError, match="read-only"):
            reader.begin_attempt("E0001-P1")
    finally:
        reader.close()


def test_reader_in_this_process_while_a_writer_process_runs(ledger):
    """A second process runs attempts (its own writer); this process reads throughout without errors."""
    path = ledger.path
    ledger.close()
    script = textwrap.dedent(f"""
        from spabench.ledger import Ledger
        led = Ledger.open({str(path)!r})
        while (t := led.next_trial()) is not None:
            a = led.begin_attempt(t.trial_id)
            led.log_event(a, "tick", {{"n": 1}})
            led.finish_attempt(a, "complete", "timer", episode_path="episodes/" + a)
            led.record_score(a, "op", True)
        led.close()
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    seen = []
    with Ledger.open(path, readonly=True) as reader:
        while child.poll() is None:
            seen.append(reader.progress()["complete"])
        assert child.wait(timeout=60) == 0, child.stderr.read()
        seen.append(reader.progress()["complete"])
        assert seen == sorted(seen) and seen[-1] == 8
        assert len(reader.outcomes()) == 8 and reader.outcomes()["success"].all()


# ---------------------------------------------------------------- attempt lifecycle
def test_attempt_lifecycle(ledger):
    first = ledger.next_trial()
    assert first.trial_id == "E0001-P2" and first.order == 1
    a1 = ledger.begin_attempt(first.trial_id, episode_path="episodes/x")
    assert a1 == "E0001-P2-a1"
    assert ledger.attempt(a1).status == "running"
    with pytest.raises(LedgerError, match="still running"):
        ledger.begin_attempt("E0002-P1")
    ledger.finish_attempt(a1, "invalid", "fault", invalid_reason="policy server lost")
    row = ledger.attempt(a1)
    assert (row.status, row.stop_reason, row.invalid_reason, row.episode_path) == \
        ("invalid", "fault", "policy server lost", "episodes/x")
    # invalid is re-run, never a failure: the trial is still next
    assert ledger.next_trial().trial_id == "E0001-P2"
    assert len(ledger.pending_trials()) == 8
    a2 = ledger.begin_attempt(first.trial_id)
    assert a2 == "E0001-P2-a2"
    ledger.finish_attempt(a2, "complete", "timer", episode_path="episodes/E0001-P2-a2")
    assert ledger.attempt(a2).episode_path == "episodes/E0001-P2-a2"
    assert [a.attempt_id for a in ledger.attempts_for(first.trial_id)] == [a1, a2]
    assert ledger.next_trial().trial_id == "E0001-P1"
    assert len(ledger.pending_trials()) == 7
    with pytest.raises(LedgerError, match="already has a complete attempt"):
        ledger.begin_attempt(first.trial_id)
    with pytest.raises(LedgerError, match="not running"):
        ledger.finish_attempt(a2, "invalid", "abort", invalid_reason="late")
    assert [a.attempt_id for a in ledger.unscored_attempts()] == [a2]
    kinds = [e["kind"] for e in ledger.events()]
    assert kinds == ["campaign_planned", "attempt_started", "attempt_finished", "attempt_started",
                     "attempt_finished"]


@pytest.mark.parametrize("kwargs, message", [
    ({"status": "done", "stop_reason": "timer"}, "allowed: complete, invalid"),
    ({"status": "complete", "stop_reason": "bored"}, "allowed: timer"),
    ({"status": "invalid", "stop_reason": "fault"}, "needs an invalid_reason"),
    ({"status": "complete", "stop_reason": "timer", "invalid_reason": "x"}, "has no invalid_reason"),
])
def test_finish_attempt_validation(ledger, kwargs, message):
    a = ledger.begin_attempt("E0001-P2")
    with pytest.raises(LedgerError, match=message):
        ledger.finish_attempt(a, **kwargs)
    assert ledger.attempt(a).status == "running"


def test_unknown_ids(ledger):
    with pytest.raises(LedgerError, match="unknown trial_id"):
        ledger.begin_attempt("E9999-P1")
    with pytest.raises(LedgerError, match="unknown attempt_id"):
        ledger.finish_attempt("nope", "complete", "timer")
    with pytest.raises(LedgerError, match="unknown attempt_id"):
        ledger.log_event("nope", "x", {})


def test_mark_interrupted_after_a_hard_crash(ledger):
    """A child process starts an attempt and dies without cleanup; resume marks it invalid."""
    path = ledger.path
    ledger.close()
    script = (f"import os; from spabench.ledger import Ledger; led = Ledger.open({str(path)!r}); "
              "print(led.begin_attempt('E0001-P2'), flush=True); os._exit(9)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 9, result.stderr
    crashed = result.stdout.strip()
    with Ledger.open(path, expect_hash=HASH, lock=True) as led:   # mark_interrupted needs the lock
        assert led.attempt(crashed).status == "running"
        assert led.mark_interrupted() == [crashed]
        row = led.attempt(crashed)
        assert (row.status, row.invalid_reason, row.stop_reason) == ("invalid", "interrupted", "interrupted")
        assert row.ended_at is not None
        assert led.mark_interrupted() == []
        assert led.next_trial().trial_id == "E0001-P2"
        assert led.begin_attempt("E0001-P2") == "E0001-P2-a2"
        assert [e["kind"] for e in led.events(attempt_id=crashed)] == ["attempt_started", "attempt_interrupted"]


# ---------------------------------------------------------------- scores and events
def _complete(ledger, trial_id, path=None):
    a = ledger.begin_attempt(trial_id)
    ledger.finish_attempt(a, "complete", "timer", episode_path=path or f"episodes/{trial_id}")
    return a


def test_record_score_validation(ledger):
    a = _complete(ledger, "E0001-P2")
    with pytest.raises(LedgerError, match="allowed: wrong_target"):
        ledger.record_score(a, "op", False, "dropped_it")
    with pytest.raises(LedgerError, match="must be a bool"):
        ledger.record_score(a, "op", 1)
    with pytest.raises(LedgerError, match="no failure_mode"):
        ledger.record_score(a, "op", True, "grasp_failure")
    with pytest.raises(LedgerError, match="conditions no_intervention, no_movement only"):
        ledger.record_score(a, "op", False, "unnecessary_intervention")
    with pytest.raises(LedgerError, match="tasks object_state, referential_description only"):
        ledger.record_score(a, "op", False, "wrong_instance")
    assert ledger.scores_for(a) == []
    ledger.record_score(a, "op", np.bool_(False), "grasp_failure", "slipped")
    with pytest.raises(LedgerError, match="already scored.*needs a reason"):
        ledger.record_score(a, "op", True)
    ledger.record_score(a, "op", True, reason="replayed the video: it was in the bowl")
    ledger.record_score(a, "second_rater", False, "timeout_or_incomplete")
    scores = ledger.scores_for(a)
    assert [(s.rater, s.success, s.failure_mode) for s in scores] == \
        [("op", True, None), ("second_rater", False, "timeout_or_incomplete")]
    # invalid attempts are never scored
    bad = ledger.begin_attempt("E0001-P1")
    ledger.finish_attempt(bad, "invalid", "estop", invalid_reason="operator e-stop")
    with pytest.raises(LedgerError, match="only complete attempts are scored"):
        ledger.record_score(bad, "op", False, "no_action")
    ni = _complete(ledger, "E0003-P2")
    ledger.record_score(ni, "op", False, "unnecessary_intervention")


def test_log_event_payloads(ledger):
    a = ledger.begin_attempt("E0001-P2")
    eid = ledger.log_event(a, "clamp", {"joint": "elbow_flex", "target": np.float64(3.5),
                                        "sent": np.array([1.0, 2.0])})
    ledger.log_event(None, "operator_note", {"text": "lamp flickered"})
    with pytest.raises(LedgerError, match="not JSON-serialisable"):
        ledger.log_event(a, "bad", {"obj": object()})
    clamp = ledger.events(kind="clamp")
    assert clamp[0]["event_id"] == eid and clamp[0]["attempt_id"] == a
    assert clamp[0]["payload"] == {"joint": "elbow_flex", "target": 3.5, "sent": [1.0, 2.0]}
    assert ledger.events(kind="operator_note")[0]["attempt_id"] is None
    assert ledger.events(kind="bad") == []


def test_first_complete_attempt_is_the_reference(ledger):
    assert ledger.first_complete_attempt("E0001") is None
    bad = ledger.begin_attempt("E0001-P2")
    ledger.finish_attempt(bad, "invalid", "fault", invalid_reason="camera lost", episode_path="episodes/bad")
    assert ledger.first_complete_attempt("E0001") is None
    first = _complete(ledger, "E0001-P1", "episodes/E0001-P1-a1")
    _complete(ledger, "E0001-P2", "episodes/E0001-P2-a2")
    ref = ledger.first_complete_attempt("E0001")
    assert ref.attempt_id == first and ref.episode_path == "episodes/E0001-P1-a1"
    assert ledger.first_complete_attempt("E0002") is None


def test_outcomes_round_trip(ledger, tmp_path):
    recorded = {}
    # E0001: P2 invalid then success; P1 failure
    bad = ledger.begin_attempt("E0001-P2")
    ledger.finish_attempt(bad, "invalid", "fault", invalid_reason="server lost")
    a = _complete(ledger, "E0001-P2")
    ledger.record_score(a, "op", True)
    recorded[a] = (True, None)
    b = _complete(ledger, "E0001-P1")
    ledger.record_score(b, "op", False, "wrong_target", "took the pepsi can")
    recorded[b] = (False, "wrong_target")
    # E0002-P2 complete but not yet scored: not an outcome
    _complete(ledger, "E0002-P2")
    # E0004-P1 paraphrase, failure without annotation
    c = _complete(ledger, "E0004-P1")
    ledger.record_score(c, "op", False)
    recorded[c] = (False, None)
    # a running attempt is not an outcome either
    ledger.begin_attempt("E0003-P1")

    frame = ledger.outcomes()
    assert list(frame.columns) == list(OUTCOME_COLUMNS)
    assert frame["success"].dtype == bool and frame["valid"].dtype == bool
    assert list(frame["attempt_id"]) == [bad, a, b, c]
    invalid = frame[~frame["valid"]]
    assert list(invalid["attempt_id"]) == [bad] and not invalid["success"].any()
    assert invalid.iloc[0]["invalid_reason"] == "server lost"
    for _, row in frame[frame["valid"]].iterrows():
        assert (row["success"], row["failure_mode"]) == recorded[row["attempt_id"]]
        trial = ledger.trial(row["trial_id"])
        assert (row["policy"], row["task"], row["condition"], row["evaluation_id"], row["alias"],
                row["instruction_variant"], row["matched_group"]) == \
            (trial.policy, trial.task, trial.condition, trial.evaluation_id, trial.alias,
             trial.instruction_variant, trial.matched_group)
    assert frame.set_index("attempt_id").loc[c, "instruction_variant"] == "paraphrase"
    assert frame.set_index("attempt_id").loc[a, "matched_group"] == "counting-mg000"
    # CSV round trip (the outcomes-CSV schema)
    csv = tmp_path / "outcomes.csv"
    frame.to_csv(csv, index=False)
    back = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    assert list(back.columns) == list(OUTCOME_COLUMNS)
    assert list(back["success"]) == list(frame["success"]) and list(back["valid"]) == list(frame["valid"])
    assert list(back["attempt_id"]) == list(frame["attempt_id"])


def test_progress_counts(ledger):
    a = _complete(ledger, "E0001-P2")
    ledger.record_score(a, "op", True)
    _complete(ledger, "E0001-P1")
    bad = ledger.begin_attempt("E0002-P2")
    ledger.finish_attempt(bad, "invalid", "abort", invalid_reason="operator abort")
    ledger.begin_attempt("E0002-P2")
    assert ledger.progress() == {"trials": 8, "complete": 2, "running": 1, "invalid_attempts": 1,
                                 "unscored": 1, "pending": 6}
