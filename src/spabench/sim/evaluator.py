"""Automatic success scoring for the twin, from object poses and the joint trajectory.

Binary success per the protocol's criteria (model.Goal kinds), plus a *suggested* primary failure
mode from vocabulary.FAILURE_MODES. The suggestion never changes the binary outcome.

  in_bowl        the goal objects are in the bowl and no other object is newly in it
  relation       goal.objects[0] satisfies the suite's relation rule (spabench.suite.success; default
                 the paper's: within 7.62 cm of goal.reference and inside the +-45 degree sector of
                 goal.direction), in the robot's frame: left = +y, right = -y, front = -x, behind = +x
  count_in_bowl  exactly goal.count objects are in the bowl
  no_motion      no motion onset in the joint trajectory (spabench.suite.motion)

"In the bowl": the object's centre is within the bowl's inner radius (horizontally), no higher
than the rim plus IN_BOWL_Z_MARGIN_CM, and the gripper is not holding it.

Pure numpy: poses in, verdict out; `EpisodeTrace` is what a caller (SimRobot, tests) collects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from spabench.errors import DataError
from spabench.suite.geometry import DIRECTION_VECTORS as _SUITE_DIRECTIONS
from spabench.suite.geometry import edge_gap_cm
from spabench.suite.geometry import relation_holds as _suite_relation_holds
from spabench.suite.model import BenchGeometry, Goal, ObjectSpec, SceneSpec
from spabench.suite.motion import MotionOnsetRule, motion_onset
from spabench.suite.rules import FAILURE_MODE_TASKS
from spabench.suite.success import RelationRule
from spabench.suite.vocabulary import (
    DIRECTIONS,
    FAILURE_MODES,
)

IN_BOWL_Z_MARGIN_CM = 2.0
MOVED_CM = 2.0            # an object displaced more than this (horizontally) was moved
LIFTED_CM = 2.0           # an object raised more than this above its start was lifted
WRONG_INSTANCE_TASKS = FAILURE_MODE_TASKS["wrong_instance"]   # the protocol's rule (spabench.suite.rules)

RELATION_WORDS = {"left": "left of", "right": "right of", "front": "in front of", "behind": "behind"}

# The robot's directions as unit vectors (from the suite's geometry: one definition for all).
DIRECTION_VECTORS: dict[str, np.ndarray] = {k: np.asarray(v, float) for k, v in _SUITE_DIRECTIONS.items()}


@dataclass
class EpisodeTrace:
    """What the evaluator reads about one episode. Positions in the workspace frame, centimetres."""

    initial_cm: dict[str, np.ndarray]                  # object -> (x, y, z) at episode start
    final_cm: dict[str, np.ndarray]                    # object -> (x, y, z) at the end
    max_lift_cm: dict[str, float] = field(default_factory=dict)  # highest rise above its start
    held_at_end: frozenset[str] = frozenset()          # touching both fingers at the end
    states: np.ndarray | None = None                   # (T, 6) joint trajectory, bench units


@dataclass(frozen=True)
class Evaluation:
    success: bool
    failure_mode: str | None          # None on success
    detail: str
    in_bowl_initial: tuple[str, ...] = ()
    in_bowl_final: tuple[str, ...] = ()
    motion_onset: int | None = None


# ---------------------------------------------------------------------- geometry predicates
def in_bowl(xyz_cm, geometry: BenchGeometry, z_margin_cm: float = IN_BOWL_Z_MARGIN_CM) -> bool:
    """Whether a position (cm) lies inside the bowl's inner cylinder (up to the rim + margin)."""
    p = np.asarray(xyz_cm, float)
    r = math.hypot(p[0] - geometry.bowl_xy_cm[0], p[1] - geometry.bowl_xy_cm[1])
    return r <= geometry.bowl_inner_radius_cm and p[2] <= geometry.bowl_height_cm + z_margin_cm


def relation_holds(target_xy_cm, reference_xy_cm, direction: str, rule: RelationRule | None = None,
                   edge_gap_cm: float | None = None) -> bool:
    """The suite's Relational Placement rule (spabench.suite.success, conf/suite `relation`) on centre
    positions; the sheet bound also takes the edge gap."""
    if direction not in DIRECTION_VECTORS:
        raise DataError("goal", f"unknown direction {direction!r}", field="direction",
                        allowed=DIRECTIONS)
    t = np.asarray(target_xy_cm, float)
    r = np.asarray(reference_xy_cm, float)
    return bool(_suite_relation_holds((float(t[0]), float(t[1])), (float(r[0]), float(r[1])), direction,
                                      rule, edge_gap_cm))


# ---------------------------------------------------------------------- helpers
def _edge_gap(t_xy, r_xy, target: str, ref: str, objects: Mapping[str, ObjectSpec] | None) -> float | None:
    """The sheet bound's edge gap (spabench.suite.geometry.edge_gap_cm), when the specs are known."""
    if not objects or target not in objects or ref not in objects:
        return None
    return edge_gap_cm((float(t_xy[0]), float(t_xy[1])), (float(r_xy[0]), float(r_xy[1])), objects[target],
                       objects[ref])


def _moved(trace: EpisodeTrace, oid: str) -> bool:
    a, b = trace.initial_cm[oid], trace.final_cm[oid]
    return bool(np.linalg.norm(np.asarray(b, float)[:2] - np.asarray(a, float)[:2]) > MOVED_CM
                or trace.max_lift_cm.get(oid, 0.0) > LIFTED_CM)


def _lifted(trace: EpisodeTrace, oid: str) -> bool:
    return trace.max_lift_cm.get(oid, 0.0) > LIFTED_CM


def _bowl_set(positions: Mapping[str, np.ndarray], geometry: BenchGeometry,
              held: frozenset[str] = frozenset()) -> set[str]:
    return {oid for oid, p in positions.items() if oid not in held and in_bowl(p, geometry)}


def _wrong(task: str, picked: list[str], targets: tuple[str, ...],
           objects: Mapping[str, ObjectSpec] | None) -> str:
    if objects and task in WRONG_INSTANCE_TASKS:
        target_cats = {objects[t].category for t in targets if t in objects}
        if any(objects[p].category in target_cats for p in picked if p in objects):
            return "wrong_instance"
    return "wrong_target"


def _check(mode: str | None) -> str | None:
    assert mode is None or mode in FAILURE_MODES, mode
    return mode


# ---------------------------------------------------------------------- evaluation
def evaluate(scene: SceneSpec | Goal, trace: EpisodeTrace, geometry: BenchGeometry,
             objects: Mapping[str, ObjectSpec] | None = None, task: str = "", *,
             relation_rule: RelationRule | None = None,
             onset_rule: MotionOnsetRule | None = None) -> Evaluation:
    """Score one episode against a scene's goal (or a bare Goal), by the suite's rules (conf/suite)."""
    goal = scene.goal if isinstance(scene, SceneSpec) else scene
    task = scene.task if isinstance(scene, SceneSpec) else task
    missing = [o for o in trace.initial_cm if o not in trace.final_cm]
    if missing:
        raise DataError("episode trace", f"objects {missing} have no final pose", field="final_cm")
    for oid in (*goal.objects, *([goal.reference] if goal.reference else [])):
        if oid not in trace.final_cm:
            raise DataError("episode trace", f"goal object {oid!r} is not in the scene",
                            field="goal.objects", allowed=sorted(trace.final_cm))
    onset = motion_onset(trace.states, onset_rule) if trace.states is not None and len(trace.states) else None
    s0 = _bowl_set(trace.initial_cm, geometry)
    s1 = _bowl_set(trace.final_cm, geometry, trace.held_at_end)
    any_moved = any(_moved(trace, o) for o in trace.final_cm)
    arm_moved = onset is not None if trace.states is not None else any_moved

    def result(success: bool, mode: str | None, detail: str) -> Evaluation:
        return Evaluation(success, _check(None if success else mode), detail,
                          tuple(sorted(s0)), tuple(sorted(s1)), onset)

    if goal.kind == "no_motion":
        if trace.states is None:
            raise DataError("episode trace", "a no_motion goal needs the joint trajectory",
                            field="states")
        if onset is None:
            return result(True, None, "no arm or gripper motion")
        return result(False, "unnecessary_intervention", f"motion onset at frame {onset}")

    if not arm_moved and not any_moved:
        nothing = "no arm motion and no object moved"
        if goal.kind == "count_in_bowl" and len(s1) == goal.count:
            return result(True, None, f"{len(s1)} objects in the bowl")
        return result(False, "no_action", nothing)

    if goal.kind == "in_bowl":
        targets = tuple(goal.objects)
        new = s1 - s0
        if set(targets) <= s1 and new <= set(targets):
            return result(True, None, f"{', '.join(targets)} in the bowl")
        wrong = sorted(new - set(targets))
        if wrong:
            return result(False, _wrong(task, wrong, targets, objects), f"{', '.join(wrong)} put in the bowl")
        return result(False, *_target_outcome(trace, task, [t for t in targets if t not in s1],
                                              targets, objects, placed_mode="premature_release_or_drop"))

    if goal.kind == "relation":
        target, ref, direction = goal.objects[0], goal.reference, goal.direction
        if ref is None or direction is None:   # scene files refuse such a goal
            raise ValueError(f"relation goal without reference/direction: {goal}")
        gap = _edge_gap(trace.final_cm[target], trace.final_cm[ref], target, ref, objects)
        if relation_holds(trace.final_cm[target], trace.final_cm[ref], direction, relation_rule, gap):
            return result(True, None, f"{target} {RELATION_WORDS[direction]} {ref}")
        return result(False, *_target_outcome(trace, task, [target], (target,), objects,
                                              placed_mode="correct_target_incorrect_spatial_outcome"))

    if goal.kind == "count_in_bowl":
        if goal.count is None:   # scene files refuse such a goal
            raise ValueError(f"count_in_bowl goal without count: {goal}")
        n0, n1, want = len(s0), len(s1), int(goal.count)
        if n1 == want:
            return result(True, None, f"{n1} objects in the bowl")
        if trace.held_at_end:
            return result(False, "timeout_or_incomplete", f"{n1} in the bowl, still holding one")
        dropped = [o for o in trace.final_cm if _lifted(trace, o) and o not in s1 and o not in s0]
        wrong_way = (n1 - n0) * (want - n0) < 0 or (want - n0) * (n1 - want) > 0
        if wrong_way:
            return result(False, "wrong_target", f"{n0} -> {n1} objects in the bowl, asked for {want}")
        if dropped:
            return result(False, "premature_release_or_drop", f"dropped {', '.join(dropped)}")
        if n1 == n0 and any_moved and not any(_lifted(trace, o) for o in trace.final_cm):
            return result(False, "grasp_failure", "objects pushed, none lifted")
        return result(False, "timeout_or_incomplete", f"{n0} -> {n1} objects in the bowl, asked for {want}")

    raise DataError("goal", f"unknown goal kind {goal.kind!r}", field="kind",
                    allowed=("in_bowl", "relation", "count_in_bowl", "no_motion"))


def _target_outcome(trace: EpisodeTrace, task: str, missed: list[str], targets: tuple[str, ...],
                    objects: Mapping[str, ObjectSpec] | None, placed_mode: str) -> tuple[str, str]:
    """Failure mode when the target did not end where it should."""
    t = missed[0] if missed else targets[0]
    if t in trace.held_at_end:
        return "timeout_or_incomplete", f"{t} still in the gripper"
    if _lifted(trace, t):
        return placed_mode, f"{t} lifted but released outside the goal"
    if _moved(trace, t):
        return "grasp_failure", f"{t} pushed but never lifted"
    others = [o for o in trace.final_cm if o not in targets and _moved(trace, o)]
    if others:
        return _wrong(task, others, targets, objects), f"moved {', '.join(others)} instead of {t}"
    return "timeout_or_incomplete", f"{t} never moved"
