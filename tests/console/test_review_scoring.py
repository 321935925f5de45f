"""Scoring on the review page at a 1366x768 viewport, on the campaign the bench test recorded: two
tabs scoring one attempt (the second is told, nothing vanishes), Save in view without scrolling,
keyboard-only scoring with "save and next unscored", the scrubber and the videos after a save, and
what the blind second rater does not see. On a copy of that campaign (test_review_page.py reads the
bench's scores of the original); each test scores as its own rater."""

from __future__ import annotations

import json
import shutil

import pytest

from spabench.ledger import Ledger

from .conftest import review_server, screenshot, wait_encoded

pytestmark = [pytest.mark.sim, pytest.mark.slow]

VIEWPORT = {"width": 1366, "height": 768}
VIDEOS_READY = "() => { const v = Array.from(document.querySelectorAll('#videos video')); " \
               "return v.length === 5 && v.every(x => x.readyState >= 2 && !x.seeking); }"
POSITIONS = "() => ({ scrub: Number(document.querySelector('#scrubber').value), " \
            "label: document.querySelector('#time').textContent, " \
            "times: Array.from(document.querySelectorAll('#videos video')).map(v => v.currentTime) })"


@pytest.fixture(scope="module")
def review_console(bench_session, tmp_path_factory):
    """A console of a copy of the recorded campaign: what these tests score stays here."""
    campaign = tmp_path_factory.mktemp("scoring") / "campaign"
    wait_encoded(bench_session["campaign"])
    shutil.copytree(bench_session["campaign"], campaign)
    with review_server(campaign) as url:
        yield url, campaign


@pytest.fixture
def laptop(browser):
    """A page at the operator laptop's 1366x768; JavaScript errors fail the test."""
    ctx = browser.new_context(viewport=VIEWPORT)
    pages = []

    def new_page():
        pg = ctx.new_page()
        pg.js_errors = []
        pg.on("pageerror", lambda exc, pg=pg: pg.js_errors.append(str(exc)))
        pages.append(pg)
        return pg

    yield new_page
    errors = [e for pg in pages for e in pg.js_errors]
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _attempts(campaign):
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]


def _history(campaign, attempt_id, rater):
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return [s for s in ledger.score_history(attempt_id) if s.rater == rater]


def _loaded(page):
    page.wait_for_function("() => document.querySelector('#save').dataset.version !== undefined", timeout=30_000)


def _in_view(page, selector):
    """The element is inside the viewport at the current scroll, and it is what a click there hits."""
    return page.evaluate("""(sel) => { const e = document.querySelector(sel), r = e.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        return { box: [r.left, r.top, r.right, r.bottom], scrollY: window.scrollY,
                 inside: r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0 &&
                         r.right <= window.innerWidth && r.bottom <= window.innerHeight,
                 hit: hit === e || e.contains(hit) }; }""", selector)


def test_two_tabs_scoring_one_attempt_keep_the_first_score_and_tell_the_second(review_console, laptop):
    url, campaign = review_console
    attempt = _attempts(campaign)[0].attempt_id
    first, second = laptop(), laptop()
    for tab in (first, second):
        tab.goto(f"{url}/review/{attempt}?rater=tabs")
        _loaded(tab)
    first.check("input[name=success][value=yes]")
    first.fill("#note", "from the first tab")
    first.click("#save")
    first.wait_for_function("() => /saved/.test(document.querySelector('#saved').textContent)")
    second.check("input[name=success][value=no]")
    second.check("input[name=failure_mode][value=grasp_failure]")
    second.fill("#note", "from the second tab")
    with second.expect_response(lambda r: "/score?" in r.url) as reply:
        second.click("#save")
    assert reply.value.status == 409
    second.wait_for_function("() => !document.querySelector('#conflict').hidden")
    told = second.text_content("#conflict")
    assert "tabs saved success" in told and "from the first tab" in told and "not saved" in told
    assert [(s.success, s.note) for s in _history(campaign, attempt, "tabs")] == [(True, "from the first tab")]
    # the second rater's choices are kept; replacing the first score is a deliberate rescore with a reason
    assert second.is_checked("input[name=failure_mode][value=grasp_failure]")
    assert second.text_content("#save") == "Save rescore" and second.is_visible("#reason")
    second.fill("#reason", "the cup slips out at 3 s")
    second.click("#save")
    second.wait_for_function("() => /saved/.test(document.querySelector('#saved').textContent)")
    history = _history(campaign, attempt, "tabs")
    assert [(s.success, s.failure_mode, s.superseded_at is None) for s in history] == \
        [(True, None, False), (False, "grasp_failure", True)]
    assert history[1].reason == "the cup slips out at 3 s"
    # the first tab is now the stale one: its rescore is refused the same way
    first.check("input[name=success][value=yes]")
    first.fill("#reason", "late second thoughts")
    first.click("#save")
    first.wait_for_function("() => !document.querySelector('#conflict').hidden")
    assert "grasp_failure" in first.text_content("#conflict")
    assert len(_history(campaign, attempt, "tabs")) == 2


def test_save_stays_in_view_at_1366x768(review_console, laptop, tmp_path):
    url, campaign = review_console
    page = laptop()
    page.goto(f"{url}/review/{_attempts(campaign)[-1].attempt_id}?rater=layout")
    _loaded(page)
    page.wait_for_function(VIDEOS_READY, timeout=30_000)
    for sel in ("#save", "#save-next"):
        where = _in_view(page, sel)
        assert where["scrollY"] == 0 and where["inside"] and where["hit"], (sel, where)
    page.check("input[name=success][value=no]")  # eleven failure modes open below the outcome
    page.wait_for_function("() => !document.querySelector('#modes').hidden")
    for sel in ("#save", "#save-next"):
        where = _in_view(page, sel)
        assert where["scrollY"] == 0 and where["inside"] and where["hit"], (sel, where)
    screenshot(page, "review_1366.png", tmp_path)


def test_keyboard_only_scoring_and_save_and_next_unscored(review_console, laptop):
    url, campaign = review_console
    first, last = (a.attempt_id for a in _attempts(campaign))
    page = laptop()
    page.goto(f"{url}/review/{first}?rater=keys&blind=1")   # blind: both attempts are unscored by "keys"
    _loaded(page)
    page.click("#note")
    page.keyboard.type("n5 y")                                # typing a note scores nothing
    assert page.input_value("#note") == "n5 y" and not page.evaluate(
        "() => document.querySelector('#score-form').success.value")
    page.fill("#note", "")
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("n")                                  # failure
    page.keyboard.press("1")
    page.keyboard.press("1")                                  # 1 then 1 within the second: mode 11
    assert page.evaluate("() => document.querySelector('input[name=failure_mode]:checked').value") == \
        "other_execution_failure"
    page.keyboard.press("5")                                  # no mode 115: a new number, 5
    assert page.evaluate("() => document.querySelector('input[name=failure_mode]:checked').value") == "grasp_failure"
    page.keyboard.press("Shift+Enter")                        # save and next unscored
    page.wait_for_url(f"**/review/{last}?*", timeout=30_000)
    assert [(s.success, s.failure_mode) for s in _history(campaign, first, "keys")] == [(False, "grasp_failure")]
    _loaded(page)
    assert "blind=1" in page.url and page.input_value("#rater") == "keys"
    page.keyboard.press("y")
    page.keyboard.press("Shift+Enter")                        # the last one: nothing left, the page says so
    page.wait_for_function("() => /every attempt is scored/.test(document.querySelector('#saved').textContent)")
    assert [(s.success, s.failure_mode) for s in _history(campaign, last, "keys")] == [(True, None)]
    assert page.url.split("?")[0].endswith(last)
    # Enter alone saves (here: a rescore needs its reason first, so it is refused and says why)
    page.keyboard.press("n")
    page.keyboard.press("Enter")
    page.wait_for_function("() => /needs a reason/.test(document.querySelector('#error').textContent)")
    assert len(_history(campaign, last, "keys")) == 1


def test_after_a_save_the_scrubber_and_the_videos_agree(review_console, laptop):
    url, campaign = review_console
    page = laptop()
    page.goto(f"{url}/review/{_attempts(campaign)[-1].attempt_id}?rater=scrub")
    _loaded(page)
    page.wait_for_function(VIDEOS_READY, timeout=30_000)
    fps = page.evaluate("() => fps")
    duration = page.evaluate("() => Number(document.querySelector('#scrubber').max)")
    target = round(duration * 0.6, 3)
    page.evaluate(f"() => {{ const s = document.querySelector('#scrubber'); s.value = {target}; "
                  "s.dispatchEvent(new Event('input')); }")
    page.wait_for_function(VIDEOS_READY)
    page.check("input[name=success][value=yes]")
    page.click("#save")
    page.wait_for_function("() => /saved/.test(document.querySelector('#saved').textContent)")
    page.wait_for_function(VIDEOS_READY, timeout=30_000)
    pos = page.evaluate(POSITIONS)
    assert all(abs(t - pos["scrub"]) <= 1 / fps for t in pos["times"]), pos
    assert pos["label"].startswith(f"{pos['scrub']:.3f} s"), pos
    assert abs(pos["scrub"] - target) <= 1 / fps, pos        # the rater's place in the video is kept


def test_the_blind_second_rater_sees_no_stop_reason_and_no_prefill(review_console, laptop):
    url, campaign = review_console
    attempt = _attempts(campaign)[0]
    assert attempt.stop_reason == "operator_stop"
    with Ledger.open(campaign / Ledger.FILENAME) as ledger:   # a motion pre-fill, as a no-motion trial gets
        if not ledger.events(attempt.attempt_id, "score_prefill"):
            ledger.log_event(attempt.attempt_id, "score_prefill", {
                "success": False, "failure_mode": "unnecessary_intervention", "note": "pre-filled: motion detected",
                "rater": "operator", "source": "motion_prefill"})
    page = laptop()
    page.goto(f"{url}/review/{attempt.attempt_id}?rater=open")   # not blind: both are shown
    _loaded(page)
    assert "operator_stop" in page.text_content("#stop") and page.is_visible("#prefill")
    page.goto(f"{url}/review/{attempt.attempt_id}?rater=second&blind=1")
    _loaded(page)
    assert page.is_visible("#blind-banner") and not page.is_visible("#prefill")
    assert "hidden" in page.text_content("#stop")
    text = page.evaluate("() => document.body.innerText")
    assert "operator_stop" not in text and "motion detected" not in text
    api = page.evaluate(f"() => fetch('/api/attempts/{attempt.attempt_id}?rater=second&blind=1').then(r => r.json())")
    blob = json.dumps(api)
    assert api["stop_reason"] is None and api["prefill"] is None and "operator_stop" not in blob
    assert not [e for e in api["ledger_events"] + api["episode"]["events"]
                if e["kind"] in ("score_prefill", "stop_requested")]
    listed = page.evaluate("() => fetch('/api/attempts?rater=second&blind=1').then(r => r.json())")
    assert all(a["stop_reason"] is None for a in listed["attempts"])
