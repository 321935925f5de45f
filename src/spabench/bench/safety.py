"""The safety envelope every joint command passes through before it reaches the robot.

Two clamps, both logged: the joint-limit box from the bench config, then a per-tick step bound
(max_relative_target) around the measured position. A non-finite command is refused outright.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spabench.errors import ConfigError, SafetyError
from spabench.suite.vocabulary import JOINTS

REASON_JOINT_LIMIT = "joint_limit"
REASON_MAX_RELATIVE_TARGET = "max_relative_target"
REASON_ROBOT_CLIP = "robot_clip"  # the robot driver (LeRobot) changed the command further
CLAMP_REASONS: tuple[str, ...] = (REASON_JOINT_LIMIT, REASON_MAX_RELATIVE_TARGET, REASON_ROBOT_CLIP)


@dataclass(frozen=True)
class Clamp:
    """One joint command that was changed on its way to the robot (logged as an event)."""

    joint: str
    requested: float
    sent: float
    reason: str


class SafetyEnvelope:
    """Joint-limit box plus per-tick step bound, in the bench's joint order (vocabulary.JOINTS)."""

    def __init__(self, limits: Mapping[str, Sequence[float]], max_relative_target: float,
                 joints: Sequence[str] = JOINTS):
        self.joints = tuple(joints)
        missing = [j for j in self.joints if j not in limits]
        if missing:
            raise ConfigError(f"safety envelope: joint_limits missing {missing} "
                              f"(allowed: {', '.join(self.joints)})")
        lo, hi = [], []
        for joint in self.joints:
            pair = limits[joint]
            if len(pair) != 2 or not all(_is_real(v) for v in pair) or not float(pair[0]) < float(pair[1]):
                raise ConfigError(f"safety envelope: joint_limits.{joint} = {list(pair)!r} "
                                  "(allowed: finite [lo, hi] with lo < hi)")
            lo.append(float(pair[0]))
            hi.append(float(pair[1]))
        if not _is_real(max_relative_target) or float(max_relative_target) <= 0:
            raise ConfigError(f"safety envelope: max_relative_target = {max_relative_target!r} "
                              "(allowed: a finite float > 0)")
        self.lo = np.asarray(lo, dtype=np.float64)
        self.hi = np.asarray(hi, dtype=np.float64)
        self.max_relative_target = float(max_relative_target)

    def _vector(self, name: str, value) -> np.ndarray:
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != (len(self.joints),):
            raise SafetyError(f"{name} has shape {arr.shape}; expected ({len(self.joints)},) in joint order "
                              f"{', '.join(self.joints)}")
        return arr

    def non_finite_joints(self, target) -> list[str]:
        arr = self._vector("target", target)
        return [j for j, v in zip(self.joints, arr) if not math.isfinite(v)]

    def check_target(self, target, current) -> tuple[np.ndarray, list[Clamp]]:
        """Return (safe_target, clamps). Raises SafetyError for a non-finite target or measurement."""
        req = self._vector("target", target)
        cur = self._vector("measured position", current)
        bad = [j for j, v in zip(self.joints, req) if not math.isfinite(v)]
        if bad:
            raise SafetyError(f"non-finite target for joint(s) {bad}: {req.tolist()}; nothing was sent")
        bad = [j for j, v in zip(self.joints, cur) if not math.isfinite(v)]
        if bad:
            raise SafetyError(f"non-finite measured position for joint(s) {bad}: {cur.tolist()}")
        clamps: list[Clamp] = []
        boxed = np.clip(req, self.lo, self.hi)
        step = self.max_relative_target
        safe = np.clip(boxed, cur - step, cur + step)
        for i, joint in enumerate(self.joints):
            if boxed[i] != req[i]:
                clamps.append(Clamp(joint, float(req[i]), float(boxed[i]), REASON_JOINT_LIMIT))
            if safe[i] != boxed[i]:
                clamps.append(Clamp(joint, float(boxed[i]), float(safe[i]), REASON_MAX_RELATIVE_TARGET))
        return safe, clamps


def _is_real(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(float(value)))
