"""The rollout loop's stop conditions, EMA, events and hold/home discipline."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from spabench.bench.errors import BenchFault
from spabench.operator.status import LoopStats
from spabench.policy.broker import ActionBroker
from spabench.rollout.controls import StopControl
from spabench.rollout.loop import Rollout
from spabench.rollout.observers import MotionDetector
from spabench.rollout.types import EpisodeMeta, ObserverBase
from tests.rollout.stubs import ScriptedClient, StubBench


class Collect(ObserverBase):
    def __init__(self):
        self.meta, self.steps, self.events, self.result = None, [], [], None

    def on_episode_start(self, meta):
        self.meta = meta

    def on_step(self, step):
        self.steps.append(step)

    def on_event(self, event):
        self.events.append(event)

    def on_episode_end(self, result):
        self.result = result

    def kinds(self):
        return [e.kind for e in self.events]


def _run(card, bench=None, client=None, timer_s=0.3, controls=None, observers=()):
    bench = bench or StubBench()
    client = client or ScriptedClient(card)
    broker = ActionBroker(client, card)
    col = Collect()
    try:
        ro = Rollout(bench, broker, card, timer_s=timer_s, observers=[col, *observers], controls=controls)
        result = ro.run(EpisodeMeta(attempt_id="x"), "do it")
    finally:
        broker.stop()
    return result, col, bench, client


def test_timer_stop_is_valid(card):
    result, col, bench, client = _run(card)
    assert result.stop_reason == "timer" and result.valid and result.invalid_reason is None
    # the 0.3 s timer ended it at 100 Hz: never more ticks than time slots, none at or after 0.3 s on
    # the loop's own clock (how many a loaded machine ran is the scheduler's business)
    assert 1 <= result.n_steps <= 31 and len(col.steps) == result.n_steps
    assert col.steps[-1].t < 0.3
    assert client.resets == 1
    assert bench.calls[-2:] == ["hold", "go_home"]
    assert {"timer_started", "ema_reset", "hold", "went_home", "episode_end"} <= set(col.kinds())


class _StopAfterActions(ObserverBase):
    """Requests an operator stop once n ticks executed a policy action (the first chunk arrives when
    the machine gets to it: no timer is short enough to be sure of it, none long enough to be quick)."""

    def __init__(self, controls: StopControl, n: int = 1) -> None:
        self.controls, self.n, self.acted = controls, n, 0

    def on_step(self, step) -> None:
        self.acted += step.chunk_id >= 0
        if self.acted >= self.n:
            self.controls.request("operator_stop", "test")


def test_ema_filters_non_gripper(card):
    controls = StopControl()
    result, col, bench, client = _run(card, timer_s=60.0, controls=controls,
                                      observers=[_StopAfterActions(controls)])
    assert result.stop_reason == "operator_stop" and result.valid
    acted = [s for s in col.steps if s.chunk_id >= 0]
    assert len(acted) == 1   # the stop is seen at the next tick
    first = acted[0]
    # EMA state starts at the measured joints (shoulder_pan 0): 0.25 * 10 + 0.75 * 0 = 2.5
    assert first.raw_action[0] == 10.0
    assert first.executed_action[0] == pytest.approx(2.5)
    np.testing.assert_allclose(first.executed_action[5], first.raw_action[5])  # gripper never filtered
    assert col.meta.cameras == ("wrist", "middle") and col.meta.camera_shapes["wrist"] == (8, 8, 3)
    assert first.request_latency_s >= 0 and first.server_ms == 1.5


def test_clamps_become_events(card):
    bench = StubBench(max_step=0.5)
    result, col, *_ = _run(card, bench=bench)
    clamps = [e for e in col.events if e.kind == "clamp"]
    assert clamps and clamps[0].detail["joint"] == "shoulder_pan"
    assert clamps[0].detail["reason"] == "max_relative_target"


@pytest.mark.parametrize("kind,valid,reason,homed", [
    ("operator_stop", True, None, True),
    ("abort", False, "operator_abort", True),
    ("estop", False, "estop", False),
])
def test_operator_requests(card, kind, valid, reason, homed):
    controls = StopControl()
    threading.Timer(0.1, controls.request, args=(kind, "test")).start()
    result, col, bench, _ = _run(card, timer_s=60.0, controls=controls)
    assert result.stop_reason == kind and result.valid is valid and result.invalid_reason == reason
    # no tick after the loop saw the request (measured before: duration < 2 s, the scheduler's number)
    (seen,) = [e for e in col.events if e.kind == "stop_requested"]
    assert all(s.t <= seen.t for s in col.steps)
    assert ("go_home" in bench.calls) is homed and "hold" in bench.calls


def test_server_lost_mid_rollout_is_invalid_and_arm_holds(card):
    client = ScriptedClient(card, fail_after=2)
    bench = StubBench()
    result, col, bench, _ = _run(card, bench=bench, client=client, timer_s=60.0)
    assert not result.valid and result.stop_reason == "fault" and result.invalid_reason == "server_lost"
    n_acts = bench.calls.index("hold")
    assert bench.calls[n_acts:] == ["hold", "go_home"]  # no action after the fault
    assert any(e.kind == "fault" and e.detail["invalid_reason"] == "server_lost" for e in col.events)


@pytest.mark.parametrize("component,reason", [("bus", "bus_error"), ("camera:wrist", "camera_lost")])
def test_bench_faults(card, component, reason):
    bench = StubBench(fail_observe_at=6, fault=BenchFault("gone", component=component))
    result, col, bench, _ = _run(card, bench=bench, timer_s=60.0)
    assert not result.valid and result.invalid_reason == reason
    assert "hold" in bench.calls
    assert ("go_home" in bench.calls) is (reason != "bus_error")


class _CtrlCAtTick(ObserverBase):
    """Ctrl-C once the loop has run a tick (inside the rollout's SIGINT handler), not after a fixed
    delay that a loaded machine could spend before the handler is installed."""

    def __init__(self, tick: int) -> None:
        self.tick = tick

    def on_step(self, step) -> None:
        if step.index == self.tick:
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_aborts_the_episode(card):
    result, col, bench, _ = _run(card, timer_s=60.0, observers=[_CtrlCAtTick(3)])
    assert result.stop_reason == "abort" and result.invalid_reason == "operator_abort"
    assert bench.calls[-2:] == ["hold", "go_home"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_pre_rollout_assist_lift_is_recorded_before_the_timer(card):
    card.pre_rollout_assist = {"type": "lift", "dz_mm": 10.0}
    result, col, bench, _ = _run(card)
    kinds = col.kinds()
    assert kinds.index("pre_rollout_assist") < kinds.index("timer_started")
    ev = col.events[kinds.index("pre_rollout_assist")]
    assert ev.detail["dz_mm"] == 10.0 and ev.detail["approximate"] is True
    assert ev.detail["end_state"][1] == pytest.approx(ev.detail["start_state"][1] + ev.detail["delta_deg"])
    # the EMA restarts from the lifted pose, not from the pose before the assist
    ema = col.events[kinds.index("ema_reset")]
    assert ema.detail["state"][1] == pytest.approx(ev.detail["end_state"][1])


def test_motion_detector_and_stats(card):
    motion, stats, controls = MotionDetector(), LoopStats(), StopControl()
    result, col, *_ = _run(card, timer_s=60.0, controls=controls,
                           observers=[motion, stats, _StopAfterActions(controls, 10)])
    assert motion.moved is True and result.motion_onset == motion.onset is not None
    # the status line's rate is the rate the ticks actually ran at, and pacing never exceeds 100 Hz
    window = [s.t for s in col.steps][-stats.window:]
    ran = (len(window) - 1) / (window[-1] - window[0])
    assert stats.steps == result.n_steps and stats.rate_hz == pytest.approx(ran)
    assert stats.rate_hz <= 100.0 * 1.1


def test_no_motion_when_policy_holds(card):
    class Still(ScriptedClient):
        def infer(self, obs, instruction):
            chunk = super().infer(obs, instruction)
            chunk.actions[:] = obs.state
            return chunk

    motion = MotionDetector()
    result, *_ = _run(card, client=Still(card), observers=[motion])
    assert result.valid and motion.moved is False and result.motion_onset is None


def test_ctrl_c_while_going_home_stops_the_motion(card):
    class SlowHome(StubBench):
        def go_home(self, should_stop=None):
            self.calls.append("go_home")
            threading.Timer(0.05, os.kill, args=(os.getpid(), signal.SIGINT)).start()
            time.sleep(60.0)  # a blocking motion, interrupted by the Ctrl-C above (60 s only bounds a hang)
            self.calls.append("home_reached")

    result, col, bench, _ = _run(card, bench=SlowHome(), timer_s=0.1)
    assert "home_reached" not in bench.calls and bench.calls[-1] == "hold"
    assert "go_home_interrupted" in col.kinds()
    assert result.valid and result.stop_reason == "timer"  # the rollout itself had ended validly


@pytest.mark.parametrize("kind", ["operator_stop", "estop"])
def test_the_recorded_stop_event_keeps_its_own_kind(card, tmp_path, kind):
    """The episode file (real Recorder, real HDF5) says a stop was requested, and which one; the
    request's kind must not overwrite the event's kind (measured on main: kind 'estop')."""
    from spabench.record.reader import EpisodeReader
    from spabench.record.recorder import Recorder, RecorderConfig

    controls = StopControl()
    threading.Timer(0.1, controls.request, args=(kind, "console button")).start()
    with Recorder(tmp_path, RecorderConfig(video=False)) as rec:
        result, col, *_ = _run(card, timer_s=60.0, controls=controls, observers=[rec])
        assert rec.wait_idle(60)
    assert result.stop_reason == kind
    with EpisodeReader(tmp_path / "episodes" / "x") as ep:
        events = ep.events()
    stops = [e for e in events if e.get("request") == kind]
    assert [e["kind"] for e in stops] == ["stop_requested"]
    assert stops[0]["source"] == "console button" and stops[0]["t"] >= 0
    assert [e["kind"] for e in events].count("stop_requested") == 1


def test_event_detail_cannot_overwrite_kind_or_time():
    from spabench.rollout.types import Event

    assert Event("clamp", 1.5, {"joint": "gripper"}).as_dict() == {"kind": "clamp", "t": 1.5, "joint": "gripper"}
    for key in ("kind", "t"):
        with pytest.raises(ValueError, match=f"'{key}'"):
            Event("stop_requested", 0.0, {key: "estop"})


def test_an_estop_stays_latched_across_clear():
    """clear() runs before every rollout: it forgets stop/abort, never an e-stop (measured on main:
    an e-stop between rollouts was wiped and the next rollout ran)."""
    controls = StopControl()
    controls.stage = "scene reset"
    controls.request("abort", "key 'a'")
    controls.clear()
    assert controls.pending() is None and not controls.estopped()
    controls.request("estop", "console button")
    controls.stage = "rollout"
    controls.request("estop", "key 'e'")   # a second press does not rewrite the first
    controls.clear()
    assert controls.pending() == ("estop", "console button") and controls.estopped()
    info = controls.estop()
    assert (info["source"], info["during"]) == ("console button", "scene reset") and info["wall_time"] > 0


def test_a_stop_ends_the_wait_for_the_next_tick(card):
    """The loop sleeps most of each period; a stop that comes then acts when it comes, not a period later
    (at 30 Hz that was up to 33 ms added to every e-stop). A 20 s period makes "not at the next tick" a
    property: the request comes ~0.1 s after the first tick and the stop is seen before the second."""
    from dataclasses import replace

    controls = StopControl()

    class StopSoonAfterTheFirstTick(ObserverBase):
        def on_step(self, step) -> None:
            if step.index == 0:
                threading.Timer(0.1, controls.request, args=("estop", "test")).start()

    result, col, bench, _ = _run(replace(card, control_hz=0.05), timer_s=60.0, controls=controls,
                                 observers=[StopSoonAfterTheFirstTick()])
    assert result.stop_reason == "estop" and result.n_steps == 1
    seen = next(e for e in col.events if e.kind == "stop_requested")
    assert seen.t < 20.0    # the second tick was due at 20 s on the loop's clock
