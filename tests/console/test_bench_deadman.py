"""Closing the bench page mid-rollout holds the arm (issue 18). Measured on main: Chromium killed
mid-rollout, the arm ran to the timer and the session then waited forever at scoring; nothing noticed.

Chromium at 1366x768 runs a real `operator=web` session on the emulated SO-101 bus (LeRobot's
SO101Follower on a pty) with a real openpi server. The page is closed during the rollout; the
session's dead-man must latch `console_lost` once the page has been silent for
`operator.console.deadman_s`, the servos must get no moving goal after that, the attempt must be
invalid (`console_lost`) and the session must end saying why. Everything is timed from what the
session received (its last request from the page) and what the bus received, never from the test's
own clock."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest

from spabench.ledger import Ledger
from spabench.rollout.exits import EXIT_BENCH
from spabench.rollout.session import Session
from spabench.suite.vocabulary import JOINTS
from tests.integration.harness import WaveServer, make_campaign
from tests.integration.test_estop import _cfg
from tests.support.feetech_bus import EmulatedBus

from .conftest import _phase, _steps_at_least, free_port, wait_http

pytestmark = [pytest.mark.bench, pytest.mark.slow]

DEADMAN_S = 1.0
TOLERANCE_DEG = 0.2


def _last_moving_write(bus: EmulatedBus) -> float:
    """The time of the last goal the servos received that differs from where the arm now holds: the
    hold (and the shutdown's hold) write the held pose again, which is no motion."""
    held = {j: bus.goal_deg(j) for j in JOINTS}
    moving = [w.t for j in JOINTS for w in bus.goal_writes(j)
              if abs(bus.ticks_to_deg(j, w.ticks) - held[j]) > TOLERANCE_DEG]
    assert moving, "the arm never moved"
    return max(moving)


def test_closing_the_page_mid_rollout_holds_the_arm_and_records_console_lost(tmp_path, browser):
    campaign = make_campaign(tmp_path)
    port = free_port()
    out = io.StringIO()
    ended: dict = {}
    with EmulatedBus() as bus, WaveServer() as server:
        session = Session(_cfg(campaign, bus, server, console_port=port, timer_s=30.0), out=out)

        def body():
            try:
                if session.open():
                    ended["code"] = session.loop()
            except BaseException as exc:   # reported below
                ended["error"] = exc
            finally:
                session.close()

        runner = threading.Thread(target=body, daemon=True)
        runner.start()
        ctx = browser.new_context(viewport={"width": 1366, "height": 768})
        page = ctx.new_page()
        try:
            wait_http(f"http://127.0.0.1:{port}/api/meta", 60)
            page.goto(f"http://127.0.0.1:{port}/bench")
            _phase(page, "camera_check")
            page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
            page.click("#confirm-cameras")
            _phase(page, "reset")
            page.click("#ready")
            _phase(page, "rollout")
            _steps_at_least(page, 15)       # the policy is moving the arm
            page.close()                    # the operator closes the tab (or the browser dies)
        finally:
            ctx.close()
        runner.join(90)
        assert not runner.is_alive(), out.getvalue()
        latched_at = session.controls.estop_latched_at()
        last_beat = session.operator.channel.last_beat
        last_move = _last_moving_write(bus)
        held = np.array([bus.goal_deg(j) for j in JOINTS])
        present = np.array([bus.present_deg(j) for j in JOINTS])
    assert "error" not in ended, ended
    text = out.getvalue()
    assert ended["code"] == EXIT_BENCH, text
    assert latched_at is not None, text
    # the dead-man waited deadman_s after the last request the session received, not less; the margin
    # is the watchdog thread's wake-up on a loaded machine
    assert DEADMAN_S <= latched_at - last_beat < DEADMAN_S + 0.5, latched_at - last_beat
    # the arm holds: no goal that moves it after the latch but the tick under way (one 30 Hz period,
    # plus that tick's own work on a loaded machine); the held goals are where the arm is
    assert last_move - latched_at < 0.25, last_move - latched_at
    assert last_move - last_beat < DEADMAN_S + 0.75, last_move - last_beat
    np.testing.assert_allclose(held, present, atol=1.0)
    assert "CONSOLE LOST during rollout: no request from the bench page for 1 s" in text, text
    assert "console lost: the arm is held where it stopped, torque on" in text, text
    with Ledger.open(campaign, readonly=True) as ledger:
        (attempt,) = ledger.attempts_for("E0000-P1")
        (event,) = ledger.events(kind="console_lost")
        assert ledger.events(kind="estop") == []
    assert (attempt.status, attempt.stop_reason, attempt.invalid_reason) == ("invalid", "console_lost", "console_lost")
    assert event["attempt_id"] == attempt.attempt_id and event["payload"]["during"] == "rollout"
    assert event["payload"]["deadman_s"] == DEADMAN_S
