"""Finishing an attempt on a shared PostgreSQL ledger is one compare-and-set: a bench stalled between
reading its attempt and writing it, whose lease lapsed meanwhile and whose scene set another bench took
over, cannot add a second complete attempt to the trial (measured before: it could, and did)."""

from __future__ import annotations

import threading
import time

import pytest
from tests.ledger.conftest import make_ledger

from spabench.ledger import Ledger, LedgerError


def _until(condition, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _lease_left(ledger: Ledger, eid: str) -> float:
    return next(c["lease_left_s"] for c in ledger.claims() if c["evaluation_id"] == eid)


class Stall:
    """Blocks finish_attempt exactly between its read and its write until released."""

    def __init__(self):
        self.reached, self.release = threading.Event(), threading.Event()

    def __call__(self, attempt_id: str) -> None:
        self.reached.set()
        assert self.release.wait(120), "the test never released the stalled bench"


@pytest.fixture
def two_benches(request, tmp_path, plan_rows, pg_url):   # pg_url: the server make_ledger uses
    a = make_ledger(request, tmp_path, plan_rows, "postgresql")
    b = Ledger.open(a.path)
    yield a, b
    b.close()
    a.close()


def test_a_stalled_finish_after_a_takeover_adds_no_second_complete_attempt(two_benches):
    a, b = two_benches
    assert a.claim_scene_set("a", 1.0) == "E0001"
    first = a.begin_attempt("E0001-P2", bench_id="a")
    stall = Stall()
    a.finish_checked = stall
    outcome: dict[str, object] = {}

    def finish() -> None:
        try:
            a.finish_attempt(first, "complete", "timer", episode_path="episodes/E0001-P2-a1")
            outcome["finished"] = True
        except Exception as exc:     # what the stalled bench is told
            outcome["error"] = exc

    worker = threading.Thread(target=finish, name="stalled-bench-a")
    worker.start()
    try:
        assert stall.reached.wait(60), "bench a never reached the finish"
        _until(lambda: _lease_left(b, "E0001") < 0, "bench a's lease to lapse")
        assert b.claim_scene_set("b", 60) == "E0001"                     # taken over while a is stalled
        assert b.attempt(first).status == "invalid"                       # a's attempt interrupted
        second = b.begin_attempt("E0001-P2", bench_id="b")
        b.finish_attempt(second, "complete", "timer")
        b.record_score(second, "ben", True)
    finally:
        stall.release.set()
        worker.join(60)
    assert not worker.is_alive()
    complete = [x for x in b.attempts_for("E0001-P2") if x.status == "complete"]
    assert [x.attempt_id for x in complete] == [second]
    assert "finished" not in outcome
    error = outcome["error"]
    assert isinstance(error, LedgerError)
    text = str(error)
    assert first in text and "E0001" in text and "'b'" in text and "not recorded as complete" in text
    row = b.attempt(first)
    assert (row.status, row.invalid_reason) == ("invalid", "interrupted")
    assert [e["payload"]["status"] for e in b.events(first, "attempt_finished")] == []


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_finish_is_refused_once_the_attempt_is_no_longer_running(request, tmp_path, plan_rows, backend):
    """The same compare-and-set on both back ends: the second finish of an attempt changes nothing."""
    led = make_ledger(request, tmp_path, plan_rows, backend)
    try:
        att = led.begin_attempt("E0001-P2", bench_id="a")
        led.finish_attempt(att, "complete", "timer")
        with pytest.raises(LedgerError, match="is complete, not running"):
            led.finish_attempt(att, "invalid", "fault", invalid_reason="camera_lost")
        assert led.attempt(att).status == "complete"
        assert len(led.events(att, "attempt_finished")) == 1
    finally:
        led.close()


def _split_and_duplicated(a: Ledger, b: Ledger) -> tuple[str, str]:
    """Scene set E0001 split by a takeover between its two trials; trial E0002-P2 with two complete
    attempts (forced with SQL, as a ledger written before the compare-and-set could hold)."""
    assert a.claim_scene_set("a", 1.0) == "E0001"
    first = a.begin_attempt("E0001-P2", bench_id="a")
    a.finish_attempt(first, "complete", "timer")
    a.record_score(first, "ana", True)
    _until(lambda: _lease_left(b, "E0001") < 0, "bench a's lease to lapse")
    assert b.claim_scene_set("b", 60) == "E0001"
    other = b.begin_attempt("E0001-P1", bench_id="b")
    b.finish_attempt(other, "complete", "timer")
    b.record_score(other, "ben", False, "grasp_failure")
    b.release_claim("b", "E0001")
    d1 = a.begin_attempt("E0002-P2", bench_id="a")
    a.finish_attempt(d1, "invalid", "interrupted", invalid_reason="interrupted")
    d2 = b.begin_attempt("E0002-P2", bench_id="b")
    b.finish_attempt(d2, "complete", "timer")
    with a._write() as tx:
        tx.execute("UPDATE attempts SET status = 'complete', invalid_reason = NULL WHERE attempt_id = ?", (d1,))
    return d1, d2


def test_status_and_report_flag_split_sets_and_trials_with_two_complete_attempts(two_benches, tmp_path):
    import io

    from spabench.analysis.commands import load_campaign
    from spabench.errors import DataError
    from spabench.ledger.commands import run_status

    a, b = two_benches
    d1, d2 = _split_and_duplicated(a, b)
    campaign = tmp_path / "camp"
    buf = io.StringIO()
    assert run_status(campaign, out=buf) == 0
    text = buf.getvalue()
    assert (f"PROBLEM: trial E0002-P2 has 2 complete attempts: {d1} (bench a, unscored), {d2} (bench b, "
            "unscored)") in text
    assert f"spabench score campaign={campaign} attempt={d1} invalidate=true reason=" in text
    assert "WARNING: scene set E0001 is split between benches a, b (E0001-P2 on a, E0001-P1 on b)" in text
    with pytest.raises(DataError, match=r"1 trial\(s\) with more than one complete attempt.*\n  trial E0002-P2"):
        load_campaign(campaign)
    b.invalidate_attempt(d1, "second complete attempt after a takeover", "ben")   # the printed fix
    said: list[str] = []
    outcomes = load_campaign(campaign, say=said.append)[0]
    assert said == ["report: warning: scene set E0001 is split between benches a, b (E0001-P2 on a, E0001-P1 "
                    "on b): its policies were not all run on one staged scene"]
    valid = dict(zip(outcomes["attempt_id"], outcomes["valid"], strict=True))
    assert valid == {"E0001-P2-a1": True, "E0001-P1-a1": True, d1: False}     # d2 counts once scored
    buf = io.StringIO()
    run_status(campaign, out=buf)
    assert "PROBLEM" not in buf.getvalue() and "WARNING: scene set E0001" in buf.getvalue()
