"""The bench page's e-stop keys by phase (issues 18 and 34).

Measured before: Space both ticked the focused checklist box (or chose "Failure") and e-stopped, so
the session ended during scene reset or scoring (issue 18); then Escape typed in the rater name, the
override reason or the note e-stopped too, ending the session before its first trial or leaving the
attempt unscored (issue 34). The rule now: while the arm moves (homing, rollout, stopping) Esc and
Space e-stop from whatever has focus; in the other phases a key typed in a text field belongs to the
field (Esc leaves it), and outside one Esc e-stops while Space stays with the focused control. Each
test drives a real `spabench run operator=web` on the twin from Chromium at 1366x768; the ledger must
hold exactly one e-stop, from the console key, in the phase where it was pressed. After the e-stop
the page asks why (issue 19), and the answer decides what the e-stopped attempt is."""

from __future__ import annotations

import pytest

from spabench.ledger import Ledger
from spabench.suite.rules import UNSAFE

from .conftest import (
    RATER,
    _phase,
    _steps_at_least,
    answer_estop_cause,
    finish_estopped_session,
    free_port,
    plan_small,
    screenshot,
    session_at_reset,
    start_run,
    wait_http,
)

pytestmark = [pytest.mark.sim, pytest.mark.slow]

VIEWPORT = {"width": 1366, "height": 768}


@pytest.fixture
def small_page(browser):
    ctx = browser.new_context(viewport=VIEWPORT)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _space_ticks_a_checklist_box(page) -> None:
    box = page.locator("#card-checklist input[type=checkbox]").first
    box.focus()
    page.keyboard.press(" ")
    assert box.is_checked()        # Space did what it does on a checkbox ...
    page.keyboard.press(" ")
    assert not box.is_checked()
    assert page.evaluate("() => window.__lastStop === undefined")   # ... and sent no stop request


def _closing_message(page) -> str:
    """The page's message once the session's console has closed (its last word)."""
    _phase(page, "ended", timeout=30_000)
    page.wait_for_selector("#closed", state="visible", timeout=60_000)
    assert page.text_content("#error") == ""    # not "console unreachable"
    return page.inner_text("#message")


def _says_why_and_what_next(message: str, log: str, during: str) -> None:
    """Issue 18: the page shows the end reason and the safety instruction, as the terminal printed them."""
    lines = [line for line in message.splitlines() if line.strip()]
    assert lines[0].startswith(f"E-STOP (console key) during {during}: the arm holds where it is"), message
    assert any("held where it stopped, torque on" in line and "Support it" in line for line in lines), message
    for line in lines:
        assert line in log, (line, log[-2000:])


def test_space_in_reset_does_not_estop_and_escape_in_the_rollout_does(tmp_path, small_page, policy_servers):
    page = small_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        _space_ticks_a_checklist_box(page)
        assert page.text_content("#phase") == "reset"
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 10)
        page.locator("#estop").blur()
        page.keyboard.press("Escape")
        answer_estop_cause(page, "operator")
        message = _closing_message(page)
    finally:
        log = finish_estopped_session(proc, tmp_path, campaign, "rollout")[0]
    _says_why_and_what_next(message, log, "rollout")
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (attempt,) = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        assert (attempt.status, attempt.stop_reason, attempt.invalid_reason) == ("invalid", "estop", "estop: operator")


def test_space_on_the_failure_choice_does_not_estop_and_escape_in_scoring_does(tmp_path, small_page, policy_servers):
    page = small_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 10)
        page.keyboard.press("s")
        _phase(page, "score")
        page.evaluate("() => { window.__lastStop = undefined; }")   # the S key's stop, seen
        page.click("input[name=success][value=no]")         # the "Failure" choice, focused
        page.keyboard.press(" ")
        page.locator("#leave").focus()                       # a button: Space would activate it, so
        page.locator("input[name=success][value=no]").focus()  # only the radio gets Space here
        page.keyboard.press(" ")
        assert page.is_checked("input[name=success][value=no]")
        assert page.evaluate("() => window.__lastStop === undefined")
        assert page.text_content("#phase") == "score"
        page.keyboard.press("Escape")
        answer_estop_cause(page, "operator")
        message = _closing_message(page)
    finally:
        log = finish_estopped_session(proc, tmp_path, campaign, "scoring")[0]
    _says_why_and_what_next(message, log, "scoring")


# issue 19: after the e-stop the page asks why; unsafe policy behaviour makes the attempt a failure
def test_an_estop_for_unsafe_policy_behaviour_makes_the_attempt_a_failure(tmp_path, small_page, policy_servers):
    page = small_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 10)
        page.keyboard.press("Escape")
        _phase(page, "estop_cause", timeout=30_000)
        assert page.is_visible("#estop-cause")
        assert page.eval_on_selector_all("#ec-causes input", "els => els.map(e => e.value)") == \
            [UNSAFE, "operator", "other"]
        assert "the policy's failure, not run again" in page.inner_text("#ec-causes")
        page.check("#ec-causes input[value=other]")          # other without words is refused ...
        page.click("#submit-cause")
        page.wait_for_function("() => document.querySelector('#error').textContent.includes('a few words')",
                               timeout=30_000)
        assert page.text_content("#phase") == "estop_cause"   # ... and asked again
        page.check(f"#ec-causes input[value={UNSAFE}]")
        page.fill("#ec-text", "swung at the cup")
        page.click("#submit-cause")
        _phase(page, "ended", timeout=30_000)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
    log = (tmp_path / "run.log").read_text()
    assert proc.returncode == 3, log[-3000:]   # the e-stop ends the session
    assert "FAILURE (unsafe: e-stopped for unsafe policy behaviour)" in log, log[-3000:]
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (attempt,) = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        assert (attempt.status, attempt.stop_reason, attempt.invalid_reason) == ("complete", "estop", None)
        (score,) = ledger.scores_for(attempt.attempt_id)
        assert (score.success, score.failure_mode, score.note) == (False, UNSAFE, "swung at the cup")
        (event,) = ledger.events(kind="estop")
        assert (event["payload"]["source"], event["payload"]["during"], event["payload"]["cause"]) == \
            ("console key", "rollout", UNSAFE)
        assert attempt.trial_id not in [t.trial_id for t in ledger.pending_trials()]   # not run again


# ---- issue 34: keys typed in a text field belong to it, except while the arm moves ----------------
NO_STOP = "() => window.__lastStop === undefined"


def _focused_text_field(page) -> None:
    """A text field that has focus while the arm moves (the bench page shows none then; any page
    element may have focus, e.g. one a browser extension added): Esc and Space must still e-stop."""
    page.evaluate("() => { const f = document.createElement('input'); f.type = 'text'; f.id = 'typed-in'; "
                  "document.querySelector('#rollout').prepend(f); f.focus(); }")
    assert page.evaluate("() => document.activeElement.id") == "typed-in"


def _esc_leaves_the_field(page, selector: str, phase: str) -> None:
    assert page.evaluate("(s) => document.activeElement === document.querySelector(s)", selector)
    page.keyboard.press("Escape")
    assert page.evaluate("() => document.activeElement === document.body"), "Esc did not leave the field"
    assert page.evaluate(NO_STOP) and page.text_content("#phase") == phase


def test_esc_and_space_in_the_rater_name_type_and_blur_space_in_the_rollout_estops(tmp_path, small_page,
                                                                                    policy_servers):
    page = small_page
    campaign = plan_small(tmp_path / "campaign")
    port = free_port()
    proc = start_run(campaign, policy_servers, port, tmp_path / "run.log", rater=None)
    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 120, proc)
        page.goto(f"http://127.0.0.1:{port}/bench")
        _phase(page, "camera_check")
        page.click("#rater-name")
        page.keyboard.type("Grace")
        page.keyboard.press(" ")                              # a space in a name, not an e-stop
        page.keyboard.type("Hopper")
        _esc_leaves_the_field(page, "#rater-name", "camera_check")   # Esc leaves the field, stops nothing
        assert page.input_value("#rater-name") == "Grace Hopper"
        page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
        page.click("#confirm-cameras")
        _phase(page, "reset")
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 10)
        _focused_text_field(page)
        page.keyboard.press(" ")                              # while the arm moves: Space e-stops
        answer_estop_cause(page, "operator")
    finally:
        finish_estopped_session(proc, tmp_path, campaign, "rollout")
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (check,) = ledger.events(kind="camera_check")
        assert check["payload"]["rater"] == "Grace Hopper"
        (attempt,) = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        assert (attempt.status, attempt.invalid_reason) == ("invalid", "estop: operator")


def test_esc_in_the_note_blurs_and_saves_the_score_esc_in_the_next_rollout_estops(tmp_path, small_page,
                                                                                 policy_servers):
    page = small_page
    campaign, proc = session_at_reset(page, tmp_path, policy_servers)
    try:
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 10)
        page.click("#stop")
        _phase(page, "score")
        page.evaluate("() => { window.__lastStop = undefined; }")   # the Stop button's request, seen
        page.check("input[name=success][value=yes]")
        page.click("#note")
        page.keyboard.type("clean pick, no bump")             # spaces typed into the note
        _esc_leaves_the_field(page, "#note", "score")
        assert page.input_value("#note") == "clean pick, no bump"
        page.click("#submit-score")
        page.wait_for_function("() => document.querySelector('#last-score').dataset.score", timeout=30_000)
        _phase(page, "reset")
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 10)
        _focused_text_field(page)
        page.keyboard.press("Escape")                         # while the arm moves: Esc e-stops
        answer_estop_cause(page, "operator")
    finally:
        finish_estopped_session(proc, tmp_path, campaign, "rollout")
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        first, second = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        (score,) = ledger.scores_for(first.attempt_id)         # the attempt is scored, not left unscored
        assert (score.rater, score.success, score.note) == (RATER, True, "clean pick, no bump")
        assert (second.status, second.invalid_reason) == ("invalid", "estop: operator")


def test_the_first_screen_says_the_software_estop_is_not_a_safety_rated_stop(tmp_path, small_page, policy_servers):
    page = small_page
    campaign = plan_small(tmp_path / "campaign")
    port = free_port()
    proc = start_run(campaign, policy_servers, port, tmp_path / "run.log", rater=None)
    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 120, proc)
        page.goto(f"http://127.0.0.1:{port}/bench")
        _phase(page, "camera_check")
        assert page.is_visible("#hardware-estop")
        text = " ".join(page.inner_text("#hardware-estop").split())
        assert "not a safety-rated stop" in text and "power cut" in text and "within the operator's reach" in text, text
        for sel in ("#hardware-estop", "#rater-name", "#confirm-cameras"):   # all on the first screen, none below the fold
            box = page.locator(sel).bounding_box()
            assert box and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], (sel, box)
        screenshot(page, "bench_camera_check_1366.png", tmp_path)
        page.click("#end-at-check")
        _phase(page, "ended", timeout=30_000)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
