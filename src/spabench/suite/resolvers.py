"""Which object(s) a spatial instruction means, computed from the scene alone (the task semantics).

`resolve_targets(scene, suite)` reads only the scene's cell, its placed objects (positions, states,
locations), its references and the inventory's attributes; it never reads `scene.targets`. The
contracts compare its answer with the stored targets, and the twin's success evaluator uses the same
functions, so these rules are the benchmark's definition of "the valid target". An ambiguous scene
resolves to every tied candidate (so "exactly one" fails loudly instead of picking one silently).

Counting has no single target: its resolver returns the objects whose move changes the count
towards the goal (objects in the bowl for removal, on the table for addition).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spabench.suite.geometry import (
    between_excess,
    distance,
    placed_footprint,
    relation_holds,
    y_interval,
)
from spabench.suite.model import Goal, ObjectSpec, ObjectState, PlacedObject, SceneSpec

# Unambiguity margins (see the task matrices for the wording).
DISTANCE_MARGIN_CM = 3.0        # closest/furthest: the meant instance wins by at least this much
BETWEEN_MAX_EXCESS_CM = 2.0     # between: |o-r1| + |o-r2| - |r1-r2| of the meant instance
SIZE_RATIO_MARGIN = 1.3         # relative size: runner-up volume differs by at least this factor
ORDINAL_GAP_CM = 2.0            # ordinal rows: clear gap between neighbouring footprints across y

LID_CONCEPTS = ("open", "closed")
POSE_CONCEPTS = ("upright", "upside_down")

_GOAL_RE = re.compile(r"^goal_(\d+)$")
_POSITION_RE = re.compile(r"^position_(\d+)_of_(\d+)$")


def size_metric(spec: ObjectSpec) -> float:
    """Relative Size compares bounding-box volumes (cm^3)."""
    length, width, height = spec.size_cm
    return float(length) * float(width) * float(height)


def state_matches(state: ObjectState, concept: str) -> bool:
    """Object State: lid concepts describe upright objects only; pose concepts the pose."""
    if concept in LID_CONCEPTS:
        return state.lid == concept and state.pose in (None, "upright")
    if concept in POSE_CONCEPTS:
        return state.pose == concept
    return False


def goal_count(concept: str) -> int | None:
    match = _GOAL_RE.match(concept)
    return int(match.group(1)) if match else None


def ordinal_position(concept: str) -> tuple[int, int] | None:
    """(k, n) of a 'position_k_of_n' concept."""
    match = _POSITION_RE.match(concept)
    return (int(match.group(1)), int(match.group(2))) if match else None


def table_objects(scene: SceneSpec) -> list[PlacedObject]:
    return [o for o in scene.objects if o.location == "table"]


def start_count(scene: SceneSpec) -> int:
    """Objects in the bowl when the scene is set up."""
    return sum(1 for o in scene.objects if o.location == "bowl")


def _xy(placed: PlacedObject) -> tuple[float, float]:
    return (placed.x_cm, placed.y_cm)


def _argument(scene: SceneSpec, suite):
    task = suite.tasks.get(scene.task)
    return None if task is None else task.arguments.get(scene.cell.argument)


def _placed(scene: SceneSpec, object_id: str) -> PlacedObject | None:
    return next((o for o in scene.objects if o.object_id == object_id), None)


def extreme(values: dict[str, float], *, largest: bool, ratio: float) -> set[str]:
    """The unique extreme by a ratio margin, else every candidate within the margin of it."""
    if not values:
        return set()
    ordered = sorted(values.items(), key=lambda kv: kv[1], reverse=largest)
    best = ordered[0][1]
    if largest:
        return {oid for oid, v in ordered if v * ratio > best}
    return {oid for oid, v in ordered if v < best * ratio}


def _nearest(values: dict[str, float], *, smallest: bool, margin: float) -> set[str]:
    """The unique min (or max) by an absolute margin, else every candidate within the margin."""
    if not values:
        return set()
    best = min(values.values()) if smallest else max(values.values())
    return {oid for oid, v in values.items() if abs(v - best) < margin}


# -- per-task resolvers ------------------------------------------------------------------------------


def resolve_object_state(scene: SceneSpec, suite) -> set[str]:
    """Members of the argument in the named state. An upside-down member whose hidden lid has the named
    lid state is a disputable reading, so it counts as a candidate too (and makes the scene ambiguous)."""
    argument = _argument(scene, suite)
    if argument is None:
        return set()
    concept = scene.cell.concept
    return {o.object_id for o in table_objects(scene)
            if o.object_id in argument.objects and (
                state_matches(o.state, concept)
                or (concept in LID_CONCEPTS and o.state.pose == "upside_down" and o.state.lid == concept))}


def resolve_relative_size(scene: SceneSpec, suite) -> set[str]:
    concept = scene.cell.concept
    if concept not in ("smallest", "largest"):
        return set()
    volumes = {o.object_id: size_metric(suite.objects[o.object_id]) for o in table_objects(scene)}
    return extreme(volumes, largest=concept == "largest", ratio=SIZE_RATIO_MARGIN)


def resolve_relational_placement(scene: SceneSpec, suite) -> set[str]:
    argument = _argument(scene, suite)
    if argument is None or not argument.objects or not argument.references:
        return set()
    on_table = {o.object_id for o in table_objects(scene)}
    target, reference = argument.objects[0], argument.references[0]
    return {target} if target in on_table and reference in on_table else set()


def resolve_referential_description(scene: SceneSpec, suite) -> set[str]:
    argument = _argument(scene, suite)
    if argument is None:
        return set()
    refs = [p for r in scene.references if (p := _placed(scene, r)) is not None and p.location == "table"]
    if not refs or len(refs) < len(scene.references):
        return set()
    candidates = {o.object_id: _xy(o) for o in table_objects(scene)
                  if o.object_id in argument.objects and o.object_id not in scene.references}
    concept = scene.cell.concept
    if concept in ("closest", "furthest"):
        ref_xy = _xy(refs[0])
        dists = {oid: distance(xy, ref_xy) for oid, xy in candidates.items()}
        return _nearest(dists, smallest=concept == "closest", margin=DISTANCE_MARGIN_CM)
    if concept == "between" and len(refs) == 2:
        r1, r2 = _xy(refs[0]), _xy(refs[1])
        excess = {oid: between_excess(xy, r1, r2) for oid, xy in candidates.items()}
        inside = {oid: e for oid, e in excess.items() if e <= BETWEEN_MAX_EXCESS_CM}
        if not inside:
            return set()
        best = min(inside.values())
        return {oid for oid, e in excess.items() if e < best + DISTANCE_MARGIN_CM}
    return set()


def ordinal_row(scene: SceneSpec, suite) -> list[PlacedObject]:
    """Table objects from the robot's left to its right (decreasing y)."""
    return sorted(table_objects(scene), key=lambda o: -o.y_cm)


def resolve_ordinal_position(scene: SceneSpec, suite) -> set[str]:
    position = ordinal_position(scene.cell.concept)
    if position is None:
        return set()
    k = position[0]
    row = ordinal_row(scene, suite)
    if k < 1 or k > len(row):
        return set()
    intervals = [y_interval(placed_footprint(suite.objects[o.object_id], o)) for o in row]
    chosen = {row[k - 1].object_id}
    for j in (k - 2, k):  # neighbours on the left (index k-2) and right (index k)
        if 0 <= j < len(row):
            upper, lower = intervals[min(j, k - 1)], intervals[max(j, k - 1)]
            if upper[0] - lower[1] < ORDINAL_GAP_CM:
                chosen.add(row[j].object_id)
    return chosen


def resolve_counting(scene: SceneSpec, suite) -> set[str]:
    goal = goal_count(scene.cell.concept)
    if goal is None:
        return set()
    start = start_count(scene)
    if start > goal:
        return {o.object_id for o in scene.objects if o.location == "bowl"}
    if start < goal:
        return {o.object_id for o in scene.objects if o.location == "table"}
    return set()


RESOLVERS: dict[str, Callable[[SceneSpec, object], set[str]]] = {
    "object_state": resolve_object_state,
    "relative_size": resolve_relative_size,
    "relational_placement": resolve_relational_placement,
    "referential_description": resolve_referential_description,
    "ordinal_position": resolve_ordinal_position,
    "counting": resolve_counting,
}


def resolve_targets(scene: SceneSpec, suite) -> set[str]:
    """The object ids the scene's spatial instruction validly refers to (see module docstring)."""
    resolver = RESOLVERS.get(scene.task)
    return set() if resolver is None else resolver(scene, suite)


def requested_relation(scene: SceneSpec, suite) -> tuple[str, str, str] | None:
    """Relational Placement: (target, reference, direction) requested by the scene's cell."""
    argument = _argument(scene, suite)
    if scene.task != "relational_placement" or argument is None or not argument.references:
        return None
    return argument.objects[0], argument.references[0], scene.cell.concept


def requested_relation_holds(scene: SceneSpec, suite) -> bool | None:
    """Does the requested relation already hold in the scene as set up? None when not applicable."""
    relation = requested_relation(scene, suite)
    if relation is None:
        return None
    target_id, reference_id, direction = relation
    target, reference = _placed(scene, target_id), _placed(scene, reference_id)
    if target is None or reference is None:
        return None
    return relation_holds(_xy(target), _xy(reference), direction)


def requested_count_holds(scene: SceneSpec) -> bool | None:
    """Counting: is the requested count already in the bowl? None when not applicable."""
    goal = goal_count(scene.cell.concept)
    return None if goal is None else start_count(scene) == goal


def direct_goal(scene: SceneSpec) -> Goal:
    """What a direct (named-object) instruction asks: the named target into the bowl, except for
    Counting, where moving the named object reaches the scene's count goal."""
    if scene.task == "counting":
        return scene.goal
    return Goal(kind="in_bowl", objects=tuple(scene.targets[:1]))
