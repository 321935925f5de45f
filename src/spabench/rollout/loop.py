"""The control loop of one rollout: bench, policy broker, observers.

Per tick, at `card.control_hz` (perf_counter deadlines; sleep, then a short spin):
    observe -> observers -> broker.submit_observation -> next action -> EMA (non-gripper)
    -> bench.act (safety envelope; each clamp an event) -> StepRecord to observers
until the timer, an operator stop, an abort, an e-stop or a fault. The loop never waits on the
network (the broker requests chunks on its own thread) nor on files (observers must be cheap).

On any stop the arm holds; then, except after an e-stop or a motor-health trip, it goes home at
bounded speed (an e-stop or Ctrl-C while it goes home stops it there, holding). With a HealthMonitor
(spabench.bench.health) the loop takes a telemetry sample every few ticks in the slack after the
command (observers get `on_health(sample)`) and checks the motor guards every tick; a trip (stall,
overheat, undervoltage, servo_error) ends the attempt, the arm holds where it is and a pressing
gripper backs off. Faults (server lost, protocol error, bus
error, camera lost) make the attempt invalid with the reason: invalid attempts are re-run, never
counted as policy failures.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from spabench.bench.errors import MotionStopped
from spabench.rollout.assist import _clamp_dict, run_assist
from spabench.rollout.controls import LATCHING_STOPS, StopControl
from spabench.rollout.faults import classify, describe
from spabench.rollout.priority import loop_priority
from spabench.rollout.types import EpisodeMeta, EpisodeResult, Event, StepRecord
from spabench.suite.vocabulary import CAMERAS

if TYPE_CHECKING:
    from spabench.bench.bench import Bench
    from spabench.bench.health import HealthMonitor, HealthTrip
    from spabench.policy.broker import ActionBroker
    from spabench.policy.card import PolicyCard
    from spabench.rollout.ema import EmaFilter

log = logging.getLogger(__name__)

SPIN_S = 0.0015          # last part of each period is spun, not slept (sleep overshoots ~0.1-1 ms)
STALL_PERIODS = 2.0      # a gap between tick starts longer than this many periods is a 'stall' event
_NAN6: np.ndarray = np.full(6, np.nan)

_STOP_INVALID = {"abort": "operator_abort", "estop": "estop", "console_lost": "console_lost"}


def _image_shape(image: Any) -> tuple[int, int, int]:
    """(height, width, channels) of a camera image."""
    height, width, channels = np.asarray(image).shape
    return int(height), int(width), int(channels)


def _nan_to_none(x: float | None) -> float:
    return float("nan") if x is None else float(x)


class TickTiming:
    """Overrun bookkeeping of one rollout: how often a tick finished after its deadline, the worst
    lateness, and the time slots skipped (each one period of control time lost)."""

    def __init__(self, period: float):
        self.period = period
        self.overruns = 0
        self.worst_s = 0.0
        self.slots_skipped = 0
        self.stalls = 0
        self.longest_gap_s = 0.0

    def late(self, late_s: float, skipped: int) -> None:
        self.overruns += 1
        self.worst_s = max(self.worst_s, late_s)
        self.slots_skipped += skipped

    def gap(self, gap_s: float) -> bool:
        """A gap between two tick starts; True when it is a stall (longer than STALL_PERIODS)."""
        self.longest_gap_s = max(self.longest_gap_s, gap_s)
        if gap_s > STALL_PERIODS * self.period:
            self.stalls += 1
            return True
        return False

    def summary(self, executed: int) -> dict:
        return {"executed_ticks": executed, "overruns": self.overruns, "worst_overrun_s": round(self.worst_s, 4),
                "slots_skipped": self.slots_skipped, "time_lost_s": round(self.slots_skipped * self.period, 4),
                "stalls": self.stalls, "longest_tick_gap_s": round(self.longest_gap_s, 4)}


class Rollout:
    """One autonomous execution from a specified scene.

    bench: spabench.bench Bench (observe/act/hold/go_home); broker: ActionBroker; card: PolicyCard;
    ema: EmaFilter (identity when the card has no ema_alpha); timer_s: the rollout timer (the
    trial's); observers: objects with on_episode_start/on_step/on_event/on_episode_end.
    """

    def __init__(self, bench: Bench, broker: ActionBroker, card: PolicyCard, ema: EmaFilter | None = None,
                 timer_s: float | None = None,
                 observers: Sequence[Any] = (), controls: StopControl | None = None,
                 go_home_after: bool = True, clock: Callable[[], float] = time.perf_counter,
                 lockstep: bool = False, health: HealthMonitor | None = None, realtime_priority: int = 0):
        self.bench, self.broker, self.card = bench, broker, card
        if ema is None:
            from spabench.rollout.ema import EmaFilter

            ema = EmaFilter(card.ema_alpha)
        self.ema = ema
        self.timer_s = float(timer_s if timer_s is not None else card.timer_s)
        self.observers = list(observers)
        self.controls = controls or StopControl()
        self.go_home_after = go_home_after
        # Lockstep (the twin only): the clock is the simulator's, which advances one period per act,
        # so nothing is slept, and an empty queue waits for the chunk in flight (simulated time
        # stands still while the policy thinks). A real bench never runs in lockstep.
        self.lockstep = lockstep
        self.clock = clock
        self.period = 1.0 / float(card.control_hz)
        self._t0: float | None = None
        self._record_fault: BaseException | None = None   # first failure of a recording observer
        self.health = health          # spabench.bench.health.HealthMonitor, or None (no telemetry)
        self._trip: HealthTrip | None = None   # the HealthTrip that ended the attempt
        self._chunks: Any = {}        # the broker's chunks by id (their timing goes into each step)
        self.timing = TickTiming(self.period)
        # SCHED_FIFO for the loop's thread during the rollout (rollout.priority); lockstep has no deadlines
        self.realtime_priority = 0 if lockstep else realtime_priority
        self.scheduling = "normal"

    # ---- notifications ------------------------------------------------------------------
    def _notify(self, hook: str, arg) -> None:
        for obs in self.observers:
            fn = getattr(obs, hook, None)
            if fn is None:
                continue
            try:
                fn(arg)
            except Exception as exc:  # an observer bug must not leave the arm moving
                if getattr(obs, "records", False):
                    # the recording (or the storage under it) failed: the attempt cannot be valid;
                    # the loop stops at the next tick and the arm holds (storage_error)
                    if self._record_fault is None:
                        self._record_fault = exc
                        log.warning("recording failed in %s: %s", hook, describe(exc))
                    continue
                log.exception("observer %r failed in %s", obs, hook)
                if hook == "on_episode_start":
                    raise

    def _t(self) -> float:
        return 0.0 if self._t0 is None else self.clock() - self._t0

    def emit(self, kind: str, detail: dict | None = None) -> None:
        self._notify("on_event", Event(kind, self._t() if self._t0 is not None else -1.0, dict(detail or {})))

    # ---- the episode --------------------------------------------------------------------
    def run(self, meta: EpisodeMeta, instruction: str | None = None) -> EpisodeResult:
        """Run the episode; always returns a result (faults become invalid results)."""
        instruction = meta.instruction if instruction is None else instruction
        meta.instruction = instruction
        meta.timer_s, meta.control_hz = self.timer_s, float(self.card.control_hz)
        self._t0 = None
        self._record_fault = None
        self._trip = None
        if self.health is not None:
            self.health.start()
        self.controls.stage = "rollout"
        with self.controls.sigint_aborts():
            return self._run(meta, instruction)

    def _run(self, meta: EpisodeMeta, instruction: str) -> EpisodeResult:
        steps, stop, reason, detail = 0, "fault", None, ""
        started = False
        self.timing = TickTiming(self.period)
        try:
            first = self.bench.observe()
        except Exception as exc:  # no episode without a first observation
            return self._fail_before_start(meta, exc)
        images = first.images
        if not meta.cameras:
            meta.cameras = tuple(c for c in CAMERAS if c in images) + tuple(c for c in images if c not in CAMERAS)
        if not meta.camera_shapes:
            meta.camera_shapes = {c: _image_shape(images[c]) for c in meta.cameras if c in images}
        if not meta.camera_fps:
            fps = self.bench.camera_fps
            meta.camera_fps = {c: float(fps.get(c) or self.card.control_hz) for c in meta.cameras}
        if not meta.start_time:
            meta.start_time = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._notify("on_episode_start", meta)
        started = True
        if self._record_fault is not None:  # nothing can be recorded: do not move at all
            return self._finish("fault", "storage_error", describe(self._record_fault), 0, started)
        try:
            pending = self.controls.pending()
            if pending is None:
                run_assist(self.bench, self.card.pre_rollout_assist or {},
                           float(self.card.control_hz), self.emit)
            # EMA state = measured joints at rollout start (after any assist), reset every rollout.
            measured = np.asarray(self.bench.observe().state, dtype=float)
            self.ema.reset(measured)
            self.emit("ema_reset", {"alpha": self.ema.alpha, "state": measured.tolist()})
            self.broker.start_episode(instruction)
            with loop_priority(self.realtime_priority) as self.scheduling:
                stop, reason, detail, steps = self._loop()
        except Exception as exc:  # assist, reset or an unexpected bug: invalid, arm held below
            where = "policy" if "policy" in type(exc).__module__ or "Policy" in type(exc).__name__ else "bench"
            stop, reason, detail = "fault", classify(exc, where), describe(exc)
            if reason == "bus_error" and not _looks_like_bench(exc):
                reason = "harness_error"
            log.warning("rollout ended by %s: %s", reason, detail, exc_info=reason == "harness_error")
            self.emit("fault", {"where": where, "invalid_reason": reason, "error": detail})
        finally:
            result = self._finish(stop, reason, detail, steps, started)
        return result

    def _fail_before_start(self, meta: EpisodeMeta, exc: BaseException) -> EpisodeResult:
        reason = classify(exc, "bench")
        self._notify("on_episode_start", meta)
        self.emit("fault", {"where": "bench", "invalid_reason": reason, "error": describe(exc)})
        return self._finish("fault", reason, describe(exc), 0, True)

    def _loop(self) -> tuple[str, str | None, str, int]:
        bench, broker, notify = self.bench, self.broker, self._notify
        period, clock = self.period, self.clock
        bench.begin_episode()  # the twin starts its evaluator trace here
        self._t0 = t0 = clock()
        # wall time of t = 0: a crash recovery dates the episode's end from its last recorded row
        self.emit("timer_started", {"timer_s": self.timer_s, "control_hz": float(self.card.control_hz),
                                    "wall_time": time.time(), "scheduling": self.scheduling})
        k = 0          # time slot: tick k is due at t0 + k * period
        executed = 0   # ticks actually run (slots skipped after an overrun are not steps)
        timing = self.timing
        last_start = t0
        self._chunks = broker.chunks
        while True:
            tick_start = clock()
            elapsed = tick_start - t0
            if executed and timing.gap(tick_start - last_start):
                self.emit("stall", {"gap_s": round(tick_start - last_start, 4),
                                    "slots_lost": max(0, int(round((tick_start - last_start) / period)) - 1)})
            pending = self.controls.pending()
            if pending is not None:
                kind, source = pending
                self.emit("stop_requested", {"request": kind, "source": source})
                return kind, _STOP_INVALID.get(kind), f"{kind} by {source}", executed
            if elapsed >= self.timer_s:
                return "timer", None, "", executed
            if self._record_fault is not None:
                return self._fault("recorder", self._record_fault, executed)
            try:
                obs = bench.observe()
            except Exception as exc:
                return self._fault("bench", exc, executed)
            try:
                broker.submit_observation(obs)
                na = broker.next_action()
                if na is None and self.lockstep:
                    na = self._await_chunk()
            except Exception as exc:
                return self._fault("policy", exc, executed)
            raw, sent, chunk_id = _NAN6, _NAN6, -1
            latency = server_ms = float("nan")
            if na is not None:
                raw, chunk_id = np.asarray(na[0], dtype=float)[:6], int(na[1])
                sent, ended = self._act(raw, executed)
                if ended is not None:
                    return ended
                latency, server_ms = self._chunk_timing(chunk_id)
            now = clock()
            t_tick = tick_start - t0
            image_t = ({c: float(v) - t0 for c, v in obs.image_times.items()}
                       if not self.lockstep else {})
            step = StepRecord(index=executed, t=t_tick, state=np.asarray(obs.state, dtype=float),
                              images=obs.images, raw_action=raw, executed_action=sent,
                              chunk_id=chunk_id, request_latency_s=latency, server_ms=server_ms,
                              frame_index={}, period_s=(tick_start - last_start) if executed else float("nan"),
                              work_s=now - tick_start, slot=k,
                              image_t={c: image_t.get(c, t_tick) for c in obs.images})
            notify("on_step", step)
            last_start = tick_start
            k += 1
            executed += 1
            if self.health is not None:
                ended = self._guard(self.health, executed, t_tick, obs.state, sent if na is not None else None)
                if ended is not None:
                    return ended
            if not self.lockstep:
                k = self._wait_for_slot(t0, k)

    def _act(self, raw: np.ndarray, executed: int) -> tuple[np.ndarray, tuple[str, str, str, int] | None]:
        """The filtered action through the bench: (what was sent, None), or when the bench faulted
        (NaN, how the attempt ends). A non-finite target the bench refused (it holds) is an event
        and the rollout goes on, with nothing sent this tick."""
        filtered = self.ema(raw)
        try:
            result = self.bench.act(filtered)
        except Exception as exc:
            if not _is_non_finite(exc):
                return _NAN6, self._fault("bench", exc, executed)
            self.emit("safety_error", {"error": describe(exc)})
            return _NAN6, None
        if result is None:
            return _NAN6, None
        sent = np.asarray(result.sent, dtype=float)
        for clamp in result.clamps:
            self.emit("clamp", _clamp_dict(clamp))
        return sent, None

    def _chunk_timing(self, chunk_id: int) -> tuple[float, float]:
        """(round trip s, server ms) of the chunk the action came from; NaN when the broker has none."""
        chunk = self._chunks.get(chunk_id) if isinstance(self._chunks, dict) else None
        if chunk is None:
            self._chunks = self.broker.chunks
            chunk = self._chunks.get(chunk_id) if isinstance(self._chunks, dict) else None
        if chunk is None:
            return float("nan"), float("nan")
        return float(chunk.rtt_s), _nan_to_none(chunk.server_ms)

    def _wait_for_slot(self, t0: float, k: int) -> int:
        """Pacing on absolute deadlines: waits for slot k (sleep, then spin the last SPIN_S); after an
        overrun it skips ahead instead of bursting. A stop request ends the wait at once (the next tick
        starts early and ends the attempt). Returns the slot the next tick runs in."""
        period, clock = self.period, self.clock
        deadline = t0 + k * period
        now = clock()
        if now > deadline:
            skip_to = int((now - t0) / period) + 1 if now > deadline + period else k
            self.timing.late(now - deadline, skip_to - k)
            k = skip_to
            deadline = t0 + k * period
        remaining = deadline - clock()
        if remaining > SPIN_S and self.controls.wait(remaining - SPIN_S):
            return k
        while clock() < deadline:
            pass
        return k

    def _guard(self, health: HealthMonitor, executed: int, t_tick: float, state, sent) -> tuple[str, str, str, int] | None:
        """Telemetry when due (in this tick's slack) and the motor guards; a trip ends the attempt."""
        fresh = False
        if health.sample_due(executed - 1):
            try:
                sample = health.take(self.clock() - (self._t0 or 0.0))   # _t0 is set when the timer starts
            except Exception as exc:
                return self._fault("bench", exc, executed)
            self._notify("on_health", sample)
            fresh = True
        trip = health.check(t_tick, state, sent, fresh)
        if trip is None:
            return None
        self._trip = trip
        self.emit(trip.kind, {**trip.detail, "invalid_reason": trip.reason, "at_monotonic": time.monotonic()})
        return "fault", trip.reason, trip.message, executed

    def _await_chunk(self):
        """Lockstep only: wait (wall clock, up to the card's timeout) for the chunk in flight."""
        broker = self.broker
        deadline = time.monotonic() + float(self.card.timeout_s)
        while broker.in_flight and time.monotonic() < deadline:
            time.sleep(0.0005)
            na = broker.next_action()
            if na is not None:
                return na
        return broker.next_action()

    def _fault(self, where: str, exc: BaseException, k: int) -> tuple[str, str, str, int]:
        reason = "storage_error" if where == "recorder" else classify(exc, where)
        if where == "policy" and "protocol error" in str(exc).lower():
            reason = "protocol_error"
        self.emit("fault", {"where": where, "invalid_reason": reason, "error": describe(exc)})
        return "fault", reason, describe(exc), k

    def _finish(self, stop: str, reason: str | None, detail: str, steps: int, started: bool) -> EpisodeResult:
        duration = self._t()
        # 1. the arm holds where it is (never leave it moving); after a health trip a pressing
        #    gripper also backs off
        try:
            if self._trip is not None and self.health is not None:   # a trip comes from the monitor
                for sent in self.health.protect(self.bench):
                    for clamp in sent.clamps:
                        self.emit("clamp", _clamp_dict(clamp))
                self.emit("hold", {"after": self._trip.reason, "at_monotonic": time.monotonic()})
            else:
                self.bench.hold()
                self.emit("hold", {})
        except Exception as exc:
            self.emit("hold_failed", {"error": describe(exc)})
        # 2. home at bounded speed, unless e-stopped (or the console was lost) or a motor guard tripped
        #    (hold only) or the bus is gone
        if self.go_home_after and stop not in LATCHING_STOPS and self._trip is None \
                and reason not in ("bus_error",):
            self.controls.stage = "homing after the rollout"
            try:
                with self.controls.interruptible():
                    self.bench.go_home(should_stop=self.controls.estopped)
                self.emit("went_home", {})
            except MotionStopped:  # an e-stop (or a lost console) while going home: the bench already holds
                latch = self.controls.estop() or {}
                self.emit("go_home_interrupted", {"request": latch.get("kind", "estop"),
                                                  "source": latch.get("source", "")})
            except KeyboardInterrupt:  # Ctrl-C while going home: stop there and hold
                self.emit("go_home_interrupted", {"source": "ctrl-c"})
                with contextlib.suppress(Exception):
                    self.bench.hold()
            except Exception as exc:
                self.emit("go_home_failed", {"error": describe(exc)})
                with contextlib.suppress(Exception):
                    self.bench.hold()
        self.controls.stage = "after the rollout"
        valid = stop in ("timer", "operator_stop")
        if valid:
            reason = None
        elif reason is None:
            reason = _STOP_INVALID.get(stop, "harness_error")
        self.emit("episode_end", {"stop_reason": stop, "valid": valid, "invalid_reason": reason,
                                  "steps": steps, "detail": detail})
        timing = self.timing.summary(steps)
        if timing:
            self.emit("timing", timing)
        health = self.health.summary.as_dict() if self.health is not None else {}
        if health:
            self.emit("health_summary", health)
        result = EpisodeResult(stop_reason=stop, valid=valid, invalid_reason=reason, n_steps=steps,
                               duration_s=duration, detail=detail, timing=timing, health=health)
        if started:
            self._notify("on_episode_end", result)
            if self._record_fault is not None and result.invalid_reason != "storage_error":
                # the episode could not be saved (e.g. the disk filled while closing it)
                result.valid, result.invalid_reason = False, "storage_error"
                result.detail = describe(self._record_fault)
                if result.stop_reason in ("timer", "operator_stop"):
                    result.stop_reason = "fault"
        return result


def _is_non_finite(exc: BaseException) -> bool:
    return type(exc).__name__ == "NonFiniteTarget"


def _looks_like_bench(exc: BaseException) -> bool:
    if hasattr(exc, "component"):
        return True
    mod = type(exc).__module__
    return any(p in mod for p in ("spabench.bench", "lerobot", "serial", "scservo")) or isinstance(
        exc, (OSError, ConnectionError, TimeoutError))
