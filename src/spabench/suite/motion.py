"""Motion onset: the protocol's rule for when the arm starts moving, written once for every caller.

The authors' trimming rule, on a (T, 6) joint trajectory: the baseline is the per-joint **median**
of the first `baseline_frames` (5) frames; a frame moves when its largest absolute joint
displacement from the baseline is **at least** `threshold` (2.0 recorded units: degrees for the arm
joints, 0..100 units for the gripper); onset is the first frame of the first run of `run_frames`
(5) consecutive moving frames. The bench applies it to the measured joint states (the rollout's
motion detector, no-intervention pre-fill, the twin's evaluator); the numbers are the suite
config's `motion_onset` block. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spabench.config import check_fields, opt, typed_node
from spabench.errors import DataError
from spabench.suite.vocabulary import (
    JOINTS,
    MOTION_ONSET_BASELINE_FRAMES,
    MOTION_ONSET_RUN_FRAMES,
    MOTION_ONSET_THRESHOLD,
)

__all__ = ["MotionOnsetRule", "DEFAULT_RULE", "motion_onset", "joint_displacement", "moving_frames"]


@dataclass  # not frozen: Hydra overrides set fields on it
class MotionOnsetRule:
    """The three numbers of the rule (conf/suite: `motion_onset: {threshold, baseline_frames, run_frames}`)."""

    threshold: float = opt(MOTION_ONSET_THRESHOLD, gt=0)
    baseline_frames: int = opt(MOTION_ONSET_BASELINE_FRAMES, lo=1)
    run_frames: int = opt(MOTION_ONSET_RUN_FRAMES, lo=1)

    def __post_init__(self) -> None:
        check_fields(self, "conf/suite", "motion_onset.")

    @classmethod
    def from_mapping(cls, data) -> MotionOnsetRule:
        return typed_node(cls, data, "conf/suite", "motion_onset.")

    def as_dict(self) -> dict:
        return {"threshold": float(self.threshold), "baseline_frames": self.baseline_frames,
                "run_frames": self.run_frames}


DEFAULT_RULE = MotionOnsetRule()


def _as_states(states) -> np.ndarray:
    arr = np.asarray(states, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(JOINTS):
        raise DataError("joint trajectory", f"expected shape (T, {len(JOINTS)}), got {arr.shape}",
                        field="states", allowed=f"a (T, {len(JOINTS)}) array in order {', '.join(JOINTS)}")
    if not np.all(np.isfinite(arr)):
        raise DataError("joint trajectory", "holds non-finite values", field="states")
    return arr


def joint_displacement(states, rule: MotionOnsetRule = DEFAULT_RULE) -> np.ndarray:
    """Per frame, the largest |joint - baseline| over the joints; baseline = median of the first frames."""
    arr = _as_states(states)
    if len(arr) == 0:
        return np.zeros(0)
    baseline = np.median(arr[: rule.baseline_frames], axis=0)
    return np.max(np.abs(arr - baseline), axis=1)


def moving_frames(states, rule: MotionOnsetRule = DEFAULT_RULE) -> np.ndarray:
    """Boolean per frame: displacement >= threshold."""
    return joint_displacement(states, rule) >= rule.threshold


def motion_onset(states, rule: MotionOnsetRule | None = None, *, threshold: float | None = None,
                 frames: int | None = None) -> int | None:
    """Index of the motion-onset frame in a (T, 6) joint trajectory, or None when the arm never moves.

    `threshold` / `frames` (baseline and run length together) override the rule for one call. A
    trajectory shorter than the baseline has no full baseline: None.
    """
    rule = rule or DEFAULT_RULE
    if threshold is not None or frames is not None:
        rule = MotionOnsetRule(threshold=rule.threshold if threshold is None else threshold,
                               baseline_frames=rule.baseline_frames if frames is None else frames,
                               run_frames=rule.run_frames if frames is None else frames)
    arr = _as_states(states)
    if len(arr) < max(rule.baseline_frames, rule.run_frames):
        return None
    moving = moving_frames(arr, rule).astype(np.int64)
    n = rule.run_frames
    # runs[t] = number of moving frames in [t, t + n): a full run starts where it equals n
    csum = np.concatenate(([0], np.cumsum(moving)))
    runs = csum[n:] - csum[:-n]
    starts = np.flatnonzero(runs == n)
    return int(starts[0]) if len(starts) else None
