"""The e-stop is honoured at any moment of a session, not only during a rollout: at the scene reset,
while the arm goes home before a trial, and while it goes home after one. Real LeRobot stack on the
emulated bus, a real openpi server on loopback, the real console server (operator=web) driven over
HTTP the way the bench page does it."""

from __future__ import annotations

import contextlib
import io
import threading
import time
from typing import Any

import httpx
import numpy as np

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import RunConfig, run
from spabench.rollout.exits import EXIT_BENCH
from spabench.rollout.session import Session
from spabench.rollout.types import ObserverBase
from spabench.suite.vocabulary import JOINTS
from tests.console.conftest import free_port
from tests.integration.harness import WaveServer, cfg_data, make_campaign, run_config
from tests.support.campaigns import LOADED_DEADMAN_S
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
         timer_s: float = 2.0, deadman_s: float | None = None, realtime_priority: int | None = None) -> RunConfig:
    """The harness's run config; operator=web on `console_port` when given; a slower homing speed;
    `deadman_s`: the console's dead-man (None: the default); `realtime_priority`: the bench's (None: the
    test rig's 0)."""
    console = {"port": console_port, "camera_check_s": 0.3, **({"deadman_s": deadman_s} if deadman_s else {})}
    operator = ({"type": "web", "rater": "Ada", "console": console}
                if console_port else None)  # the rater a person gives (operator.rater=), asked otherwise
    data = cfg_data(campaign, bus.port, server.port, timer_s=timer_s, operator=operator)
    if home_speed is not None:
        data["bench"]["home_speed_deg_s"] = home_speed
    if realtime_priority is not None:
        data["bench"]["realtime_priority"] = realtime_priority
    return run_config(data)


class Console:
    """The person at the bench page: reads /api/bench/state, posts commands and stop requests. While
    it plays, it also polls the state every 0.2 s as the page does (the session's dead-man hears
    those); `page_open.clear()` stops that, like closing the page."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.errors: list[BaseException] = []
        self._csrf = ""
        self.page_open = threading.Event()
        self.http: Any = httpx   # a new connection per request; FloodedConsole keeps them, as a browser does

    def headers(self) -> dict:
        """A script's state-changing requests carry the console's CSRF token (from /api/meta)."""
        if not self._csrf:
            self._csrf = self.http.get(self.base + "/api/meta", timeout=5).json()["csrf_token"]
        return {"x-spabench-csrf": self._csrf}

    def state(self) -> dict:
        return self.http.get(self.base + "/api/bench/state", timeout=5).json()

    def wait(self, phase: str, ready=lambda s: True, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                s = self.state()
                if s.get("phase") == phase and ready(s):
                    return s
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"the console never showed phase {phase!r}")

    def command(self, name: str, **payload) -> httpx.Response:
        return self.http.post(self.base + "/api/bench/command", json={"command": name, "payload": payload},
                          headers=self.headers(), timeout=5)

    def stop(self, kind: str, source: str = "button") -> httpx.Response:
        return self.http.post(f"{self.base}/api/bench/stop/{kind}", params={"source": source}, json={},
                          headers=self.headers(), timeout=5)

    def end_session(self, within_s: float = 30.0) -> None:
        """Whatever the console is waiting for, end the session (so a refused e-stop cannot hang a test)."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                phase = self.state().get("phase")
            except httpx.HTTPError:
                return  # the session (and its console) is gone
            if phase in ("camera_check", "reset"):
                self.command("end")
            elif phase == "score":
                self.command("leave")
            elif phase == "estop_cause":   # after an e-stop the page asks why (issue 19)
                self.command("estop_cause", cause="operator")
            elif phase == "ended":
                return
            time.sleep(0.1)

    def play(self, script) -> threading.Thread:
        done = threading.Event()

        def poll():
            while not done.wait(0.2):
                if self.page_open.is_set():
                    with contextlib.suppress(httpx.HTTPError):   # the console is gone: the session ended
                        self.http.get(self.base + "/api/bench/state", params={"viewer": "script"}, timeout=5)

        def body():
            try:
                script(self)
            except BaseException as exc:  # reported by the test after run() returns
                self.errors.append(exc)
            finally:
                self.end_session()
                done.set()

        self.page_open.set()
        threading.Thread(target=poll, daemon=True).start()
        t = threading.Thread(target=body, daemon=True)
        t.start()
        return t


def _progress_after_latch(bus: EmulatedBus, joint: str, latched_at: float) -> float:
    """How far (deg) the goals the servo received after the e-stop latched went beyond the last goal it
    received before it, towards home. Measured from the latch's own time, so how long the request took
    to arrive (HTTP under load) does not matter; the hold writes the measured pose, which lags behind."""
    home = HOME[JOINTS.index(joint)]
    goals = [(w.t, bus.ticks_to_deg(joint, w.ticks)) for w in bus.goal_writes(joint)]
    before = [g for t, g in goals if t <= latched_at]
    after = [g for t, g in goals if t > latched_at]
    assert before and after, (len(before), len(after))     # latched mid-motion, then held
    return max(abs(before[-1] - home) - abs(g - home) for g in after)


class RecordingSession(Session):
    """The session `run` builds, kept so a test can read its stop latch."""

    made: list[Session] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        RecordingSession.made.append(self)


def _estop_events(campaign):
    with Ledger.open(campaign, readonly=True) as ledger:
        return [{**e["payload"], "attempt_id": e["attempt_id"]} for e in ledger.events(kind="estop")]


def _attempts(campaign):
    with Ledger.open(campaign, readonly=True) as ledger:
        return {t.trial_id: ledger.attempts_for(t.trial_id) for t in ledger.trials()}


def test_console_estop_at_the_scene_reset_ends_the_session(tmp_path):
    """Measured on main: 409 'no rollout is running', and the session waited on as if nothing happened."""
    campaign = make_campaign(tmp_path)
    port = free_port()
    replies: dict[str, httpx.Response] = {}

    def script(c: Console):
        c.wait("camera_check", lambda s: s.get("all_live"))
        assert c.command("confirm_cameras").status_code == 200
        c.wait("reset")
        replies["stop"] = c.stop("operator_stop")
        replies["estop"] = c.stop("estop")
        causes = c.wait("estop_cause", timeout=10)["causes"]
        replies["causes"] = [cause["name"] for cause in causes]
        refused = c.command("estop_cause", cause="other", text="")   # taken, then refused: the reply says why
        assert refused.status_code == 409 and "a few words" in refused.json()["error"], refused.text
        assert "a few words" in c.wait("estop_cause", lambda s: bool(s.get("error")), timeout=10)["error"]
        assert c.command("estop_cause", cause="other", text="testing the stop").status_code == 200
        replies["after"] = c.wait("ended", timeout=10)

    out = io.StringIO()
    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        console = Console(port)
        driver = console.play(script)
        code = run(_cfg(campaign, bus, server, console_port=port, deadman_s=LOADED_DEADMAN_S), out=out)
        driver.join(30)
        _at_rest(bus)
    assert not console.errors, console.errors
    assert replies["estop"].status_code == 200, replies["estop"].text
    # stop/abort mean "end this rollout": refused outside one, and the refusal points at the e-stop
    assert replies["stop"].status_code == 409 and "e-stop" in replies["stop"].json()["error"]
    assert "E-STOP" in replies["after"]["message"]
    assert code == EXIT_BENCH, out.getvalue()
    assert "E-STOP" in out.getvalue() and "scene reset" in out.getvalue()
    assert _attempts(campaign) == {"E0000-P1": []}          # nothing started after the e-stop
    (event,) = _estop_events(campaign)
    assert event["source"] == "console button" and event["during"] == "scene reset"
    assert event["trial_id"] == "E0000-P1" and event["attempt_id"] is None
    assert replies["causes"] == ["operator", "other"]       # no policy moved the arm: no "unsafe"
    assert (event["cause"], event["cause_text"]) == ("other", "testing the stop")


def test_console_estop_while_homing_before_the_trial_stops_the_arm(tmp_path, monkeypatch):
    """Measured on main: 409, and the arm went on to the home pose (then the rollout started).

    The reaction is measured from the moment the session latched the e-stop, not from when the test
    sent it: after the latch the servos receive at most the one step already under way, then the hold.
    (Measured before this rewrite: counting writes from the moment the test posted failed 3 of 3
    times at load 6, the HTTP request alone taking 110-195 ms while homing kept stepping.)"""
    from spabench.rollout import commands

    campaign = make_campaign(tmp_path)
    port = free_port()
    seen: dict = {}
    RecordingSession.made = []
    monkeypatch.setattr(commands, "Session", RecordingSession)
    speed = 10.0                                    # deg/s: 1/3 deg per step at 30 Hz, 6 s to home

    with EmulatedBus() as bus, WaveServer() as server:  # every joint at mid-range: home is 60 deg away
        def script(c: Console):
            c.wait("camera_check", lambda s: s.get("all_live"))
            c.command("confirm_cameras")
            c.wait("reset")
            n0 = len(bus.goal_writes("shoulder_lift"))
            c.command("ready")
            c.wait("homing")
            deadline = time.monotonic() + 20
            while len(bus.goal_writes("shoulder_lift")) < n0 + 6 and time.monotonic() < deadline:
                time.sleep(0.005)
            seen["reply"] = c.stop("estop", "key")

        console = Console(port)
        driver = console.play(script)
        out = io.StringIO()
        code = run(_cfg(campaign, bus, server, console_port=port, home_speed=speed, timer_s=1.0,
                            deadman_s=LOADED_DEADMAN_S), out=out)
        driver.join(30)
        _at_rest(bus)
        (session,) = RecordingSession.made
        latched_at = session.controls.estop_latched_at()
        assert latched_at is not None
        progress = _progress_after_latch(bus, "shoulder_lift", latched_at)
        distance = float(np.max(np.abs(_present(bus) - HOME)))
    assert not console.errors, console.errors
    assert seen["reply"].status_code == 200, seen["reply"].text
    assert progress <= speed / 30 + 0.25, progress   # the step under way at the latch, then the hold
    assert distance > 5.0, distance                  # stopped short of home (60 deg away at the start)
    assert code == EXIT_BENCH, out.getvalue()
    assert _attempts(campaign) == {"E0000-P1": []}  # the rollout never started
    (event,) = _estop_events(campaign)
    assert event["source"] == "console key" and event["during"] == "homing before the trial"


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
            torque_writes = len(bus.register_writes("Torque_Enable"))
        finally:
            session.close()
        _at_rest(bus)
        latched_at = session.controls.estop_latched_at()
        assert latched_at is not None
        progress = _progress_after_latch(bus, "shoulder_pan", latched_at)
        left = float(np.max(np.abs(_present(bus) - HOME)))
        # closed after an e-stop, away from home: the motors still hold (an ordinary end lets the arm
        # go, conf/bench disable_torque_on_disconnect; here it would drop onto the scene)
        assert [w for w in bus.register_writes("Torque_Enable")[torque_writes:] if w[2] == 0] == []
        assert all(bus.torque_enabled(j) for j in JOINTS)
    moved_away = float(np.max(np.abs(tripwire.at_hold - HOME)))
    assert moved_away > 5.0, moved_away              # the policy had taken the arm away from home
    assert progress <= 15.0 / 30 + 0.25, progress   # the step under way at the latch, then the hold
    assert left > 1.0, (left, moved_away)              # stopped short of home
    assert code == EXIT_BENCH, out.getvalue()
    attempts = _attempts(campaign)
    assert attempts["E0001-P1"] == []                 # the session ended: no next trial
    (attempt,) = attempts["E0000-P1"]
    assert (attempt.status, attempt.stop_reason) == ("complete", "timer")  # the rollout itself ended validly
    with EpisodeReader(campaign / attempt.episode_path) as ep:
        kinds = [e["kind"] for e in ep.events()]
        interrupted = [e for e in ep.events() if e["kind"] == "go_home_interrupted"]
    assert "went_home" not in kinds
    assert "torque on" in out.getvalue()
    assert interrupted and interrupted[0]["request"] == "estop" and interrupted[0]["source"] == "key 'e'"
    (event,) = _estop_events(campaign)
    assert event["during"] == "homing after the rollout" and event["attempt_id"] == attempt.attempt_id


def test_the_arm_is_let_go_only_at_its_home_pose(tmp_path):
    """conf/bench `disable_torque_on_disconnect` lets the arm go limp when the session ends; measured
    before, it did so wherever the arm was (operator.go_home_after=false: mid-workspace, it would
    drop onto the scene). Now torque goes off only within 2 x home_tolerance_deg of home."""
    results = {}
    for go_home in (True, False):
        (tmp_path / str(go_home)).mkdir()
        campaign = make_campaign(tmp_path / str(go_home))
        with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
            data = cfg_data(campaign, bus.port, server.port, timer_s=1.5,
                            operator={"go_home_after": go_home}, max_trials=1)
            out = io.StringIO()
            assert run(run_config(data), out=out) == 0, out.getvalue()
            away = float(np.max(np.abs(_present(bus) - HOME)))
            results[go_home] = (away, all(bus.torque_enabled(j) for j in JOINTS), out.getvalue())
    (home_away, home_torque, _), (mid_away, mid_torque, mid_out) = results[True], results[False]
    assert home_away <= 4.0 and not home_torque          # homed: let go, as configured
    assert mid_away > 5.0 and mid_torque, mid_out         # left mid-motion: held
    assert "not at its home pose" in mid_out
