"""The terminal status line's numbers, gathered as a rollout observer."""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the loop calls observers by hook name
    from spabench.rollout.types import EpisodeMeta, Event, StepRecord


class LoopStats:
    """Live numbers for the status line: time left, achieved loop rate, last policy latency.

    A rollout observer (the loop calls on_episode_start/on_step/on_event by name), kept with the
    operator that shows it so that operator needs nothing from rollout."""

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

