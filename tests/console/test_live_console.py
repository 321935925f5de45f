"""`spabench console` on a campaign whose session runs elsewhere (issue 18). Measured before: its bench
page showed the red E-STOP, said "no session is running" and answered "nothing to stop" while the arm
moved. Now it shows no E-STOP, links to the live session's bench page, and that page's key stops it;
with no live session it shows neither button nor link."""

from __future__ import annotations

import pytest

from spabench.ledger import Ledger

from .conftest import _phase, _steps_at_least, answer_estop_cause, free_port, session_at_reset

pytestmark = [pytest.mark.sim, pytest.mark.slow]


@pytest.fixture
def review_only(browser):
    """A second console (as `spabench console` serves it: no session) on a given campaign."""
    from spabench.console.app import ConsoleContext, build_app
    from spabench.console.config import ConsoleConfig
    from spabench.console.server import ConsoleServer

    servers = []

    def start(campaign):
        cfg = ConsoleConfig(port=free_port())
        server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg)), cfg).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield start
    for s in servers:
        s.stop()


def test_review_console_sends_the_operator_to_the_live_estop(tmp_path, browser, policy_servers, review_only):
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    live, other = ctx.new_page(), ctx.new_page()
    campaign, proc = session_at_reset(live, tmp_path, policy_servers)
    try:
        other.goto(review_only(campaign) + "/bench")
        other.wait_for_selector("#live-console", state="visible", timeout=30_000)
        assert other.is_hidden("#estop")              # no button that cannot stop the arm
        href = other.get_attribute("#live-console-link", "href")
        assert href == live.url                       # the live session's own bench page
        live.click("#ready")
        _phase(live, "rollout")
        other.goto(href)                              # the operator follows the link ...
        _phase(other, "rollout")
        _steps_at_least(other, 10)
        assert other.is_visible("#estop")
        other.keyboard.press("Escape")                # ... and its e-stop reaches the arm:
        answer_estop_cause(other, "operator")         # (either page may say why: the one that stopped it)
        # both pages show why the session ended (the console waits until each fetched the end)
        for shown in (other, live):
            _phase(shown, "ended", timeout=30_000)
            assert "E-STOP (console key) during rollout" in shown.text_content("#message")
        proc.wait(60)                                 # the session ends (exit 3, the ledger below)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
    assert proc.returncode == 3, (tmp_path / "run.log").read_text()[-3000:]
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (event,) = ledger.events(kind="estop")
        assert (event["payload"]["source"], event["payload"]["during"]) == ("console key", "rollout")
    assert not (campaign / "console.live.json").exists()  # the ended session cleared its record
    # no live session now: the review console shows neither the E-STOP nor a link
    page = ctx.new_page()
    page.goto(review_only(campaign) + "/bench")
    _phase(page, "offline", timeout=30_000)
    assert page.is_hidden("#estop") and page.is_hidden("#live-console")
    assert "no session is running" in page.text_content("#message")
    ctx.close()
