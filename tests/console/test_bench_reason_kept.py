"""The override reason an operator types on the bench page survives the page's redraws.

Measured on main (CI of stop 45, loaded): test_bench_gate typed a reason and pressed "Scene ready", and
the session refused it as "no reason" until the test gave up. The background worker's twin views had
arrived meanwhile; the page redrew the scene reset for them and cleared the reason box (and hid it), so
the click sent no reason. An operator typing while the views arrive loses the text the same way.

Here the session side is a BenchChannel driven by the test (no session, no arm), served by a real
ConsoleServer to Chromium at 1366x768."""

from __future__ import annotations

import pytest

from spabench.console.channel import BenchChannel

from .conftest import free_port, plan_small

pytestmark = [pytest.mark.sim, pytest.mark.slow]
REASON = "reference photo shows a lamp since moved"
CARD = {"alias": "policy A", "trial_id": "t0001", "first_attempt": False, "references": {},
        "rendered": {"files": []}}


def test_a_typed_reason_survives_the_twin_views_arriving(browser, tmp_path):
    from spabench.console.app import ConsoleContext, build_app
    from spabench.console.config import ConsoleConfig
    from spabench.console.server import ConsoleServer

    cfg = ConsoleConfig(port=free_port())
    channel = BenchChannel()
    channel.set_phase("reset", card=dict(CARD), threshold=1.0, alignment={"middle": 0.9, "overhead": 0.95},
                      roi=[0, 0, 1, 1])
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=plan_small(tmp_path / "campaign"), cfg=cfg,
                                                         channel=channel)), cfg).start()
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    page = ctx.new_page()
    try:
        page.goto(f"http://127.0.0.1:{server.port}/bench")
        page.wait_for_selector("#override-box:not([hidden])", timeout=30_000)   # below the threshold: asked
        page.fill("#override-reason", REASON)
        # the background worker's views arrive (the session's _views_arrived): same question, new card
        channel.update(card={**CARD, "rendered": {"files": ["placement"]}})
        page.wait_for_selector("#rendered-placement", state="attached", timeout=30_000)
        assert page.is_visible("#override-box")
        assert page.input_value("#override-reason") == REASON
        page.click("#ready")
        command = channel.wait_command(30.0)
        assert command is not None and command[0] == "ready"
        assert command[1].get("override_reason") == REASON
        channel.accept()
        # the next trial's reset starts with an empty reason
        channel.set_phase("reset", card={**CARD, "trial_id": "t0002"}, threshold=1.0,
                          alignment={"middle": 0.9}, roi=[0, 0, 1, 1])
        page.wait_for_function("() => document.querySelector('#override-reason').value === ''", timeout=30_000)
    finally:
        ctx.close()
        server.stop()
