"""Attempt provenance columns, score history (corrections), operator invalidation, outcomes columns;
on both back ends."""

from __future__ import annotations

import pytest

from spabench.ledger import OUTCOME_COLUMNS, LedgerError


@pytest.fixture
def ledger(any_ledger):
    return any_ledger      # every test here runs on SQLite and on PostgreSQL


def _complete(ledger, trial_id, **kw):
    a = ledger.begin_attempt(trial_id, **kw)
    ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
    return a


def test_attempt_records_bench_operator_and_dry_run(ledger):
    a = _complete(ledger, "E0001-P2", bench_id="bench-a", bench_kind="so101", operator="terminal")
    b = ledger.begin_attempt("E0001-P1", dry_run=True)
    row = ledger.attempt(a)
    assert (row.bench_id, row.bench_kind, row.operator, row.dry_run, row.n) == ("bench-a", "so101", "terminal", False, 1)
    assert ledger.attempt(b).dry_run is True and ledger.attempt(b).bench_id is None
    started = ledger.events(a, "attempt_started")[0]["payload"]
    assert started["bench_id"] == "bench-a" and started["operator"] == "terminal"


def test_one_running_attempt_per_bench(ledger):
    ledger.begin_attempt("E0001-P2", bench_id="bench-a")
    with pytest.raises(LedgerError, match="still running"):
        ledger.begin_attempt("E0002-P2", bench_id="bench-a")
    ledger.begin_attempt("E0002-P2", bench_id="bench-b")   # another bench is another process


def test_a_correction_needs_a_reason_and_keeps_the_history(ledger):
    a = _complete(ledger, "E0001-P2")
    ledger.record_score(a, "op", False, "grasp_failure", "slipped")
    with pytest.raises(LedgerError, match="needs a reason"):
        ledger.record_score(a, "op", True)
    with pytest.raises(LedgerError, match="reason must be a non-empty string"):
        ledger.record_score(a, "op", True, reason="  ")
    ledger.record_score(a, "op", True, reason="video shows it in the bowl")
    ledger.record_score(a, "rater2", True)
    assert [(s.rater, s.success, s.reason) for s in ledger.scores_for(a)] == \
        [("op", True, "video shows it in the bowl"), ("rater2", True, None)]
    history = ledger.score_history(a)
    assert [(s.rater, s.success, s.failure_mode, s.superseded_at is None) for s in history] == \
        [("op", False, "grasp_failure", False), ("op", True, None, True), ("rater2", True, None, True)]
    assert history[0].superseded_at >= history[0].scored_at
    assert [e["payload"].get("reason") for e in ledger.events(a, "rescored")] == ["video shows it in the bowl"]
    out = ledger.outcomes().set_index("attempt_id").loc[a]
    assert (out["success"], out["rater"], out["scored_by_n"], out["corrections"]) == (True, "op", 2, 1)


def test_primary_rater_is_the_first_and_their_latest_score_counts(ledger):
    a = _complete(ledger, "E0001-P2")
    ledger.record_score(a, "op", True)
    ledger.record_score(a, "rater2", False, "wrong_target")
    assert bool(ledger.outcomes().set_index("attempt_id").loc[a, "success"]) is True
    ledger.record_score(a, "op", False, "wrong_target", reason="second look")
    row = ledger.outcomes().set_index("attempt_id").loc[a]
    assert (bool(row["success"]), row["failure_mode"], row["rater"]) == (False, "wrong_target", "op")


def test_invalidate_attempt(ledger):
    a = _complete(ledger, "E0001-P2", bench_id="b1", bench_kind="sim")
    ledger.record_score(a, "op", True)
    with pytest.raises(LedgerError, match="reason is required"):
        ledger.invalidate_attempt(a, " ", "op")
    ledger.invalidate_attempt(a, "wrong scene staged", "lead")
    row = ledger.attempt(a)
    assert row.status == "invalid" and row.invalid_reason == "operator_invalidated: wrong scene staged"
    assert [s.success for s in ledger.score_history(a)] == [True]          # kept
    assert ledger.events(a, "attempt_invalidated")[0]["payload"] == {"rater": "lead", "reason": "wrong scene staged"}
    assert "E0001-P2" in [t.trial_id for t in ledger.pending_trials()]       # re-run
    with pytest.raises(LedgerError, match="only complete attempts"):
        ledger.invalidate_attempt(a, "again", "lead")
    with pytest.raises(LedgerError, match="only complete attempts are scored"):
        ledger.record_score(a, "op", False, reason="late")
    out = ledger.outcomes().set_index("attempt_id").loc[a]
    assert (bool(out["valid"]), bool(out["success"]), out["bench_id"], out["bench_kind"]) == (False, False, "b1", "sim")
    again = ledger.begin_attempt("E0001-P2")
    assert again.endswith("-a2")


def test_outcomes_carry_the_new_columns(ledger):
    a = _complete(ledger, "E0001-P2", bench_id="b1", bench_kind="sim", dry_run=True)
    ledger.record_score(a, "auto", True)
    frame = ledger.outcomes()
    assert list(frame.columns) == list(OUTCOME_COLUMNS)
    for col in ("scored_by_n", "corrections", "bench_kind", "bench_id", "dry_run"):
        assert col in frame.columns
    assert frame["dry_run"].dtype == bool and bool(frame.iloc[0]["dry_run"]) is True
