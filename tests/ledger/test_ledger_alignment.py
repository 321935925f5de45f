"""The scene alignment at "scene ready" and a person's reason to start below the threshold are stored
with the attempt (columns added after the schema's release: a ledger planned before gets them at its
next writable open; until then a reader sees NULL, and a copy of it still compares equal)."""

from __future__ import annotations

import sqlite3

import pytest

from spabench.ledger import Ledger, LedgerError
from spabench.ledger.copy import copy_ledger


def test_alignment_and_override_are_stored_with_the_attempt_on_both_back_ends(any_ledger):
    a1 = any_ledger.begin_attempt("E0001-P2", alignment=0.5, alignment_override="  reference lamp moved  ")
    any_ledger.finish_attempt(a1, "complete", "timer", episode_path="episodes/x")
    a2 = any_ledger.begin_attempt("E0001-P1", alignment=0.93)
    row1, row2 = any_ledger.attempt(a1), any_ledger.attempt(a2)
    assert (row1.alignment, row1.alignment_override) == (0.5, "reference lamp moved")
    assert (row2.alignment, row2.alignment_override) == (0.93, None)
    started = any_ledger.events(a1, "attempt_started")[0]["payload"]
    assert started["alignment"] == 0.5 and started["alignment_override"] == "reference lamp moved"


@pytest.mark.parametrize("bad", [{"alignment": 1.5}, {"alignment": "0.5"}, {"alignment_override": "   "},
                                 {"alignment_override": 3}])
def test_a_bad_alignment_or_reason_is_refused_before_anything_is_written(ledger, bad):
    with pytest.raises(LedgerError, match="begin_attempt"):
        ledger.begin_attempt("E0001-P2", **bad)
    assert ledger.attempts_for("E0001-P2") == []


def _drop_columns(path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE attempts DROP COLUMN alignment_override")
        conn.execute("ALTER TABLE attempts DROP COLUMN alignment")


def _columns(path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[1] for r in conn.execute("PRAGMA table_info(attempts)")]


def test_a_ledger_planned_before_the_columns_gets_them_at_its_next_run(ledger, tmp_path):
    path = ledger.path
    old = ledger.begin_attempt("E0001-P2")
    ledger.finish_attempt(old, "complete", "timer", episode_path="episodes/x")
    ledger.close()
    _drop_columns(path)
    with Ledger.open(path, readonly=True) as ro:       # a reader never writes, and reads NULL
        assert ro.attempt(old).alignment is None and ro.attempt(old).alignment_override is None
        result = copy_ledger(path.parent, tmp_path / "copy")   # the copy has the columns, empty
    assert result.rows["attempts"] == 1
    assert "alignment" not in _columns(path)
    with Ledger.open(path) as rw:
        assert _columns(path)[-2:] == ["alignment", "alignment_override"]
        a = rw.begin_attempt("E0001-P1", alignment=0.41, alignment_override="cup from the other set")
        assert (rw.attempt(a).alignment, rw.attempt(a).alignment_override) == (0.41, "cup from the other set")
        assert rw.attempt(old).alignment is None
