"""The bench page during a cool-down (issue 20): a motor heated in trial 1 pauses the web session
before trial 2, and the page shows it (phase 'cooling', the temperatures and the wait) until the
motors are below the resume temperature. Real LeRobot SO101Follower on the emulated Feetech bus (its
thermal model, spabench's heating injection), a real openpi server on loopback, the real console
server, the bench page in Chromium."""

from __future__ import annotations

import io
import math
import re
import threading

import pytest

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK
from tests.console.conftest import free_port
from tests.integration.harness import WaveServer, cfg_data, make_campaign, run_config, when
from tests.integration.test_estop import Console
from tests.support.feetech_bus import EmulatedBus


@pytest.mark.bench
def test_the_bench_page_shows_the_cool_down_until_the_motors_cooled(tmp_path, browser):

    campaign = make_campaign(tmp_path, n=2)
    port = free_port()
    seen: dict = {}

    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        when(lambda: server.calls >= 3, bus.set_temperature, "elbow_flex", 57.0)   # hot, below the hard limit
        data = cfg_data(campaign, bus.port, server.port, timer_s=1.5,
                        operator={"type": "web", "rater": "Ada", "console": {"port": port, "camera_check_s": 0.3}},
                        bench={"health": {"cool_poll_s": 0.2}})
        out = io.StringIO()
        result: dict = {}
        # the session on a thread, the person at the page on this one (Playwright's sync API stays on
        # the thread that made the browser)
        session = threading.Thread(target=lambda: result.update(code=run(
            run_config(data), out=out)), daemon=True)
        session.start()
        c = Console(port)
        try:
            c.wait("camera_check", lambda s: s.get("all_live"))
            c.command("confirm_cameras")
            c.wait("reset")
            c.command("ready")
            c.wait("score", timeout=60)
            c.command("leave")                                  # trial 1 left unscored
            seen["state"] = c.wait("cooling", timeout=60)["message"]
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            try:
                page.goto(f"{c.base}/bench")
                page.wait_for_function("() => document.querySelector('#phase').textContent === 'cooling'",
                                       timeout=30_000)
                page.wait_for_function(
                    "() => document.querySelector('#message').textContent.includes('elbow_flex')", timeout=30_000)
                seen["page"] = page.locator("#message").inner_text()
                # issue 34: the cool-down panel, in view at 1366x768, not one grey line
                panel = page.locator("#cooling")
                panel.wait_for(state="visible", timeout=30_000)
                seen["panel"] = {k: page.locator(f"#cool-{k}").inner_text() for k in ("motor", "temp", "resume", "eta")}
                seen["arm"] = page.locator("#cool-arm").inner_text()
                box = panel.bounding_box()
                assert box is not None and box["y"] + box["height"] <= 768, box
                changed_at = int(page.locator("#cool-temp").inner_text().split()[0])
                bus.set_thermal(tau_s=20.0)                    # now it cools at a measurable rate
                page.wait_for_function(
                    "() => /about \\d+ (min \\d+ )?s left/.test(document.querySelector('#cool-eta').textContent)",
                    timeout=30_000)
                # once the page shows a reading four degrees below the one at the change, the last four
                # falls all came at the new rate: the estimate is compared with the model's time to 45 C
                page.wait_for_function(
                    f"() => parseInt(document.querySelector('#cool-temp').textContent) <= {changed_at - 4}",
                    timeout=30_000)
                seen["eta"] = (page.locator("#cool-eta").inner_text(), bus.temperature("elbow_flex"))
            finally:
                page.close()
            try:
                c.wait("reset", timeout=60)                    # trial 2 comes after the cool-down
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the session said:\n{out.getvalue()}") from None
        finally:
            c.end_session()
            session.join(60)
    code = result.get("code")
    assert code == EXIT_OK, out.getvalue()
    for text in (seen["state"], seen["page"]):                  # what the page showed, as the terminal said it
        assert "cooling down" in text and "resume below 45 C" in text and "elbow_flex" in text, text
    panel = seen["panel"]
    assert panel["motor"] == "elbow_flex" and panel["resume"] == "45 °C", panel
    assert 45 < int(panel["temp"].split()[0]) <= 57, panel
    # at the default thermal time constant (300 s) one degree takes seconds: no rate yet to go by
    assert panel["eta"] == "estimating the time left", panel
    assert "The arm is homed" in seen["arm"], seen["arm"]
    # the estimate against the emulator's own first-order model (ambient 25 C, tau 20 s) at that moment
    eta_text, celsius = seen["eta"]
    shown = sum(int(n) * (60 if unit == "min" else 1) for n, unit in re.findall(r"(\d+) (min|s)", eta_text))
    truth = 20.0 * math.log((celsius - 25.0) / (45.0 - 25.0))
    assert 0.5 * truth - 2 <= shown <= 2.0 * truth + 2, (eta_text, truth)
    assert "motors cooled below 45 C" in out.getvalue()
    with Ledger.open(campaign, readonly=True) as ledger:
        cool = [e["payload"] for e in ledger.events() if e["kind"] == "cool_down"]
        attempts = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
    assert cool and list(cool[0]["hot"]) == ["elbow_flex"] and max(cool[0]["after_c"].values()) < 45
    assert [a.trial_id for a in attempts] == ["E0000-P1"]      # the operator ended before trial 2 ran
