"""The queries a session makes between two trials are answered through an index, not by scanning the
attempts once per trial (measured before: next_trial() 0.37 s and pending_trials() 0.27 s at 2,600
complete attempts, the plan reading attempts through attempts_status; benchmarks/ledger_queries.py)."""

from __future__ import annotations

import sqlite3

from spabench.ledger import Ledger

PENDING_PLAN = ('EXPLAIN QUERY PLAN SELECT t.* FROM trials t WHERE NOT EXISTS (SELECT 1 FROM attempts a '
                "WHERE a.trial_id = t.trial_id AND a.status = 'complete' AND a.dry_run = 0) ORDER BY t.\"order\" LIMIT 1")


def _plan(path) -> str:
    with sqlite3.connect(path) as conn:
        return " | ".join(str(row[-1]) for row in conn.execute(PENDING_PLAN))


def test_pending_trials_are_found_through_the_trial_and_status_index(ledger):
    assert Ledger._PENDING in PENDING_PLAN.replace("EXPLAIN QUERY PLAN ", "")  # the query the ledger runs
    path = ledger.path
    attempt = ledger.begin_attempt("E0001-P2")
    ledger.finish_attempt(attempt, "complete", "timer", episode_path=f"episodes/{attempt}")
    ledger.close()
    plan = _plan(path)
    assert "attempts_trial_status" in plan, plan


def test_a_ledger_planned_before_the_index_gets_it_at_its_next_run(ledger):
    path = ledger.path
    ledger.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX attempts_trial_status")
    assert "attempts_trial_status" not in _plan(path)
    with Ledger.open(path, readonly=True) as ro:       # a reader never writes to the file
        assert ro.next_trial() is not None
    assert "attempts_trial_status" not in _plan(path)
    Ledger.open(path).close()
    assert "attempts_trial_status" in _plan(path)
