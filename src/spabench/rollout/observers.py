"""Small rollout observers: motion detection, clamp counts (the status line's LoopStats lives with the
operator)."""

from __future__ import annotations

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

        states: np.ndarray = np.asarray(self._states, dtype=float).reshape(-1, 6)
        states = states[np.all(np.isfinite(states), axis=1)]
        self.onset = motion_onset(states, self.rule) if len(states) else None
        self.evaluated = True
        result.motion_onset = self.onset

    @property
    def moved(self) -> bool | None:
        return None if not self.evaluated else self.onset is not None


class ClampCounter(ObserverBase):
    """Clamps of one attempt by reason (joint_limit, max_relative_target, robot_clip, workspace), for the
    ledger's rollout_summary: the campaign report counts them per policy without opening episodes."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def on_episode_start(self, meta: EpisodeMeta) -> None:
        self.counts = {}

    def on_event(self, event: Event) -> None:
        if event.kind == "clamp":
            reason = str(event.detail.get("reason", "unknown"))
            self.counts[reason] = self.counts.get(reason, 0) + 1
