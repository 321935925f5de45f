"""The e-stop is honoured at any moment of a session, not only during a rollout: here while the arm
goes home after one. Real LeRobot stack on the emulated bus, a real openpi server on loopback."""

from __future__ import annotations

import io
import threading
import time

import numpy as np

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.config import SpabenchConfig
from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import EXIT_BENCH, Session
from spabench.rollout.types import ObserverBase
from spabench.suite.vocabulary import JOINTS
from tests.integration.harness import RUN_GROUPS, WaveServer, cfg_data, make_campaign
from tests.support.feetech_bus import EmulatedBus

HOME = np.array([DEFAULT_HOME_POSE[j] for j in JOINTS])


def _present(bus: EmulatedBus) -> np.ndarray:
    return np.array([bus.present_deg(j) for j in JOINTS])


def _at_rest(bus: EmulatedBus) -> None:
    """No goal is written any more and every goal equals the measured position (the arm holds)."""
    n = len(bus.goal_writes())
    time.sleep(0.3)
    assert len(bus.goal_writes()) == n
    np.testing.assert_allclose([bus.goal_deg(j) for j in JOINTS], _present(bus), atol=0.2)


def _cfg(campaign, bus, server, *, console_port: int | None = None, home_speed: float | None = None,
         timer_s: float = 2.0) -> SpabenchConfig:
    """The harness's run config; operator=web on `console_port` when given; a slower homing speed."""
    operator = {"type": "web", "console": {"port": console_port, "camera_check_s": 0.3}} if console_port else None
    data = cfg_data(campaign, bus.port, server.port, timer_s=timer_s, operator=operator)
    if home_speed is not None:
        data["bench"]["home_speed_deg_s"] = home_speed
    return SpabenchConfig.from_mapping(data, groups=RUN_GROUPS)


def _estop_events(campaign):
    with Ledger.open(campaign, readonly=True) as ledger:
        return [{**e["payload"], "attempt_id": e["attempt_id"]} for e in ledger.events(kind="estop")]


def _attempts(campaign):
    with Ledger.open(campaign, readonly=True) as ledger:
        return {t.trial_id: ledger.attempts_for(t.trial_id) for t in ledger.trials()}


class EStopWhileHoming(ObserverBase):
    """At the rollout's final 'hold' (homing starts next), press e-stop once `after_steps` more
    shoulder_pan goals have been written: a person hitting the button mid-motion."""

    def __init__(self, bus: EmulatedBus, controls, after_steps: int = 4):
        self.bus, self.controls, self.after_steps = bus, controls, after_steps
        self.at_hold: np.ndarray | None = None
        self.writes_at_press: int | None = None

    def on_event(self, event) -> None:
        if event.kind != "hold" or self.at_hold is not None:
            return
        self.at_hold = _present(self.bus)
        n0 = len(self.bus.goal_writes("shoulder_pan"))

        def press():
            deadline = time.monotonic() + 20
            while len(self.bus.goal_writes("shoulder_pan")) < n0 + self.after_steps and time.monotonic() < deadline:
                time.sleep(0.002)
            self.writes_at_press = len(self.bus.goal_writes("shoulder_pan"))
            self.controls.request("estop", "key 'e'")

        threading.Thread(target=press, daemon=True).start()


def test_estop_while_going_home_after_the_rollout_holds_and_ends_the_session(tmp_path):
    """Measured on main: the e-stop was ignored while going home ('went_home'), and the next trial ran."""
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        out = io.StringIO()  # home at 15 deg/s: half a degree per step at 30 Hz
        session = Session(_cfg(campaign, bus, server, home_speed=15.0), out=out)
        try:
            assert session.open()
            tripwire = EStopWhileHoming(bus, session.controls)
            session.operator.observers = lambda: [tripwire]
            code = session.loop()
        finally:
            session.close()
        _at_rest(bus)
        writes_after = len(bus.goal_writes("shoulder_pan")) - tripwire.writes_at_press
        left = float(np.max(np.abs(_present(bus) - HOME)))
    moved_away = float(np.max(np.abs(tripwire.at_hold - HOME)))
    assert moved_away > 5.0, moved_away              # the policy had taken the arm away from home
    assert writes_after <= 3, writes_after            # at most two more homing steps, then the hold
    assert left > moved_away - 3.5, (left, moved_away)  # stopped short of home
    assert code == EXIT_BENCH, out.getvalue()
    attempts = _attempts(campaign)
    assert attempts["E0001-P1"] == []                 # the session ended: no next trial
    (attempt,) = attempts["E0000-P1"]
    assert (attempt.status, attempt.stop_reason) == ("complete", "timer")  # the rollout itself ended validly
    with EpisodeReader(campaign / attempt.episode_path) as ep:
        kinds = [e["kind"] for e in ep.events()]
        interrupted = [e for e in ep.events() if e["kind"] == "go_home_interrupted"]
    assert "went_home" not in kinds
    assert interrupted and interrupted[0]["request"] == "estop" and interrupted[0]["source"] == "key 'e'"
    (event,) = _estop_events(campaign)
    assert event["during"] == "homing after the rollout" and event["attempt_id"] == attempt.attempt_id
