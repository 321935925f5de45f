"""Small rollout observers: motion detection and live loop statistics."""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from spabench.rollout.types import EpisodeMeta, EpisodeResult, Event, ObserverBase, StepRecord


class MotionDetector(ObserverBase):
    """Collects measured joints; at the end applies the protocol's motion-onset rule.

    `onset` is the index of the first moving frame or None (no arm or gripper motion), which
    pre-fills the score of no-intervention / no-movement trials.
    """

    def __init__(self, rule=None) -> None:
        self.rule = rule  # spabench.suite.motion.MotionOnsetRule; None: the protocol's defaults
        self._states: list[np.ndarray] = []
        self.onset: int | None = None
        self.evaluated = False

    def on_episode_start(self, meta: EpisodeMeta) -> None:
        self._states, self.onset, self.evaluated = [], None, False

    def on_step(self, step: StepRecord) -> None:
        self._states.append(np.asarray(step.state, dtype=float))

    def on_episode_end(self, result: EpisodeResult) -> None:
        from spabench.suite.motion import motion_onset

        states = np.asarray(self._states, dtype=float).reshape(-1, 6)
        states = states[np.all(np.isfinite(states), axis=1)]
        self.onset = motion_onset(states, self.rule) if len(states) else None
        self.evaluated = True
        result.motion_onset = self.onset

    @property
    def moved(self) -> bool | None:
        return None if not self.evaluated else self.onset is not None


class LoopStats(ObserverBase):
    """Live numbers for the status line: time left, achieved loop rate, last policy latency."""

    def __init__(self, window: int = 30) -> None:
        self._lock = threading.Lock()
        self.window = window
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.timer_s = 0.0
            self.t = 0.0
            self.steps = 0
            self._starts: list[float] = []
            self.last_latency_s = float("nan")
            self.last_event = ""
            self.chunk_id = -1
            self.clamps = 0
            self.started_wall = time.monotonic()

    def on_episode_start(self, meta: EpisodeMeta) -> None:
        self.reset()
        self.timer_s = float(meta.timer_s)

    def on_step(self, step: StepRecord) -> None:
        with self._lock:
            self.t = step.t
            self.steps += 1
            self._starts.append(step.t)
            if len(self._starts) > self.window:
                del self._starts[0]
            if not math.isnan(step.request_latency_s):
                self.last_latency_s = step.request_latency_s
            self.chunk_id = step.chunk_id

    def on_event(self, event: Event) -> None:
        with self._lock:
            if event.kind == "clamp":
                self.clamps += 1
            self.last_event = event.kind

    @property
    def rate_hz(self) -> float:
        with self._lock:
            if len(self._starts) < 2:
                return float("nan")
            span = self._starts[-1] - self._starts[0]
            return (len(self._starts) - 1) / span if span > 0 else float("nan")

    @property
    def time_left_s(self) -> float:
        return max(0.0, self.timer_s - self.t)

