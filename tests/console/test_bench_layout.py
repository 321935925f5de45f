"""The bench page at the operator laptop's 1366x768: "Scene ready" is in view without scrolling at
the first scene reset (the longest page: checklist, overlays, the rendered reference), and "Save"
with every failure mode once "Failure" is chosen; the scoring keys are the review page's."""

from __future__ import annotations

import pytest

from .conftest import screenshot, session_at_reset

pytestmark = [pytest.mark.sim, pytest.mark.slow]


@pytest.fixture
def laptop_page(browser):
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


IN_VIEW = """(sel) => { const e = document.querySelector(sel), r = e.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return { box: [r.left, r.top, r.right, r.bottom], scrollY: window.scrollY, page: document.body.scrollHeight,
             inside: r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0 &&
                     r.right <= window.innerWidth && r.bottom <= window.innerHeight,
             hit: hit === e || e.contains(hit) }; }"""


def test_scene_ready_is_in_view_at_1366x768(laptop_page, tmp_path, policy_servers):
    page = laptop_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        page.wait_for_function("() => document.querySelector('#alignment').textContent !== ''", timeout=30_000)
        where = page.evaluate(IN_VIEW, "#ready")
        assert where["page"] > 768, where          # the page is longer than the window ...
        assert where["scrollY"] == 0 and where["inside"] and where["hit"], where   # ... and the button is in view
        page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
        where = page.evaluate(IN_VIEW, "#ready")
        assert where["inside"] and where["hit"], where
        # the last of the page is not hidden behind the bar: scrolled to the end, the end-session button shows
        assert page.evaluate(IN_VIEW, "#end-session")["hit"]
        screenshot(page, "bench_reset_1366.png", tmp_path)
    finally:
        proc.terminate()
        proc.wait(30)


def test_save_stays_in_view_with_failure_chosen_and_the_review_pages_keys_score(laptop_page, tmp_path, policy_servers):
    """Issue 34: at 1366x768 "Save" was at y=933 once "Failure" opened the modes, and the bench page had
    no scoring keys. Now Save, Leave and every failure mode are in view, and y / n, the mode's number
    and Enter score as on the review page (common.js holds those keys for both pages); typed in the
    note they are text."""
    from spabench.ledger import Ledger

    from .conftest import RATER, _phase, _steps_at_least

    page = laptop_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        for k in range(2):
            _phase(page, "reset")
            page.click("#ready")
            _phase(page, "rollout")
            _steps_at_least(page, 5)
            page.click("#stop")
            _phase(page, "score")
            page.wait_for_function("() => document.querySelectorAll('#modes input[name=failure_mode]').length > 0")
            if k == 0:
                page.check("input[name=success][value=no]")
                page.wait_for_function("() => !document.querySelector('#modes').hidden")
                for sel in ("#submit-score", "#leave"):
                    where = page.evaluate(IN_VIEW, sel)
                    assert where["scrollY"] == 0 and where["inside"] and where["hit"], (sel, where)
                modes = page.eval_on_selector_all("#modes label", "els => els.map(e => e.getBoundingClientRect().bottom)")
                bar = page.evaluate("() => document.querySelector('#score-actions').getBoundingClientRect().top")
                assert modes and max(modes) <= bar, (modes, bar)      # no failure mode hidden behind the bar
                screenshot(page, "bench_score_1366.png", tmp_path)
                page.check("input[name=success][value=yes]")          # back to nothing chosen by keys below
                page.evaluate("() => document.querySelector('#score-form').reset()")
                page.click("#note")
                page.keyboard.type("n5 y")                            # typed in the note: text, no score
                assert page.input_value("#note") == "n5 y"
                assert not page.evaluate("() => document.querySelector('#score-form').success.value")
                page.keyboard.press("Enter")                          # a new line in the note, not a save
                page.keyboard.press("Escape")                         # leaves the note (no e-stop: not moving)
                page.keyboard.press("n")
                page.keyboard.press("1")
                page.keyboard.press("1")                              # 1 then 1 within the second: mode 11
                assert page.evaluate("() => document.querySelector('input[name=failure_mode]:checked').value") == \
                    "other_execution_failure"
                page.keyboard.press("5")                              # no mode 115: a new number, 5
                assert page.evaluate("() => document.querySelector('input[name=failure_mode]:checked').value") == \
                    "grasp_failure"
            else:
                page.keyboard.press("y")
            assert page.text_content("#phase") == "score"
            page.keyboard.press("Enter")                              # saves
            page.wait_for_function("() => document.querySelector('#last-score').dataset.score", timeout=30_000)
            page.evaluate("() => { delete document.querySelector('#last-score').dataset.score; }")
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    assert proc.returncode == 0, (tmp_path / "run.log").read_text()[-3000:]
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        scores = [(s.rater, s.success, s.failure_mode, s.note.strip()) for t in ledger.trials()
                  for a in ledger.attempts_for(t.trial_id) for s in ledger.scores_for(a.attempt_id)]
    assert scores == [(RATER, False, "grasp_failure", "n5 y"), (RATER, True, None, "")], scores
