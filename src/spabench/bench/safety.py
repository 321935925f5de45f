"""The safety envelope every joint command passes through before it reaches the robot.

Three clamps, all logged: the joint-limit box from the bench config, then a per-tick step bound
(max_relative_target) around the measured position, then the Cartesian workspace envelope of
hardware/bench.yaml (`arm_envelope:`): every link's collision geometry (hardware/sim/so101.xml), placed
by the arm's forward kinematics, stays above the table top plus a margin, inside a box and clear of
keep-out boxes plus their margin. A non-finite command is refused outright.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spabench.bench.kinematics import ArmModel, cross_sizes
from spabench.errors import ConfigError, SafetyError
from spabench.suite.model import ArmEnvelope
from spabench.suite.vocabulary import JOINTS

REASON_JOINT_LIMIT = "joint_limit"
REASON_MAX_RELATIVE_TARGET = "max_relative_target"
REASON_ROBOT_CLIP = "robot_clip"  # the robot driver (LeRobot) changed the command further
REASON_WORKSPACE = "workspace"    # a link would have left the Cartesian envelope
CLAMP_REASONS: tuple[str, ...] = (REASON_JOINT_LIMIT, REASON_MAX_RELATIVE_TARGET, REASON_ROBOT_CLIP,
                                  REASON_WORKSPACE)
# Cutting a target back to the envelope: WORKSPACE_ROUNDS rounds, each placing WORKSPACE_GRID poses
# along the remaining interval in one batched FK, narrow it to 1/(GRID+1) per round: 3 rounds of 15
# leave 1/4096 of a step of at most max_relative_target (10 deg), under 0.003 deg. (A pose costs
# ~5 us inside a batch and a batch ~70 us more: 3 x 15 is cheaper than 2 x 63 or 12 single poses.)
WORKSPACE_GRID = 15
WORKSPACE_ROUNDS = 3
_MIN_AXIS = 1e-9           # a separating-axis candidate shorter than this (parallel edges) is skipped


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
    "box", "keep_out:<name>"); link/geom: the arm link (MJCF body) and its collision geom that went
    furthest past it; depth_cm: how far (past the table top plus its margin, past a keep-out box's
    margin); message: the same in words ("wrist bracket 4.2 cm below the table margin"); kept: the
    fraction of the step from the last executed target that was sent (0: the arm held);
    requested_target/sent_target: all six joints before and after the cut."""

    rule: str = ""
    depth_cm: float = 0.0
    kept: float = 0.0
    requested_target: tuple[float, ...] = ()
    sent_target: tuple[float, ...] = ()
    link: str = ""
    geom: str = ""
    message: str = ""


@dataclass(frozen=True)
class Violation:
    """The worst-placed geometry of one target: metres past `rule` (0.0 and "" inside)."""

    depth: float
    rule: str
    link: str = ""
    geom: str = ""


class WorkspaceEnvelope:
    """The Cartesian envelope of the arm (hardware/bench.yaml `arm_envelope:`) over the arm's FK:
    every link's collision geometry (kinematics.LinkShapes: a box core swept by a ball) above the
    table top plus its margin, inside the box and clear of every keep-out box plus its margin.

    Targets are in bench units (degrees, gripper 0..100, vocabulary.JOINTS order). `links`: the
    MJCF bodies checked (None: every link that moves; the benchmark's anchor passes the gripper's)."""

    def __init__(self, spec: ArmEnvelope, arm: ArmModel, links: Sequence[str] | None = None):
        self.spec = spec
        self.arm = arm
        self.shapes = arm.link_shapes(links)
        self.floor_m = (spec.table_z_cm + spec.table_margin_cm) / 100.0
        lo, hi = spec.box.bounds_m()
        self.box_lo, self.box_hi = np.array(lo), np.array(hi)
        margin = spec.keep_out_margin_cm / 100.0
        self.rules = ["table", "box"]
        centres: list[np.ndarray] = []
        halves: list[np.ndarray] = []
        for name, box in spec.keep_out.items():
            low, high = (np.array(v) for v in box.bounds_m())
            self.rules.append(f"keep_out:{name}")
            centres.append((low + high) / 2.0)
            halves.append((high - low) / 2.0 + margin)   # a geometry touching the margin counts as inside
        self.keep_out_centre = np.array(centres).reshape(-1, 3)
        self.keep_out_half = np.array(halves).reshape(-1, 3)
        self._keep_out_cross = np.array([cross_sizes(h) for h in halves]).reshape(-1, 3, 3)

    def depths(self, targets) -> np.ndarray:
        """(n, rules, geoms) metres each geometry lies past each rule (<= 0: clear of it)."""
        c, axes = self.shapes.place_units(targets)                 # (n, G, 3), (n, G, 3, 3)
        half, radius = self.shapes.half, self.shapes.radius
        # half extents of each geometry's world-aligned bounding box (exact along the world axes)
        extent = (np.abs(axes) * half[None, :, None, :]).sum(axis=3) + radius[None, :, None]
        table = self.floor_m - (c[:, :, 2] - extent[:, :, 2])
        box = np.maximum(self.box_lo - (c - extent), (c + extent) - self.box_hi).max(axis=2)
        out = [table[:, None, :], box[:, None, :]]
        if len(self.keep_out_centre):
            out.append(self._keep_out(c, axes, extent).transpose(0, 2, 1))
        return np.concatenate(out, axis=1)

    def _keep_out(self, c: np.ndarray, axes: np.ndarray, extent: np.ndarray) -> np.ndarray:
        """(n, G, K) penetration of each geometry into each keep-out box grown by its margin, by
        separating axes: the world axes for all pairs, then for the pairs those leave overlapping the
        geometry's own axes and their 9 cross products with the world's (the 15 axes of two boxes;
        exact for a box, conservative for a swept ball: more pairs count as touching, never fewer)."""
        d = c[:, :, None, :] - self.keep_out_centre                  # (n, G, K, 3)
        depth = (extent[:, :, None, :] + self.keep_out_half - np.abs(d)).min(axis=3)
        hit = np.nonzero(depth > 0.0)
        if not len(hit[0]):
            return depth
        n, g, k = hit
        a = axes[n, g]                                   # (P, 3, 3): a[:, i, j] = world component i of geom axis j
        absa = np.abs(a)
        dist = d[n, g, k]
        # the geometry's axes a_j (unit): its core's half size + radius against the box's projection
        faces = self.shapes.half[g] + self.shapes.radius[g][:, None] \
            + (self.keep_out_half[k][:, None, :] @ absa)[:, 0] - np.abs((dist[:, None, :] @ a)[:, 0])
        # world axis e_i x geometry axis a_j (right-handed frames), [i, j] in closed form: its length,
        # the geometry's projected half width (absa @ the core's cross sizes), the box's (its cross
        # sizes @ absa) and the centres' distance along it ((d x a_j)_i)
        length = np.sqrt(np.maximum(0.0, 1.0 - a * a))
        span = absa @ self.shapes.cross_half[g] + self.shapes.radius[g][:, None, None] * length \
            + self._keep_out_cross[k] @ absa - np.abs(_skew(dist) @ a)
        edges = np.where(length > _MIN_AXIS, span / np.maximum(length, _MIN_AXIS), np.inf)
        depth[n, g, k] = np.minimum(depth[n, g, k], np.minimum(faces.min(axis=1), edges.min(axis=(1, 2))))
        return depth

    def violations(self, targets: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """violation() of n targets (n, 6) at once: depths (n,), rules."""
        depth, worst = self._worst(targets)
        per = len(self.shapes.names)
        return depth, [self.rules[int(w) // per] if d > 0 else "" for w, d in zip(worst, depth, strict=True)]

    def _worst(self, targets) -> tuple[np.ndarray, np.ndarray]:
        """(depth (n,) clipped at 0, flat index rule * G + geom of the worst geometry (n,))."""
        flat = self.depths(np.atleast_2d(np.asarray(targets, dtype=np.float64)))
        flat = flat.reshape(len(flat), -1)
        worst = flat.argmax(axis=1)
        depth = flat[np.arange(len(flat)), worst]
        return np.where(depth > 0, depth, 0.0), worst

    def violation(self, target) -> tuple[float, str]:
        """(metres past the envelope, rule) of the worst-placed geometry; (0.0, "") inside."""
        v = self.worst(target)
        return v.depth, v.rule

    def worst(self, target) -> Violation:
        """The worst-placed geometry of one target: how deep, which rule, which link and geom."""
        depth, worst = self._worst(np.asarray(target, dtype=np.float64)[None, :])
        if depth[0] <= 0.0:
            return Violation(0.0, "")
        rule, geom = divmod(int(worst[0]), len(self.shapes.names))
        return Violation(float(depth[0]), self.rules[rule], self.shapes.links[geom], self.shapes.names[geom])

    def describe(self, v: Violation) -> str:
        """A violation in words, naming the geometry: "wrist bracket 4.2 cm below the table margin"."""
        what = f"{v.geom.replace('_', ' ')} ({v.link})" if v.geom else "the arm"
        cm = v.depth * 100.0
        if v.rule == "table":
            return f"{what} {cm:.1f} cm below the table margin ({self.spec.table_margin_cm:g} cm above the table top)"
        if v.rule == "box":
            return f"{what} {cm:.1f} cm outside the workspace box"
        return (f"{what} {cm:.1f} cm inside the margin of keep-out box {v.rule.split(':', 1)[1]} "
                f"({self.spec.keep_out_margin_cm:g} cm)")

    def limit(self, target: np.ndarray, start: np.ndarray,
              joints: Sequence[str] = JOINTS) -> tuple[np.ndarray, WorkspaceClamp | None]:
        """`target` if every link is inside; else the last safe point on the joint-space segment from
        `start` (the last executed target) towards it: the first crossing, found by WORKSPACE_ROUNDS
        rounds of WORKSPACE_GRID poses each (the first round placed with `start`, one batched FK). If
        `start` itself is outside (the arm was put there by hand, or by physics), a target no deeper
        out is let through so the arm can leave, and a deeper one holds at `start`."""
        v = self.worst(target)
        if v.depth == 0.0:
            return target, None
        lo, hi = 0.0, 1.0       # lo: known safe; hi: known outside
        grid = np.arange(1, WORKSPACE_GRID + 1) / (WORKSPACE_GRID + 1)
        first_round = start + grid[:, None] * (target - start)
        depth, _ = self._worst(np.vstack([start[None, :], first_round]))
        start_depth = float(depth[0])
        if start_depth > 0.0:
            if v.depth <= start_depth:
                return target, None
            kept = 0.0
        else:
            outside = depth[1:] > 0.0
            for round_ in range(WORKSPACE_ROUNDS):
                fractions = lo + (hi - lo) * grid
                if round_:
                    outside = self._worst(start + fractions[:, None] * (target - start))[0] > 0.0
                first = int(np.argmax(outside)) if outside.any() else WORKSPACE_GRID
                lo, hi = (lo if first == 0 else float(fractions[first - 1])), \
                         (hi if first == WORKSPACE_GRID else float(fractions[first]))
            kept = lo
        sent = start + kept * (target - start)
        i = int(np.argmax(np.abs(target - sent)))
        return sent, WorkspaceClamp(joints[i], float(target[i]), float(sent[i]), REASON_WORKSPACE, rule=v.rule,
                                    depth_cm=round(v.depth * 100.0, 3), kept=float(kept),
                                    requested_target=tuple(float(x) for x in target),
                                    sent_target=tuple(float(x) for x in sent),
                                    link=v.link, geom=v.geom, message=self.describe(v))


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


def _skew(v: np.ndarray) -> np.ndarray:
    """(P, 3, 3) matrices S with S @ x = v x x for (P, 3) vectors v."""
    out = np.zeros((len(v), 3, 3))
    out[:, 0, 1], out[:, 0, 2] = -v[:, 2], v[:, 1]
    out[:, 1, 0], out[:, 1, 2] = v[:, 2], -v[:, 0]
    out[:, 2, 0], out[:, 2, 1] = -v[:, 1], v[:, 0]
    return out


def _is_real(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(float(value)))
