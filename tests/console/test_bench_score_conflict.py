"""Two bench pages (tabs) scoring one attempt (issue 34).

Measured before: the session took the first tab's score and cleared the second's from its queue, and
the second tab was answered 200 and said "scored"; a second tab whose save came after the session
moved on got "reload". Now the second gets the review page's behaviour: a conflict naming who scored
the attempt and what, nothing saved, its own entry kept on screen; the ledger holds the first score
only. The channel's rules first (no browser), then two Chromium pages at 1366x768 on the bench page
of one real `spabench run operator=web` on the twin."""

from __future__ import annotations

import threading

import pytest

from spabench.console.channel import BenchChannel, CommandConflict, CommandRefused
from spabench.ledger import Ledger

from .conftest import RATER, _phase, _steps_at_least, session_at_reset

VIEWPORT = {"width": 1366, "height": 768}
FIRST = {"success": False, "failure_mode": "grasp_failure", "note": "from the first tab"}
SECOND = {"success": True, "failure_mode": None, "note": "from the second tab"}


def _session_takes(ch: BenchChannel, accept: bool = True, error: str = "") -> tuple[str, dict]:
    cmd = ch.wait_command(5.0)
    assert cmd is not None
    if accept:
        ch.accept()
        ch.set_phase("stopping", message="scored")
    else:
        ch.update(error=error)
    return cmd


def test_a_second_score_queued_behind_the_first_is_refused_naming_the_first():
    ch = BenchChannel()
    ch.set_phase("score", form={}, rater="Ada")
    version = ch.snapshot()["version"]
    first = ch.post("score", FIRST, version)
    second = ch.post("score", SECOND, version)      # both queued before the session read either
    assert _session_takes(ch) == ("score", FIRST)
    assert ch.outcome(first, 5.0) is True
    with pytest.raises(CommandConflict, match="Ada scored failure \\(grasp_failure\\)") as told:
        ch.outcome(second, 5.0)
    assert "from the first tab" in str(told.value) and told.value.answer["payload"] == FIRST
    assert ch.wait_command(0.01) is None             # the second never reaches the session
    # a page still showing the question after the session moved on: the same conflict, at once
    with pytest.raises(CommandConflict, match="Ada scored"):
        ch.post("score", SECOND, version)


def test_a_refused_first_answer_leaves_the_question_to_the_next():
    ch = BenchChannel()
    ch.set_phase("score", form={}, rater="Ada")
    version = ch.snapshot()["version"]
    bad = ch.post("score", {"success": "maybe"}, version)
    good = ch.post("score", SECOND, version)
    _session_takes(ch, accept=False, error="score refused: success must be true/false")
    with pytest.raises(CommandRefused, match="success must be true/false"):
        ch.outcome(bad, 5.0)
    assert _session_takes(ch) == ("score", SECOND)
    assert ch.outcome(good, 5.0) is True


def test_a_command_the_session_never_took_is_told_it_was_not_done():
    ch = BenchChannel()
    ch.set_phase("reset", card={})
    ticket = ch.post("ready", {}, ch.snapshot()["version"])
    waiting = threading.Thread(target=lambda: ch.set_phase("ended", message="e-stop"))  # the e-stop ends the wait
    waiting.start()
    waiting.join(5)
    with pytest.raises(CommandRefused, match="moved on to ended"):
        ch.outcome(ticket, 5.0)


def _at_score(page) -> None:
    _phase(page, "score")
    page.wait_for_function("() => document.querySelectorAll('#modes input[name=failure_mode]').length > 0")


@pytest.mark.sim
@pytest.mark.slow
def test_two_bench_tabs_scoring_one_attempt_keep_the_first_and_tell_the_second(tmp_path, browser, policy_servers):
    ctx = browser.new_context(viewport=VIEWPORT)
    errors: list[str] = []
    first, second = ctx.new_page(), ctx.new_page()
    for tab in (first, second):
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
    campaign, proc = session_at_reset(first, tmp_path, policy_servers)
    try:
        second.goto(first.url)
        _phase(second, "reset")
        first.click("#ready")
        _phase(first, "rollout")
        _steps_at_least(first, 10)
        first.click("#stop")
        _at_score(first)
        _at_score(second)
        # the second tab has not polled since (a background tab, a slow laptop): it still shows the question
        stale = second.evaluate("() => JSON.stringify(state)")
        second.route("**/api/bench/state*", lambda route: route.fulfill(status=200, body=stale,
                                                                        content_type="application/json"))
        first.check("input[name=success][value=no]")
        first.check(f"input[name=failure_mode][value={FIRST['failure_mode']}]")
        first.fill("#note", FIRST["note"])
        first.click("#submit-score")
        first.wait_for_function("() => document.querySelector('#last-score').dataset.score", timeout=30_000)
        second.check("input[name=success][value=yes]")
        second.fill("#note", SECOND["note"])
        with second.expect_response(lambda r: "/api/bench/command" in r.url) as reply:
            second.click("#submit-score")
        assert reply.value.status == 409
        second.wait_for_selector("#score-conflict", state="visible", timeout=30_000)
        told = second.inner_text("#sc-text")
        assert RATER in told and "failure (grasp_failure)" in told and FIRST["note"] in told, told
        assert "not saved" in told
        assert not second.is_visible("#last") and not second.evaluate(
            "() => document.querySelector('#last-score').dataset.score")   # it does not say "scored"
        second.unroute("**/api/bench/state*")
        _phase(second, "reset")                           # the session went on to the next trial ...
        assert second.is_visible("#score-conflict")       # ... and the second tab's entry is still shown
        assert SECOND["note"] in second.inner_text("#sc-entry") and "success" in second.inner_text("#sc-entry")
    finally:
        proc.terminate()
        proc.wait(30)
        ctx.close()
    assert not errors, errors
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        scores = [(s.rater, s.success, s.failure_mode, s.note) for t in ledger.trials()
                  for a in ledger.attempts_for(t.trial_id) for s in ledger.score_history(a.attempt_id)]
    assert scores == [(RATER, False, FIRST["failure_mode"], FIRST["note"])]
