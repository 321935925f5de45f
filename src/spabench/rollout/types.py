"""What the rollout loop tells its observers: episode metadata, one record per tick, events, the result.

Observers (recorder, motion detector, status line) implement any subset of
`on_episode_start(meta)`, `on_step(step)`, `on_event(event)`, `on_health(sample)` (motor telemetry,
spabench.bench.health.HealthSample), `on_episode_end(result)`; the loop
never needs to know which observers exist.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

import spabench.suite.rules as _rules

# The vocabulary of stop and invalid reasons is the protocol's, defined once in spabench.suite.rules.
STOP_REASONS, VALID_STOPS, INVALID_REASONS = _rules.STOP_REASONS, _rules.VALID_STOPS, _rules.INVALID_REASONS


@dataclass
class EpisodeMeta:
    """Provenance of one attempt; the recorder writes every field as an HDF5 attribute."""

    attempt_id: str
    trial_id: str = ""
    campaign: str = ""
    evaluation_id: str = ""
    policy: str = ""
    alias: str = ""
    task: str = ""
    condition: str = ""
    scene_id: str = ""
    instruction: str = ""
    timer_s: float = 60.0
    control_hz: float = 30.0
    policy_card_yaml: str = ""
    server_metadata: dict = field(default_factory=dict)
    config_hash: str = ""
    calibration_id: str = ""
    bench_type: str = ""
    cameras: tuple[str, ...] = ()
    camera_shapes: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    camera_fps: dict[str, float] = field(default_factory=dict)  # nominal frame rate per camera
    start_time: str = ""            # ISO 8601, wall clock
    extra: dict = field(default_factory=dict)


@dataclass
class StepRecord:
    """One control tick. Actions are NaN when no action was available / nothing was sent."""

    index: int
    t: float                        # seconds since the timer started
    state: np.ndarray               # (6,) measured joints, vocabulary.JOINTS order
    images: dict[str, np.ndarray]
    raw_action: np.ndarray          # (6,) what the policy asked for
    executed_action: np.ndarray     # (6,) what was sent after EMA + safety envelope
    chunk_id: int = -1
    request_latency_s: float = float("nan")
    server_ms: float = float("nan")
    frame_index: dict[str, int] = field(default_factory=dict)
    period_s: float = float("nan")  # time since the previous tick started
    work_s: float = float("nan")    # harness time from the tick's start to the command sent (observe..act)
    slot: int = -1                  # the time slot (t0 + slot / control_hz) this tick ran in
    image_t: dict[str, float] = field(default_factory=dict)  # capture time per camera, s since timer start


EVENT_KEYS = ("kind", "t")  # the event's own fields in its stored form; detail keys may not reuse them


@dataclass
class Event:
    """Something that happened during an episode (clamp, assist, fault, stop, dropped frame...).

    Stored flat (`as_dict`), so a detail key named like one of EVENT_KEYS would overwrite the
    event's own kind or time: refused when the event is made."""

    kind: str
    t: float = field(default_factory=time.monotonic)   # seconds since the timer started (or monotonic before)
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = [k for k in EVENT_KEYS if k in self.detail]
        if clash:
            raise ValueError(f"event {self.kind!r}: detail key(s) {clash} would overwrite the event's own "
                             f"field(s) (reserved: {', '.join(EVENT_KEYS)}); rename them")

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "t": round(float(self.t), 6), **self.detail}


@dataclass
class EpisodeResult:
    stop_reason: str                # one of STOP_REASONS
    valid: bool
    invalid_reason: str | None
    n_steps: int                    # executed ticks (a skipped time slot is not a step)
    duration_s: float
    detail: str = ""                # human-readable cause of a fault
    motion_onset: int | None = None
    timing: dict[str, Any] = field(default_factory=dict)         # overrun summary (rollout loop)
    camera_frames: dict[str, dict] = field(default_factory=dict)  # per camera repeated/skipped/gap (recorder)
    health: dict[str, Any] = field(default_factory=dict)          # motor-health summary (HealthMonitor)


@runtime_checkable
class Observer(Protocol):
    def on_episode_start(self, meta: EpisodeMeta) -> None: ...
    def on_step(self, step: StepRecord) -> None: ...
    def on_event(self, event: Event) -> None: ...
    def on_episode_end(self, result: EpisodeResult) -> None: ...


class ObserverBase:
    """Convenience base: every hook is a no-op."""

    def on_episode_start(self, meta: EpisodeMeta) -> None:
        pass

    def on_step(self, step: StepRecord) -> None:
        pass

    def on_event(self, event: Event) -> None:
        pass

    def on_episode_end(self, result: EpisodeResult) -> None:
        pass
