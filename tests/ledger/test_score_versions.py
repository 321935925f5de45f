"""Optimistic concurrency on scores: a save carries the version of the rater's scores it was based
on; a save against an older version writes nothing and says what was saved meanwhile. On SQLite and
PostgreSQL, with separate connections racing."""

from __future__ import annotations

import threading

import pytest

from spabench.ledger import Ledger, LedgerError, ScoreConflict


@pytest.fixture
def ledger(any_ledger):
    return any_ledger


def _complete(ledger: Ledger, trial_id: str) -> str:
    a = ledger.begin_attempt(trial_id)
    ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
    return a


def test_a_stale_save_is_refused_and_names_the_score_saved_meanwhile(ledger):
    a = _complete(ledger, "E0001-P2")
    assert ledger.score_version(a, "op") == 0
    ledger.record_score(a, "op", True, note="tab one", expect_version=0)           # tab one
    with pytest.raises(ScoreConflict, match="nothing was written") as info:        # tab two saw version 0
        ledger.record_score(a, "op", False, "grasp_failure", "tab two", expect_version=0)
    assert info.value.version == 1 and info.value.rater == "op"
    assert (info.value.current.success, info.value.current.note) == (True, "tab one")
    assert [(s.success, s.note) for s in ledger.score_history(a)] == [(True, "tab one")]
    assert len(ledger.events(a, "scored")) == 1 and not ledger.events(a, "rescored")
    # tab two re-scores deliberately, against the version it was shown: a correction with a reason
    with pytest.raises(LedgerError, match="needs a reason"):
        ledger.record_score(a, "op", False, "grasp_failure", "tab two", expect_version=1)
    ledger.record_score(a, "op", False, "grasp_failure", "tab two", reason="slipped at 4 s", expect_version=1)
    assert ledger.score_version(a, "op") == 2
    assert [(s.success, s.superseded_at is None) for s in ledger.score_history(a)] == [(True, False), (False, True)]


def test_versions_are_per_rater(ledger):
    a = _complete(ledger, "E0001-P2")
    ledger.record_score(a, "op", True, expect_version=0)
    ledger.record_score(a, "rater2", False, "wrong_target", expect_version=0)      # not a conflict: another rater
    assert (ledger.score_version(a, "op"), ledger.score_version(a, "rater2")) == (1, 1)
    ledger.record_score(a, "op", True, reason="unchanged, checked again")           # no version: as before
    assert ledger.score_version(a, "op") == 2


@pytest.mark.parametrize("bad", [-1, True, 1.0, "0"])
def test_a_bad_version_is_refused_before_anything_is_written(ledger, bad):
    a = _complete(ledger, "E0001-P2")
    with pytest.raises(LedgerError, match="expect_version must be a count"):
        ledger.record_score(a, "op", True, expect_version=bad)
    assert ledger.score_history(a) == []


def test_racing_tabs_on_separate_connections_keep_exactly_one_score(ledger):
    """Six connections save a first score of one attempt at once: one is written, five are told."""
    a = _complete(ledger, "E0001-P2")
    opened = [Ledger.open(ledger.path) for _ in range(6)]
    barrier = threading.Barrier(len(opened))
    outcome: dict[int, str] = {}

    def save(i: int, led: Ledger) -> None:
        barrier.wait()
        try:
            led.record_score(a, "op", i % 2 == 0, None if i % 2 == 0 else "grasp_failure", f"tab {i}",
                             expect_version=0)
            outcome[i] = "saved"
        except ScoreConflict as exc:
            outcome[i] = f"conflict {exc.version}"

    threads = [threading.Thread(target=save, args=(i, led)) for i, led in enumerate(opened)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for led in opened:
            led.close()
    assert sorted(outcome.values()) == ["conflict 1"] * 5 + ["saved"]
    (winner,) = [i for i, v in outcome.items() if v == "saved"]
    (score,) = ledger.score_history(a)
    assert score.note == f"tab {winner}" and len(ledger.events(a, "scored")) == 1
