"""The safety envelope every joint command passes through before it reaches the robot.

Three clamps, all logged: the joint-limit box from the bench config, then a per-tick step bound
(max_relative_target) around the measured position, then the Cartesian workspace envelope of
hardware/bench.yaml (`arm_envelope:`): the gripper's points, placed by the arm's forward kinematics,
stay above the table top plus a margin, inside a box and out of keep-out boxes. A non-finite
command is refused outright.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spabench.bench.kinematics import ArmModel
from spabench.errors import ConfigError, SafetyError
from spabench.suite.model import ArmEnvelope
from spabench.suite.vocabulary import JOINTS

REASON_JOINT_LIMIT = "joint_limit"
REASON_MAX_RELATIVE_TARGET = "max_relative_target"
REASON_ROBOT_CLIP = "robot_clip"  # the robot driver (LeRobot) changed the command further
REASON_WORKSPACE = "workspace"    # the gripper would have left the Cartesian envelope
CLAMP_REASONS: tuple[str, ...] = (REASON_JOINT_LIMIT, REASON_MAX_RELATIVE_TARGET, REASON_ROBOT_CLIP,
                                  REASON_WORKSPACE)
# Cutting a target back to the envelope: WORKSPACE_ROUNDS rounds, each placing WORKSPACE_GRID poses
# along the remaining interval in one batched FK, narrow it to 1/(GRID+1) per round: 3 rounds of 15
# leave 1/4096 of a step of at most max_relative_target (10 deg), under 0.003 deg.
WORKSPACE_GRID = 15
WORKSPACE_ROUNDS = 3


@dataclass(frozen=True)
class Clamp:
    """One joint command that was changed on its way to the robot (logged as an event)."""

    joint: str
    requested: float
    sent: float
    reason: str


@dataclass(frozen=True)
class WorkspaceClamp(Clamp):
    """One arm target cut back to the Cartesian envelope: one clamp per target, not per joint.

    joint/requested/sent: the joint the cut changed most; rule: the broken rule ("table",
    "box", "keep_out:<name>"); depth_cm: how far the requested target's gripper went past it;
    kept: the fraction of the step from the last executed target that was sent (0: the arm held);
    requested_target/sent_target: all six joints before and after the cut."""

    rule: str = ""
    depth_cm: float = 0.0
    kept: float = 0.0
    requested_target: tuple[float, ...] = ()
    sent_target: tuple[float, ...] = ()


class WorkspaceEnvelope:
    """The Cartesian envelope of the gripper (hardware/bench.yaml `arm_envelope:`) over the arm's FK.

    Targets are in bench units (degrees, gripper 0..100, vocabulary.JOINTS order)."""

    def __init__(self, spec: ArmEnvelope, arm: ArmModel):
        self.spec = spec
        self.arm = arm
        self.floor_m = (spec.table_z_cm + spec.table_margin_cm) / 100.0
        lo, hi = spec.box.bounds_m()
        self.box_lo, self.box_hi = np.array(lo), np.array(hi)
        self.keep_out: list[tuple[str, np.ndarray, np.ndarray]] = []
        for name, box in spec.keep_out.items():
            lo, hi = box.bounds_m()
            self.keep_out.append((f"keep_out:{name}", np.array(lo), np.array(hi)))

    def violation(self, target) -> tuple[float, str]:
        """(metres past the envelope, rule) of the worst-placed gripper point; (0.0, "") inside."""
        depth, rules = self.violations(np.asarray(target, dtype=np.float64)[None, :])
        return float(depth[0]), rules[0]

    def violations(self, targets: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """violation() of n targets (n, 6) at once: depths (n,), rules."""
        pts = self.arm.gripper_points_units(targets)                  # (n, k, 3)
        names = ["table", "box"]
        depths = [self.floor_m - pts[:, :, 2].min(axis=1),
                  np.maximum(self.box_lo - pts, pts - self.box_hi).max(axis=(1, 2))]
        for name, lo, hi in self.keep_out:
            names.append(name)
            depths.append(np.minimum(pts - lo, hi - pts).min(axis=2).max(axis=1))
        stacked = np.stack(depths)                                      # (rules, n)
        worst = stacked.argmax(axis=0)
        depth = stacked[worst, np.arange(len(targets))]
        return np.where(depth > 0, depth, 0.0), [names[w] if d > 0 else "" for w, d in zip(worst, depth, strict=True)]

    def limit(self, target: np.ndarray, start: np.ndarray,
              joints: Sequence[str] = JOINTS) -> tuple[np.ndarray, WorkspaceClamp | None]:
        """`target` if its gripper is inside; else the last safe point on the joint-space segment from
        `start` (the last executed target) towards it: the first crossing, found by WORKSPACE_ROUNDS
        rounds of WORKSPACE_GRID poses each. If `start` itself is outside (the arm was put there by
        hand, or by physics), a target no deeper out is let through so the arm can leave, and a deeper
        one holds at `start`."""
        depth, rule = self.violation(target)
        if depth == 0.0:
            return target, None
        start_depth, _ = self.violation(start)
        if start_depth > 0.0:
            if depth <= start_depth:
                return target, None
            kept = 0.0
        else:
            lo, hi = 0.0, 1.0       # lo: known safe; hi: known outside
            for _ in range(WORKSPACE_ROUNDS):
                fractions = lo + (hi - lo) * np.arange(1, WORKSPACE_GRID + 1) / (WORKSPACE_GRID + 1)
                outside = self.violations(start + fractions[:, None] * (target - start))[0] > 0.0
                first = int(np.argmax(outside)) if outside.any() else WORKSPACE_GRID
                lo, hi = (lo if first == 0 else float(fractions[first - 1])), \
                         (hi if first == WORKSPACE_GRID else float(fractions[first]))
            kept = lo
        sent = start + kept * (target - start)
        i = int(np.argmax(np.abs(target - sent)))
        return sent, WorkspaceClamp(joints[i], float(target[i]), float(sent[i]), REASON_WORKSPACE, rule=rule,
                                    depth_cm=round(depth * 100.0, 3), kept=float(kept),
                                    requested_target=tuple(float(v) for v in target),
                                    sent_target=tuple(float(v) for v in sent))


class SafetyEnvelope:
    """Joint-limit box, per-tick step bound and (when given) the Cartesian workspace envelope, in the
    bench's joint order (vocabulary.JOINTS)."""

    def __init__(self, limits: Mapping[str, Sequence[float]], max_relative_target: float,
                 joints: Sequence[str] = JOINTS, workspace: WorkspaceEnvelope | None = None):
        self.joints = tuple(joints)
        self.workspace = workspace
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
        return [j for j, v in zip(self.joints, arr, strict=True) if not math.isfinite(v)]

    def check_target(self, target, current, last=None) -> tuple[np.ndarray, list[Clamp]]:
        """Return (safe_target, clamps). Raises SafetyError for a non-finite target or measurement.

        `last`: the last executed target, where a workspace cut starts (None: the measured position);
        held within the step bound around `current`, so the cut stays inside it."""
        req = self._vector("target", target)
        cur = self._vector("measured position", current)
        bad = [j for j, v in zip(self.joints, req, strict=True) if not math.isfinite(v)]
        if bad:
            raise SafetyError(f"non-finite target for joint(s) {bad}: {req.tolist()}; nothing was sent")
        bad = [j for j, v in zip(self.joints, cur, strict=True) if not math.isfinite(v)]
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
        if self.workspace is not None:
            start = cur if last is None else self._vector("last target", last)
            if not np.all(np.isfinite(start)):
                start = cur
            safe, cut = self.workspace.limit(safe, np.clip(start, cur - step, cur + step), self.joints)
            if cut is not None:
                clamps.append(cut)
        return safe, clamps


def _is_real(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(float(value)))
