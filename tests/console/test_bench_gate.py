"""The bench page's alignment gate and rater name, in Chromium at 1366x768, on a real
`spabench run operator=web` of a small twin campaign (one evaluation, two policies).

Measured on main: "Scene ready" started the rollout at alignment 0.57 against the 0.85 threshold
without a prompt, the value was shown nowhere afterwards, and every score was by "operator" (nothing
asked for a name). Here the session is given no rater (the camera check asks for one) and a
threshold of 1.0, which the second trial's live scene cannot reach against a reference decoded from
the first trial's MP4: "Scene ready" is refused until a reason is given; the attempt stores the
alignment and the reason; the review list, the attempt page and the report show them."""

from __future__ import annotations

import pytest

from spabench.ledger import Ledger

from .conftest import _phase, _steps_at_least, free_port, plan_small, start_run, wait_http

pytestmark = [pytest.mark.sim, pytest.mark.slow]
NAME = "Grace Hopper"
REASON = "reference video is compressed; scene checked by eye against the checklist"


def _error(page, text: str) -> None:
    page.wait_for_function(f"() => document.querySelector('#error').textContent.includes({text!r})", timeout=30_000)


def _run_one_trial(page) -> None:
    _phase(page, "rollout")
    _steps_at_least(page, 5)
    page.click("#stop")
    _phase(page, "score")
    page.check("input[name=success][value=yes]")
    page.click("#submit-score")


def test_scene_ready_below_the_threshold_needs_a_reason_and_every_score_a_name(browser, policy_servers, tmp_path):
    campaign = plan_small(tmp_path / "campaign")
    port = free_port()
    proc = start_run(campaign, policy_servers, port, tmp_path / "run.log",
                     "operator.console.alignment_threshold=1.0", rater=None)
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 120, proc)
        page.goto(f"http://127.0.0.1:{port}/bench")
        _phase(page, "camera_check")
        page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
        assert page.input_value("#rater-name") == ""            # nobody named: the page asks
        page.click("#confirm-cameras")
        _error(page, "enter the rater's name")
        page.fill("#rater-name", "operator")                     # names no person: refused too
        page.click("#confirm-cameras")
        page.wait_for_function("() => document.querySelector('#phase').textContent === 'camera_check'")
        _error(page, "enter the rater's name")
        page.fill("#rater-name", NAME)
        page.click("#confirm-cameras")
        _phase(page, "reset")
        assert page.is_visible("#first-attempt") and not page.is_visible("#override-box")  # no reference yet
        page.click("#ready")
        _run_one_trial(page)
        _phase(page, "reset")                                    # trial 2: the reference exists now
        page.wait_for_function("() => /does not match/.test(document.querySelector('#alignment').textContent)",
                               timeout=30_000)
        assert page.is_visible("#override-box")
        page.click("#ready")                                     # no reason: refused, nothing starts
        _error(page, "below the threshold 1")
        page.fill("#override-reason", "ok")                      # too short to be a reason
        page.click("#ready")
        _error(page, "the reason 'ok' is too short")
        assert page.text_content("#phase") == "reset"
        with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
            assert len(ledger.attempts()) == 1
        page.fill("#override-reason", REASON)
        page.click("#ready")
        _run_one_trial(page)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        ctx.close()
    assert proc.returncode == 0, (tmp_path / "run.log").read_text()[-3000:]
    assert not errors, errors
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        first, second = [ledger.attempts_for(t.trial_id)[0] for t in ledger.trials()]
        assert first.alignment is None and first.alignment_override is None
        assert second.alignment is not None and second.alignment < 1.0 and second.alignment_override == REASON
        scores = [s for a in (first, second) for s in ledger.score_history(a.attempt_id)]
        assert [s.rater for s in scores] == [NAME, NAME]        # the name given once, on every score
        (check,) = ledger.events(kind="camera_check")
        assert check["payload"]["rater"] == NAME
    _review_and_report_show_the_override(browser, campaign, second)


def _review_and_report_show_the_override(browser, campaign, attempt) -> None:
    from spabench.analysis.alignment import below_threshold_lines, campaign_below_threshold
    from spabench.console.app import ConsoleContext, build_app
    from spabench.console.config import ConsoleConfig
    from spabench.console.server import ConsoleServer

    cfg = ConsoleConfig(port=free_port())
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg, rater=NAME)), cfg).start()
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    page = ctx.new_page()
    try:
        base = f"http://127.0.0.1:{server.port}"
        page.goto(f"{base}/review")
        row = f"tr[data-attempt='{attempt.attempt_id}']"
        page.wait_for_selector(row, timeout=30_000)
        assert f"{attempt.alignment:.3f} — override: {REASON}" in page.text_content(row)
        page.goto(f"{base}/review/{attempt.attempt_id}")
        page.wait_for_function("() => /override reason/.test(document.querySelector('#alignment').textContent)",
                               timeout=30_000)
        assert REASON in page.text_content("#alignment")
    finally:
        ctx.close()
        server.stop()
    rows = campaign_below_threshold(campaign)
    assert [(r.attempt_id, r.reason, r.threshold) for r in rows] == [(attempt.attempt_id, REASON, 1.0)]
    assert "## Attempts started below the alignment threshold" in "\n".join(below_threshold_lines(rows))
