"""The browser console's dead-man while the arm goes home before a trial (issue 18). Measured on main:
a bench page that went away left no software stop (the arm ran on; the session then waited forever).
Real LeRobot stack on the emulated bus, a real openpi server, the real console driven over HTTP the
way the bench page does it; the page "closes" right after "scene ready". The rollout case, with
Chromium, is tests/console/test_bench_deadman.py."""

from __future__ import annotations

import io
import threading

import numpy as np

from spabench.console.config import ConsoleConfig
from spabench.ledger import Ledger
from spabench.rollout import commands
from spabench.rollout.exits import EXIT_BENCH
from tests.console.conftest import free_port
from tests.integration.harness import WaveServer, make_campaign
from tests.integration.test_estop import (
    HOME,
    Console,
    RecordingSession,
    _at_rest,
    _cfg,
    _present,
    _progress_after_latch,
)
from tests.support.feetech_bus import EmulatedBus

DEADMAN_S = 1.0


def test_a_page_gone_while_homing_before_the_trial_holds_the_arm_and_ends_the_session(tmp_path, monkeypatch):
    campaign = make_campaign(tmp_path)
    port = free_port()
    RecordingSession.made = []
    monkeypatch.setattr(commands, "Session", RecordingSession)
    finished = threading.Event()
    speed = 10.0                                      # deg/s: 6 s to home from mid-range

    def script(c: Console):
        c.wait("camera_check", lambda s: s.get("all_live"))
        c.command("confirm_cameras")
        c.wait("reset")
        c.page_open.clear()                           # the page is gone: no more polls ...
        assert c.command("ready").status_code == 200  # ... after its last request, "scene ready"
        finished.wait(60)                             # (asks nothing until the session has ended)

    with EmulatedBus() as bus, WaveServer() as server:   # every joint at mid-range: home is 60 deg away
        console = Console(port)
        driver = console.play(script)
        out = io.StringIO()
        run_cfg = _cfg(campaign, bus, server, console_port=port, home_speed=speed, timer_s=1.0)
        assert ConsoleConfig.from_mapping(run_cfg.need("operator").console).deadman_s == DEADMAN_S  # the default
        code = commands.run(run_cfg, out=out)
        finished.set()
        driver.join(30)
        _at_rest(bus)
        (session,) = RecordingSession.made
        latched_at = session.controls.estop_latched_at()
        last_beat = session.operator.channel.last_beat
        progress = _progress_after_latch(bus, "shoulder_lift", latched_at)
        distance = float(np.max(np.abs(_present(bus) - HOME)))
    assert not console.errors, console.errors
    # the dead-man latched once the page had been silent for deadman_s (not before; the margin is
    # for the watchdog thread's wake-up on a loaded machine), measured from the last request received
    assert DEADMAN_S <= latched_at - last_beat < DEADMAN_S + 0.5, latched_at - last_beat
    assert progress <= speed / 30 + 0.25, progress    # the step under way at the latch, then the hold
    assert distance > 5.0, distance                   # stopped short of home (60 deg away at the start)
    assert code == EXIT_BENCH, out.getvalue()
    assert "CONSOLE LOST during homing before the trial" in out.getvalue(), out.getvalue()
    assert "console lost: the arm is held where it stopped, torque on" in out.getvalue(), out.getvalue()
    with Ledger.open(campaign, readonly=True) as ledger:
        assert [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)] == []  # no rollout
        assert ledger.events(kind="estop") == []
        (event,) = ledger.events(kind="console_lost")
    payload = event["payload"]
    assert payload["during"] == "homing before the trial" and payload["deadman_s"] == DEADMAN_S
    assert payload["silent_s"] >= DEADMAN_S and payload["trial_id"] == "E0000-P1"
