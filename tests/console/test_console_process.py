"""The console runs in a process of its own (issue 39). Measured before: the web server and the live
views' JPEG encoding ran as threads of the control process (no console process existed to kill).

Chromium runs a real `operator=web` session on the emulated SO-101 bus (LeRobot's SO101Follower on
a pty) with a real openpi server. (1) The console process is killed mid-rollout: the arm must hold
within the dead-man time of the session noticing it, the attempt is invalid (`console_lost`) and
the session ends saying why. (2) It is killed while the operator stages the scene: the session
restarts it on the same port, the open page reconnects by itself and the trial runs and is scored
from that page. Timed from the latch, the session's notice and the bus's writes, never the test's
clock."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

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
from .test_bench_deadman import DEADMAN_S, _last_moving_write

pytestmark = [pytest.mark.bench, pytest.mark.slow]


class Run:
    """A session on its own thread (as `spabench run` runs it), with what it returned or raised."""

    def __init__(self, session: Session):
        self.session, self.ended = session, {}
        self.thread = threading.Thread(target=self._body, daemon=True)
        self.thread.start()

    def _body(self) -> None:
        try:
            if self.session.open():
                self.ended["code"] = self.session.loop()
        except BaseException as exc:   # reported by the test
            self.ended["error"] = exc
        finally:
            self.session.close()

    def console_process(self):
        """The session's ConsoleProcess once it listens (None before)."""
        op = getattr(self.session, "operator", None)
        return getattr(op, "server", None)


def _wait(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout     # only bounds a hang
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.05)


def _to_reset(page, port: int) -> None:
    wait_http(f"http://127.0.0.1:{port}/api/meta", 60)
    page.goto(f"http://127.0.0.1:{port}/bench")
    _phase(page, "camera_check")
    page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
    page.click("#confirm-cameras")
    _phase(page, "reset")


def test_killing_the_console_process_mid_rollout_holds_the_arm_and_records_console_lost(tmp_path, browser):
    campaign = make_campaign(tmp_path)
    port = free_port()
    out = io.StringIO()
    with EmulatedBus() as bus, WaveServer() as server:
        run = Run(Session(_cfg(campaign, bus, server, console_port=port, timer_s=30.0), out=out))
        ctx = browser.new_context(viewport={"width": 1366, "height": 768})
        page = ctx.new_page()
        try:
            _to_reset(page, port)
            console = run.console_process()
            assert console is not None and console.proc.pid != os.getpid()   # not the control process
            page.click("#ready")
            _phase(page, "rollout")
            _steps_at_least(page, 15)                # the policy is moving the arm
            os.kill(console.proc.pid, signal.SIGKILL)
            run.thread.join(90)
        finally:
            ctx.close()
        assert not run.thread.is_alive(), out.getvalue()
        latched_at = run.session.controls.estop_latched_at()
        noticed = console.down_at
        last_move = _last_moving_write(bus)
        held = np.array([bus.goal_deg(j) for j in JOINTS])
        present = np.array([bus.present_deg(j) for j in JOINTS])
    assert "error" not in run.ended, run.ended
    text = out.getvalue()
    assert run.ended["code"] == EXIT_BENCH, text
    assert latched_at is not None and noticed is not None, text
    # the latch follows the session's notice of the death, well within the dead-man time
    assert 0.0 <= latched_at - noticed < DEADMAN_S, latched_at - noticed
    # no goal that moves the arm after the latch but the tick under way; the held goals are where it is
    assert last_move - latched_at < 0.25, last_move - latched_at
    np.testing.assert_allclose(held, present, atol=1.0)
    assert "CONSOLE LOST during rollout: the console process ended (exit -9)" in text, text
    with Ledger.open(campaign, readonly=True) as ledger:
        (attempt,) = ledger.attempts_for("E0000-P1")
        (event,) = ledger.events(kind="console_lost")
    assert (attempt.status, attempt.stop_reason, attempt.invalid_reason) == ("invalid", "console_lost", "console_lost")
    assert event["attempt_id"] == attempt.attempt_id and event["payload"]["during"] == "rollout"
    assert event["payload"]["console_process"]["exit_code"] == -signal.SIGKILL


def test_a_page_reconnects_to_the_restarted_console_process_and_the_session_runs_on(tmp_path, browser):
    campaign = make_campaign(tmp_path, n=2)
    port = free_port()
    out = io.StringIO()
    with EmulatedBus() as bus, WaveServer() as server:
        run = Run(Session(_cfg(campaign, bus, server, console_port=port, timer_s=1.0), out=out))
        ctx = browser.new_context(viewport={"width": 1366, "height": 768})
        page = ctx.new_page()
        try:
            _to_reset(page, port)
            console = run.console_process()
            first_pid = console.proc.pid
            os.kill(first_pid, signal.SIGKILL)      # while the operator stages the scene
            _wait(lambda: console.restarts >= 1, "the console's restart")
            assert console.port == port and console.proc.pid != first_pid
            # the same page, never reloaded: its polls reach the new process and its commands carry
            # the same CSRF token
            page.wait_for_function("() => !/unreachable/.test(document.querySelector('#error').textContent)",
                                   timeout=30_000)
            _phase(page, "reset")
            for _ in range(2):                       # both trials, scored from that page
                page.click("#ready")
                _phase(page, "score")
                page.check("input[name=success][value=yes]")
                page.click("#submit-score")
                page.wait_for_function("() => document.querySelector('#last-score').dataset.score", timeout=30_000)
                page.evaluate("() => { delete document.querySelector('#last-score').dataset.score; }")
                if _ == 0:
                    _phase(page, "reset")
            run.thread.join(90)
        finally:
            ctx.close()
        assert not run.thread.is_alive(), out.getvalue()
    assert "error" not in run.ended, run.ended
    text = out.getvalue()
    assert run.ended["code"] == 0, text
    assert "console process ended (exit -9); starting it again on port" in text, text
    with Ledger.open(campaign, readonly=True) as ledger:
        (restart,) = ledger.events(kind="console_restarted")
        attempts = [a for t in ("E0000-P1", "E0001-P1") for a in ledger.attempts_for(t)]
        scores = [ledger.scores_for(a.attempt_id) for a in attempts]
        assert ledger.events(kind="console_lost") == []
    assert restart["payload"]["exit_code"] == -signal.SIGKILL and restart["payload"]["port"] == port
    assert restart["payload"]["pid"] == first_pid and restart["payload"]["new_pid"] != first_pid
    assert [a.status for a in attempts] == ["complete", "complete"], attempts
    assert all(s and s[-1].success is True for s in scores), scores
