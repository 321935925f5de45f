"""The review pages on the campaign the bench test recorded: attempt list and filters, five videos
in sync under one scrubber, rescoring with history, the blind second rater."""

from __future__ import annotations

import pytest

from spabench.ledger import Ledger

from .conftest import assert_blind, policy_words, screenshot

pytestmark = [pytest.mark.sim, pytest.mark.slow]

VIDEOS_READY = "() => { const v = Array.from(document.querySelectorAll('#videos video')); " \
               "return v.length === 5 && v.every(x => x.readyState >= 2 && !x.seeking); }"
POSITIONS = "() => ({ scrub: Number(document.querySelector('#scrubber').value), " \
            "times: Array.from(document.querySelectorAll('#videos video')).map(v => v.currentTime) })"


def _attempts(campaign):
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)], ledger.trials()


def test_attempt_list_filters(review_console, page):
    url, campaign = review_console
    attempts, trials = _attempts(campaign)
    page.goto(f"{url}/review")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 2")
    assert_blind(page, policy_words(campaign), "attempt list")
    page.select_option("#alias", trials[0].alias)
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 1")
    assert page.text_content("#rows tr td:nth-child(2)") == trials[0].alias
    # the attempt opened from a filtered list keeps the filter: "save and next unscored" and "back" stay in it
    page.click("#rows tr a")
    page.wait_for_url(f"**alias={trials[0].alias}*")
    page.wait_for_function(f"() => document.querySelector('#back').href.includes('alias={trials[0].alias}')")
    page.goto(f"{url}/review?alias={trials[0].alias}")      # a bookmarked view: its filter applies at once
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 1")
    assert page.input_value("#alias") == trials[0].alias
    page.select_option("#alias", "")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 2")
    page.check("#unscored")  # both attempts were scored at the bench
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 0")
    page.uncheck("#unscored")
    page.select_option("#condition", "id")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 2")


def test_five_videos_play_in_sync_under_one_scrubber(review_console, page, tmp_path):
    url, campaign = review_console
    attempts, _ = _attempts(campaign)
    attempt = attempts[-1]
    page.goto(f"{url}/review/{attempt.attempt_id}")
    page.wait_for_function(VIDEOS_READY, timeout=30_000)
    fps = page.evaluate("() => fps")
    duration = page.evaluate("() => Number(document.querySelector('#scrubber').max)")
    assert fps == 30 and duration > 2.0
    for target in (duration * 0.61, duration * 0.23):
        page.evaluate(f"() => {{ const s = document.querySelector('#scrubber'); s.value = {target}; "
                      "s.dispatchEvent(new Event('input')); }")
        page.wait_for_function(VIDEOS_READY)
        pos = page.evaluate(POSITIONS)
        assert abs(pos["scrub"] - target) <= 1 / fps
        assert all(abs(t - pos["scrub"]) <= 1 / fps for t in pos["times"]), pos
    before = page.evaluate(POSITIONS)["scrub"]
    page.click("#fwd1")
    page.wait_for_function(VIDEOS_READY)
    pos = page.evaluate(POSITIONS)
    assert abs(pos["scrub"] - (before + 1 / fps)) < 1e-3 and all(abs(t - pos["scrub"]) <= 1 / fps for t in pos["times"])
    # play, then pause: every video is still within one frame of the scrubber
    page.select_option("#speed", "2")
    page.click("#play")
    page.wait_for_function(f"() => Number(document.querySelector('#scrubber').value) > {pos['scrub'] + 0.5}", timeout=20_000)
    page.click("#play")
    page.wait_for_function(VIDEOS_READY)
    pos = page.evaluate(POSITIONS)
    assert all(abs(t - pos["scrub"]) <= 1 / fps for t in pos["times"]), pos
    # first and last frames beside the reference, joints and events on the timeline, the stop reason
    page.wait_for_function("() => Array.from(document.querySelectorAll('#frames img')).every(i => i.naturalWidth > 0)")
    assert page.locator("#frames img").count() == 6
    assert "operator_stop" in page.text_content("#stop")
    assert page.locator("#checklist li").count() >= 5
    assert page.evaluate("() => { const c = document.querySelector('#timeline'); const d = c.getContext('2d')"
                         ".getImageData(0, 0, c.width, c.height).data; let n = 0; for (let i = 3; i < d.length; i += 4) "
                         "if (d[i]) n++; return n; }") > 1000
    assert_blind(page, policy_words(campaign), "review page")
    assert screenshot(page, "review.png", tmp_path).stat().st_size > 50_000


def test_rescore_needs_a_reason_and_keeps_the_history(review_console, page):
    url, campaign = review_console
    attempts, _ = _attempts(campaign)
    attempt = attempts[0]
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (before,) = ledger.scores_for(attempt.attempt_id)
    page.goto(f"{url}/review/{attempt.attempt_id}?rater={before.rater}")
    page.wait_for_function("() => document.querySelector('#save').textContent === 'Save rescore'")
    assert page.is_visible("#reason")
    page.check("input[name=success][value=yes]")
    page.click("#save")
    page.wait_for_function("() => /needs a reason/.test(document.querySelector('#error').textContent)")
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        assert len(ledger.score_history(attempt.attempt_id)) == 1
    page.check("input[name=success][value=yes]")
    page.fill("#reason", "video shows the cup in the bowl")
    page.click("#save")
    page.wait_for_function("() => document.querySelectorAll('#history tr').length === 2")
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (now,) = ledger.scores_for(attempt.attempt_id)
        history = ledger.score_history(attempt.attempt_id)
    assert (now.rater, now.success, now.failure_mode) == (before.rater, True, None)
    assert len(history) == 2
    old = [h for h in history if h.superseded_at]
    assert len(old) == 1 and (old[0].success, old[0].failure_mode) == (before.success, before.failure_mode)
    assert [h.reason for h in history if not h.superseded_at] == ["video shows the cup in the bowl"]
    assert "video shows the cup in the bowl" in page.text_content("#history")


def test_second_rater_cannot_see_the_first_score(review_console, page):
    url, campaign = review_console
    attempts, _ = _attempts(campaign)
    attempt = attempts[-1]
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (first,) = ledger.scores_for(attempt.attempt_id)
    assert first.note  # the bench test wrote one: it must not show up below

    def hidden(where):
        text = page.evaluate("() => document.documentElement.outerHTML + document.body.innerText")
        assert first.note not in text and f"{first.rater}:" not in text, where
        api = page.evaluate(f"() => fetch('/api/attempts/{attempt.attempt_id}?rater=rater2&blind=1').then(r => r.json())")
        assert first.note not in str(api), where
        assert all(x["rater"] == "rater2" for x in api["scores"] + api["history"]), where
        assert not [e for e in api["ledger_events"] if e["kind"] in ("scored", "rescored", "score_corrected")
                    and e["payload"].get("rater") != "rater2"], where
        listed = page.evaluate("() => fetch('/api/attempts?rater=rater2&blind=1').then(r => r.json())")
        assert all(x["rater"] == "rater2" for a in listed["attempts"] for x in a["scores"]), where

    page.goto(f"{url}/review?rater=rater2&blind=1")
    page.wait_for_function("() => document.querySelectorAll('#rows tr').length === 2")
    assert page.is_visible("#blind-banner")
    assert all(t == "unscored" for t in page.eval_on_selector_all("#rows tr td:last-child", "els => els.map(e => e.textContent)"))
    hidden("list")
    page.click(f"a[href^='/review/{attempt.attempt_id}']")
    page.wait_for_function("() => document.querySelector('#current').textContent.includes('You have not scored')")
    assert page.input_value("#rater") == "rater2"
    hidden("review page")
    page.check("input[name=success][value=no]")
    page.check("input[name=failure_mode][value=grasp_failure]")
    page.fill("#note", "second look")
    page.click("#save")
    page.wait_for_function("() => document.querySelector('#current').textContent.includes('rater2: failure')")
    hidden("after scoring")
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        scores = {s.rater: s for s in ledger.scores_for(attempt.attempt_id)}
    assert set(scores) == {first.rater, "rater2"}  # a double score, distinct raters, for the kappa
    assert (scores["rater2"].success, scores["rater2"].failure_mode) == (False, "grasp_failure")
    assert (scores[first.rater].success, scores[first.rater].note) == (first.success, first.note)
