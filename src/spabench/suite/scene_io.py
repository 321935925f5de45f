"""Scene files (tasks/<task>/scenes/<condition>.yaml): a list of readable mappings <-> SceneSpec.

One scene per mapping, keys in a fixed order, one placed object per line:

    - scene_id: object_state-ood-007
      task: object_state
      condition: ood
      cell: upside_down|white_cup          # concept|argument (a {concept, argument} mapping also works)
      withheld: true
      matched_group: object_state-m03      # only on matched OOD scenes
      paraphrase: true                     # only on the paraphrase subset
      instructions: {spatial: ..., direct: ..., paraphrase_spatial: ..., paraphrase_direct: ...}
      targets: [white_cup_b]
      references: []
      goal: {kind: in_bowl, objects: [white_cup_b]}
      objects:
      - {object_id: white_cup_b, x_cm: 21.5, y_cm: 4.0, yaw_deg: 0, state: {lid: open, pose: upside_down}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spabench.errors import DataError, shown
from spabench.suite import checks
from spabench.suite.model import (
    Cell,
    Goal,
    GoalKind,
    Instructions,
    Location,
    ObjectSpec,
    ObjectState,
    PlacedObject,
    SceneSpec,
)
from spabench.suite.spec import TaskSpec
from spabench.suite.vocabulary import DIRECTIONS
from spabench.suite.yamlio import Flow, FlowList, dump_yaml

SCENE_KEYS_REQUIRED = ("scene_id", "cell", "withheld", "instructions", "goal", "objects")
SCENE_KEYS_OPTIONAL = ("task", "condition", "matched_group", "paraphrase", "targets", "references", "notes",
                       "family", "partner")
INSTRUCTION_KEYS = ("spatial", "direct", "paraphrase_spatial", "paraphrase_direct")
GOAL_KINDS: tuple[GoalKind, ...] = ("in_bowl", "relation", "count_in_bowl", "no_motion")
LIDS = ("open", "closed")
POSES = ("upright", "upside_down")
LOCATIONS: tuple[Location, ...] = ("table", "bowl")
_SCENE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def parse_cell(value: Any, task: TaskSpec, path: Path, field: str) -> Cell:
    """A cell written as 'concept|argument' (or a mapping); it must be one of the task's cells."""
    if isinstance(value, dict):
        checks.keys(value, path, field, ("concept", "argument"))
        cell = Cell(concept=checks.text(value["concept"], path, f"{field}.concept"),
                    argument=checks.text(value["argument"], path, f"{field}.argument"))
    elif isinstance(value, str) and value.count("|") == 1:
        concept, argument = (part.strip() for part in value.split("|"))
        cell = Cell(concept=concept, argument=argument)
    else:
        raise DataError(path, f"a cell is written 'concept|argument', got {value!r}", field=field)
    if task.cell_status(cell) is None:
        allowed = [c.key for c in (*task.cells, *task.controls)]
        raise DataError(path, f"cell {cell.key!r} is not in tasks/{task.name}/matrix.yaml", field=field,
                        allowed=allowed)
    return cell


def _object_id(value: Any, objects: Mapping[str, ObjectSpec], path: Path, field: str) -> str:
    allowed = [oid for oid, spec in objects.items() if spec.family != "bowl"]
    return checks.choice(value, allowed, path, field, "object id")


def _state(value: Any, spec: ObjectSpec, path: Path, field: str) -> ObjectState:
    value = {} if value is None else checks.mapping(value, path, field)
    checks.keys(value, path, field, (), ("lid", "pose"))
    lid, pose = value.get("lid"), value.get("pose")
    if lid is not None and not spec.has_lid:
        raise DataError(path, f"{spec.object_id} has no lid, so it has no lid state", field=f"{field}.lid",
                        allowed="omit it")
    if pose is not None and not spec.can_invert:
        raise DataError(path, f"{spec.object_id} cannot be inverted, so it has no pose state",
                        field=f"{field}.pose", allowed="omit it")
    if spec.has_lid:
        if lid is None:
            raise DataError(path, f"{spec.object_id} has a lid: say whether it is open or closed",
                            field=f"{field}.lid", allowed=LIDS)
        checks.choice(lid, LIDS, path, f"{field}.lid", "lid state")
    if spec.can_invert:
        if pose is None:
            raise DataError(path, f"{spec.object_id} can be inverted: give its pose", field=f"{field}.pose",
                            allowed=POSES)
        checks.choice(pose, POSES, path, f"{field}.pose", "pose")
    return ObjectState(lid=lid, pose=pose)


def _placed(value: Any, objects: Mapping[str, ObjectSpec], path: Path, field: str) -> PlacedObject:
    data = checks.mapping(value, path, field)
    checks.keys(data, path, field, ("object_id", "x_cm", "y_cm"), ("yaw_deg", "state", "location"))
    oid = _object_id(data["object_id"], objects, path, f"{field}.object_id")
    return PlacedObject(
        object_id=oid,
        x_cm=checks.number(data["x_cm"], path, f"{field}.x_cm"),
        y_cm=checks.number(data["y_cm"], path, f"{field}.y_cm"),
        yaw_deg=checks.number(data.get("yaw_deg", 0.0), path, f"{field}.yaw_deg"),
        state=_state(data.get("state"), objects[oid], path, f"{field}.state"),
        location=checks.choice(data.get("location", "table"), LOCATIONS, path, f"{field}.location", "location"),
    )


def _goal(value: Any, scene_objects: list[str], path: Path, field: str) -> Goal:
    data = checks.mapping(value, path, field)
    checks.keys(data, path, field, ("kind",), ("objects", "reference", "direction", "count"))
    kind = checks.choice(data["kind"], GOAL_KINDS, path, f"{field}.kind", "goal kind")
    goal_objects = checks.choices(checks.string_list(data.get("objects"), path, f"{field}.objects"),
                                  scene_objects, path, f"{field}.objects", "goal object (not in this scene)")
    reference = data.get("reference")
    if reference is not None:
        checks.choice(reference, scene_objects, path, f"{field}.reference", "reference (not in this scene)")
    direction = data.get("direction")
    if direction is not None:
        checks.choice(direction, DIRECTIONS, path, f"{field}.direction", "direction")
    count = data.get("count")
    if count is not None:
        count = checks.integer(count, path, f"{field}.count", minimum=0)
    if kind == "relation" and (not goal_objects or reference is None or direction is None):
        raise DataError(path, "a relation goal needs objects, reference and direction", field=field)
    if kind == "count_in_bowl" and count is None:
        raise DataError(path, "a count_in_bowl goal needs count", field=f"{field}.count")
    if kind == "in_bowl" and not goal_objects:
        raise DataError(path, "an in_bowl goal needs objects", field=f"{field}.objects")
    return Goal(kind=kind, objects=goal_objects, reference=reference, direction=direction, count=count)


def _instructions(value: Any, path: Path, field: str) -> Instructions:
    data = checks.mapping(value, path, field)
    checks.keys(data, path, field, ("spatial",), INSTRUCTION_KEYS[1:])
    optional = {k: (checks.text(data[k], path, f"{field}.{k}") if data.get(k) is not None else None)
                for k in INSTRUCTION_KEYS[1:]}
    return Instructions(checks.text(data["spatial"], path, f"{field}.spatial"), **optional)


def scene_from_mapping(value: Any, *, path: Path, index: int, task: TaskSpec, condition: str,
                       objects: Mapping[str, ObjectSpec]) -> SceneSpec:
    """One scene mapping -> SceneSpec; every problem names the file, the scene id and the field."""
    data = checks.mapping(value, path, f"[{index}]")
    raw_id = data.get("scene_id")
    label = raw_id if isinstance(raw_id, str) and raw_id else f"[{index}]"
    checks.keys(data, path, label, SCENE_KEYS_REQUIRED, SCENE_KEYS_OPTIONAL)
    scene_id = checks.text(raw_id, path, f"{label}.scene_id")
    if not _SCENE_ID.match(scene_id):
        raise DataError(path, f"scene id {shown(scene_id)} may hold letters, digits, '_', '-', '.' only",
                        field=f"{label}.scene_id")
    if data.get("task", task.name) != task.name:
        raise DataError(path, f"scene sits in tasks/{task.name}/ but says task {data['task']!r}",
                        field=f"{label}.task", allowed=[task.name])
    if data.get("condition", condition) != condition:
        raise DataError(path, f"scene sits in {condition}.yaml but says condition {data['condition']!r}",
                        field=f"{label}.condition", allowed=[condition])
    raw_objects = data["objects"]
    if not isinstance(raw_objects, list) or not raw_objects:
        raise DataError(path, "expected a non-empty list of placed objects", field=f"{label}.objects")
    placed = tuple(_placed(v, objects, path, f"{label}.objects[{i}]") for i, v in enumerate(raw_objects))
    ids = [p.object_id for p in placed]
    duplicates = sorted({oid for oid in ids if ids.count(oid) > 1})
    if duplicates:
        raise DataError(path, f"object(s) placed twice: {', '.join(duplicates)}", field=f"{label}.objects")
    targets = checks.choices(checks.string_list(data.get("targets"), path, f"{label}.targets"), ids, path,
                             f"{label}.targets", "target (not in this scene)")
    references = checks.choices(checks.string_list(data.get("references"), path, f"{label}.references"), ids,
                                path, f"{label}.references", "reference (not in this scene)")
    matched = data.get("matched_group")
    if matched is not None:
        matched = checks.text(matched, path, f"{label}.matched_group")
    return SceneSpec(
        scene_id=scene_id,
        task=task.name,
        condition=condition,
        cell=parse_cell(data["cell"], task, path, f"{label}.cell"),
        withheld=checks.boolean(data["withheld"], path, f"{label}.withheld"),
        objects=placed,
        instructions=_instructions(data["instructions"], path, f"{label}.instructions"),
        goal=_goal(data["goal"], ids, path, f"{label}.goal"),
        targets=targets,
        references=references,
        matched_group=matched,
        paraphrase=checks.boolean(data.get("paraphrase", False), path, f"{label}.paraphrase"),
        notes=checks.text(data.get("notes", ""), path, f"{label}.notes", allow_empty=True),
        family=checks.text(data["family"], path, f"{label}.family") if data.get("family") is not None else None,
        partner=checks.text(data["partner"], path, f"{label}.partner") if data.get("partner") is not None else None,
    )


def _num(value: float) -> float | int:
    """Whole numbers as ints (21 rather than 21.0) so files read naturally."""
    value = round(float(value), 2)
    return int(value) if value == int(value) else value


def scene_to_mapping(scene: SceneSpec) -> dict:
    """The hand-editable mapping of a scene (inverse of scene_from_mapping)."""
    out: dict[str, Any] = {
        "scene_id": scene.scene_id,
        "task": scene.task,
        "condition": scene.condition,
        "cell": scene.cell.key,
        "withheld": scene.withheld,
    }
    if scene.matched_group:
        out["matched_group"] = scene.matched_group
    if scene.paraphrase:
        out["paraphrase"] = True
    if scene.family:
        out["family"] = scene.family
    if scene.partner:
        out["partner"] = scene.partner
    ins = scene.instructions
    out["instructions"] = {k: getattr(ins, k) for k in INSTRUCTION_KEYS if getattr(ins, k) is not None}
    out["targets"] = FlowList(scene.targets)
    out["references"] = FlowList(scene.references)
    goal = Flow(kind=scene.goal.kind)
    if scene.goal.objects:
        goal["objects"] = FlowList(scene.goal.objects)
    for key in ("reference", "direction", "count"):
        if getattr(scene.goal, key) is not None:
            goal[key] = getattr(scene.goal, key)
    out["goal"] = goal
    placed_list = []
    for p in scene.objects:
        item = Flow(object_id=p.object_id, x_cm=_num(p.x_cm), y_cm=_num(p.y_cm), yaw_deg=_num(p.yaw_deg))
        state = Flow((k, v) for k, v in (("lid", p.state.lid), ("pose", p.state.pose)) if v is not None)
        if state:
            item["state"] = state
        if p.location != "table":
            item["location"] = p.location
        placed_list.append(item)
    out["objects"] = placed_list
    if scene.notes:
        out["notes"] = scene.notes
    return out


def dump_scene_file(scenes: list[SceneSpec], task: str, condition: str, seed: int | None) -> str:
    header = (f"Frozen scene specifications: {task} / {condition} ({len(scenes)} scenes).\n"
              f"Written by `spabench suite generate`"
              + (f" (seed {seed})" if seed is not None else "") + ". Hand edits are welcome;\n"
              "check them with `spabench suite validate`. Positions: workspace frame, cm (+x forward,\n"
              "+y the robot's left); yaw_deg turns an object's length axis from +x towards +y.")
    return dump_yaml([scene_to_mapping(s) for s in scenes], header=header)
