"""Load tasks/ and hardware/ into a Suite. Every malformed input is one DataError naming the file, the
field (scene id first) and the allowed values; nothing is loaded half-way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from spabench.errors import DataError, SpabenchError
from spabench.suite import checks
from spabench.suite.model import ArmEnvelope, BenchGeometry, Box, Cell, ObjectSpec, SceneSpec
from spabench.suite.scene_io import parse_cell, scene_from_mapping
from spabench.suite.spec import (
    AXES,
    INSTRUCTION_KINDS,
    ArgumentSpec,
    ConceptSpec,
    Suite,
    SuiteManifest,
    TaskSpec,
)
from spabench.suite.vocabulary import CAMERAS, SCENE_CONDITIONS, TASKS
from spabench.suite.wording import PLACEHOLDERS, template_placeholders
from spabench.suite.yamlio import read_yaml

OBJECT_KEYS_REQUIRED = ("family", "colour", "display_name", "category", "size_cm")
OBJECT_KEYS_OPTIONAL = ("has_lid", "can_invert", "size_rank", "novel", "footprint_radius_cm")
MATRIX_KEYS_REQUIRED = ("task", "axis", "success", "objects", "concepts", "arguments", "observed", "withheld")
MATRIX_KEYS_OPTIONAL = ("controls", "references", "cross_task_objects", "notes")
MANIFEST_KEYS_REQUIRED = ("name", "version", "generator_seed", "tasks", "counts")
MANIFEST_KEYS_OPTIONAL = ("protocol", "notes")
GEOMETRY_KEYS = ("table_size_cm", "workspace_x_cm", "workspace_y_cm", "bowl_xy_cm", "bowl_inner_radius_cm",
                 "bowl_outer_radius_cm", "bowl_height_cm", "cameras")
# The arm's safety limits in bench.yaml: a group of its own, never part of a plan's identity (a lab may
# change a limit between sessions; `run` records the change in the ledger). Every field a later envelope
# gains lives inside it, so no list of names has to follow it.
SAFETY_GROUP = "arm_envelope"
GEOMETRY_KEYS_OPTIONAL = (SAFETY_GROUP,)
ENVELOPE_KEYS = ("table_z_cm", "table_margin_cm", "box_cm", "keep_out_cm", "keep_out_margin_cm")
BOX_KEYS = ("x", "y", "z")
MAX_TABLE_MARGIN_CM = 20.0
COUNT_KEYS = (*SCENE_CONDITIONS, "matched", "paraphrase")
_OBJECT_ID = re.compile(r"^[a-z0-9][a-z0-9_]*$")


def resolve_path(path: str | os.PathLike) -> Path:
    """Absolute paths as given; relative ones from the repository root (or the cwd without one)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    try:
        from spabench.paths import resolve
    except ImportError:  # pragma: no cover - paths module not present
        return Path.cwd() / p
    try:
        return resolve(p)
    except SpabenchError:
        return Path.cwd() / p


# -- objects -----------------------------------------------------------------------------------------


def load_objects(path: Path) -> dict[str, ObjectSpec]:
    doc = checks.mapping(read_yaml(path), path, None)
    checks.keys(doc, path, None, ("objects",))
    entries = checks.mapping(doc["objects"], path, "objects")
    objects: dict[str, ObjectSpec] = {}
    for oid, value in entries.items():
        field = f"objects.{oid}"
        if not isinstance(oid, str) or not _OBJECT_ID.match(oid):
            raise DataError(path, f"object id {oid!r} must be lower_snake_case", field=field)
        data = checks.mapping(value, path, field)
        checks.keys(data, path, field, OBJECT_KEYS_REQUIRED, OBJECT_KEYS_OPTIONAL)
        size_rank = data.get("size_rank")
        objects[oid] = ObjectSpec(
            object_id=oid,
            family=checks.text(data["family"], path, f"{field}.family"),
            colour=checks.text(data["colour"], path, f"{field}.colour"),
            size_cm=checks.numbers(data["size_cm"], path, f"{field}.size_cm", 3, positive=True),  # type: ignore[arg-type]
            display_name=checks.text(data["display_name"], path, f"{field}.display_name"),
            category=checks.text(data["category"], path, f"{field}.category"),
            has_lid=checks.boolean(data.get("has_lid", False), path, f"{field}.has_lid"),
            can_invert=checks.boolean(data.get("can_invert", False), path, f"{field}.can_invert"),
            size_rank=None if size_rank is None else checks.integer(size_rank, path, f"{field}.size_rank", minimum=1),
            novel=checks.boolean(data.get("novel", False), path, f"{field}.novel"),
            footprint_radius_cm=checks.number(data.get("footprint_radius_cm", 0.0), path,
                                              f"{field}.footprint_radius_cm", minimum=0.0),
        )
    if not any(spec.family == "bowl" for spec in objects.values()):
        raise DataError(path, "the inventory needs the bowl (an object with family: bowl)", field="objects")
    return objects


# -- hardware ----------------------------------------------------------------------------------------


def _interval(value, path: Path, field: str) -> tuple[float, float]:
    lo, hi = checks.numbers(value, path, field, 2)
    if lo >= hi:
        raise DataError(path, f"expected [low, high] with low < high, got {value!r}", field=field)
    return lo, hi


def load_geometry(path: Path) -> BenchGeometry:
    doc = checks.mapping(read_yaml(path), path, None)
    checks.keys(doc, path, None, GEOMETRY_KEYS, GEOMETRY_KEYS_OPTIONAL)
    cameras = checks.mapping(doc["cameras"], path, "cameras")
    for name, cam in cameras.items():
        checks.choice(name, CAMERAS, path, f"cameras.{name}", "camera")
        checks.mapping(cam, path, f"cameras.{name}")
    inner = checks.number(doc["bowl_inner_radius_cm"], path, "bowl_inner_radius_cm", positive=True)
    outer = checks.number(doc["bowl_outer_radius_cm"], path, "bowl_outer_radius_cm", positive=True)
    if inner > outer:
        raise DataError(path, "the bowl's inner radius exceeds its outer radius", field="bowl_inner_radius_cm")
    return BenchGeometry(
        table_size_cm=checks.numbers(doc["table_size_cm"], path, "table_size_cm", 2, positive=True),  # type: ignore[arg-type]
        workspace_x_cm=_interval(doc["workspace_x_cm"], path, "workspace_x_cm"),
        workspace_y_cm=_interval(doc["workspace_y_cm"], path, "workspace_y_cm"),
        bowl_xy_cm=checks.numbers(doc["bowl_xy_cm"], path, "bowl_xy_cm", 2),  # type: ignore[arg-type]
        bowl_inner_radius_cm=inner,
        bowl_outer_radius_cm=outer,
        bowl_height_cm=checks.number(doc["bowl_height_cm"], path, "bowl_height_cm", positive=True),
        cameras={str(k): dict(v) for k, v in cameras.items()},
        arm_envelope=load_arm_envelope(doc.get("arm_envelope"), path),
    )


def _box(value, path: Path, field: str) -> Box:
    data = checks.mapping(value, path, field)
    checks.keys(data, path, field, BOX_KEYS)
    x, y, z = (_interval(data[axis], path, f"{field}.{axis}") for axis in BOX_KEYS)
    return Box(x_cm=x, y_cm=y, z_cm=z)


def load_arm_envelope(value, path: Path) -> ArmEnvelope:
    """The `arm_envelope:` block (absent: the documented defaults of ArmEnvelope). A box that
    leaves no room above the table is refused here, before any bench connects."""
    if value is None:
        return ArmEnvelope()
    field = "arm_envelope"
    data = checks.mapping(value, path, field)
    checks.keys(data, path, field, (), ENVELOPE_KEYS)
    default = ArmEnvelope()
    table_z = checks.number(data.get("table_z_cm", default.table_z_cm), path, f"{field}.table_z_cm")
    margin = checks.number(data.get("table_margin_cm", default.table_margin_cm), path,
                           f"{field}.table_margin_cm", minimum=0.0)
    if margin > MAX_TABLE_MARGIN_CM:
        raise DataError(path, f"{margin} cm leaves the gripper no way to reach the table (allowed: 0 to "
                        f"{MAX_TABLE_MARGIN_CM} cm)", field=f"{field}.table_margin_cm")
    box = _box(data["box_cm"], path, f"{field}.box_cm") if "box_cm" in data else default.box
    floor = table_z + margin
    if not box.z_cm[0] <= floor < box.z_cm[1]:
        raise DataError(path, f"box_cm.z {list(box.z_cm)} must hold the lowest allowed gripper height "
                        f"table_z_cm + table_margin_cm = {floor} cm (low <= it < high)", field=f"{field}.box_cm.z")
    keep_out: dict[str, Box] = {}
    entries = checks.mapping(data.get("keep_out_cm") or {}, path, f"{field}.keep_out_cm")
    for name, spec in entries.items():
        where = f"{field}.keep_out_cm.{name}"
        if not isinstance(name, str) or not _OBJECT_ID.match(name):
            raise DataError(path, f"keep-out box name {name!r} must be lower_snake_case", field=where)
        keep_out[name] = _box(spec, path, where)
    keep_out_margin = checks.number(data.get("keep_out_margin_cm", default.keep_out_margin_cm), path,
                                    f"{field}.keep_out_margin_cm", minimum=0.0)
    if keep_out_margin > MAX_TABLE_MARGIN_CM:
        raise DataError(path, f"{keep_out_margin} cm (allowed: 0 to {MAX_TABLE_MARGIN_CM} cm)",
                        field=f"{field}.keep_out_margin_cm")
    return ArmEnvelope(table_z_cm=table_z, table_margin_cm=margin, box=box, keep_out=keep_out,
                       keep_out_margin_cm=keep_out_margin)


# -- manifest ----------------------------------------------------------------------------------------


def load_manifest(path: Path) -> SuiteManifest:
    doc = checks.mapping(read_yaml(path), path, None)
    checks.keys(doc, path, None, MANIFEST_KEYS_REQUIRED, MANIFEST_KEYS_OPTIONAL)
    tasks = checks.choices(checks.string_list(doc["tasks"], path, "tasks"), TASKS, path, "tasks", "task")
    if not tasks:
        raise DataError(path, "the suite lists no tasks", field="tasks", allowed=TASKS)
    raw_counts = checks.mapping(doc["counts"], path, "counts")
    counts: dict[str, dict[str, int]] = {}
    for task, per in raw_counts.items():
        checks.choice(task, tasks, path, f"counts.{task}", "task (not in tasks)")
        per = checks.mapping(per, path, f"counts.{task}")
        counts[task] = {
            checks.choice(k, COUNT_KEYS, path, f"counts.{task}.{k}", "count key"):
                checks.integer(v, path, f"counts.{task}.{k}", minimum=0)
            for k, v in per.items()
        }
    for task in tasks:
        if task not in counts:
            raise DataError(path, f"no scene counts for task {task!r}", field=f"counts.{task}", allowed=COUNT_KEYS)
    return SuiteManifest(
        name=checks.text(doc["name"], path, "name"),
        version=str(doc["version"]),
        protocol=checks.text(doc.get("protocol", "spa-bench"), path, "protocol"),
        seed=checks.integer(doc["generator_seed"], path, "generator_seed"),
        tasks=tasks,
        counts=counts,
    )


# -- tasks -------------------------------------------------------------------------------------------


def _concepts(value, path: Path) -> dict[str, ConceptSpec]:
    data = checks.mapping(value, path, "concepts")
    out = {}
    for key, spec in data.items():
        field = f"concepts.{key}"
        if isinstance(spec, str):
            out[key] = ConceptSpec(key=key, words=spec, paraphrase=spec)
            continue
        spec = checks.mapping(spec, path, field)
        checks.keys(spec, path, field, ("words",), ("paraphrase",))
        words = checks.text(spec["words"], path, f"{field}.words")
        out[key] = ConceptSpec(key=key, words=words,
                               paraphrase=checks.text(spec.get("paraphrase", words), path, f"{field}.paraphrase"))
    return out


def _arguments(value, path: Path, objects: dict[str, ObjectSpec]) -> dict[str, ArgumentSpec]:
    data = checks.mapping(value, path, "arguments")
    known = [oid for oid, spec in objects.items() if spec.family != "bowl"]
    out = {}
    for key, spec in data.items():
        field = f"arguments.{key}"
        spec = checks.mapping(spec or {}, path, field)
        checks.keys(spec, path, field, (), ("display", "objects", "references"))
        members = checks.choices(checks.string_list(spec.get("objects"), path, f"{field}.objects"), known, path,
                                 f"{field}.objects", "object id")
        refs = checks.choices(checks.string_list(spec.get("references"), path, f"{field}.references"), known,
                              path, f"{field}.references", "object id")
        display = spec.get("display")
        if display is None:
            if len(members) != 1:
                raise DataError(path, "an argument without exactly one object needs a display name",
                                field=f"{field}.display")
            display = objects[members[0]].display_name
        out[key] = ArgumentSpec(key=key, display=checks.text(display, path, f"{field}.display"),
                                objects=members, references=refs)
    return out


def _cells(value, path: Path, field: str, concepts, arguments) -> tuple[Cell, ...]:
    cells = []
    for i, item in enumerate(checks.string_list(value, path, field)):
        if item.count("|") != 1:
            raise DataError(path, f"a cell is written 'concept|argument', got {item!r}", field=f"{field}[{i}]")
        concept, argument = (part.strip() for part in item.split("|"))
        checks.choice(concept, concepts, path, f"{field}[{i}]", "concept")
        checks.choice(argument, arguments, path, f"{field}[{i}]", "argument")
        cells.append(Cell(concept=concept, argument=argument))
    return tuple(cells)


def _templates(path: Path, arguments) -> dict[str, list[str]]:
    doc = checks.mapping(read_yaml(path), path, None)
    allowed_kinds = list(INSTRUCTION_KINDS) + [f"{k}_{a}" for k in INSTRUCTION_KINDS for a in arguments]
    templates: dict[str, list[str]] = {}
    for kind, value in doc.items():
        checks.choice(kind, allowed_kinds, path, str(kind), "instruction kind")
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise DataError(path, "expected a template string or a non-empty list of them", field=kind)
        for i, template in enumerate(items):
            checks.text(template, path, f"{kind}[{i}]")
            try:
                names = template_placeholders(template)
            except ValueError as exc:
                raise DataError(path, f"bad template: {exc}", field=f"{kind}[{i}]") from None
            for name in names:
                checks.choice(name, PLACEHOLDERS, path, f"{kind}[{i}]", "placeholder")
        templates[kind] = list(items)
    for kind in INSTRUCTION_KINDS:
        if kind not in templates:
            raise DataError(path, f"missing instruction kind {kind!r}", field=kind, allowed=INSTRUCTION_KINDS)
    return templates


def load_task(folder: Path, name: str, objects: dict[str, ObjectSpec]) -> TaskSpec:
    path = folder / "matrix.yaml"
    doc = checks.mapping(read_yaml(path), path, None)
    checks.keys(doc, path, None, MATRIX_KEYS_REQUIRED, MATRIX_KEYS_OPTIONAL)
    if doc["task"] != name:
        raise DataError(path, f"matrix of folder {name!r} says task {doc['task']!r}", field="task", allowed=[name])
    known = [oid for oid, spec in objects.items() if spec.family != "bowl"]
    concepts = _concepts(doc["concepts"], path)
    arguments = _arguments(doc["arguments"], path, objects)
    observed = _cells(doc["observed"], path, "observed", concepts, arguments)
    withheld = _cells(doc["withheld"], path, "withheld", concepts, arguments)
    controls = _cells(doc.get("controls"), path, "controls", concepts, arguments)
    keys = [c.key for c in (*observed, *withheld, *controls)]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise DataError(path, f"cell(s) listed twice (observed, withheld and controls are disjoint): "
                              f"{', '.join(repeated)}", field="observed")

    def object_list(key: str) -> tuple[str, ...]:
        return checks.choices(checks.string_list(doc.get(key), path, key), known, path, key, "object id")

    return TaskSpec(
        name=name,
        axis=checks.choice(doc["axis"], AXES, path, "axis", "axis"),
        cells=observed + withheld,
        withheld=frozenset(c.key for c in withheld),
        templates=_templates(folder / "prompts.yaml", arguments),
        success=checks.text(doc["success"], path, "success"),
        concepts=concepts,
        arguments=arguments,
        controls=controls,
        pool=object_list("objects"),
        cross_task_objects=object_list("cross_task_objects"),
        references=object_list("references"),
    )


# -- scenes and the suite ----------------------------------------------------------------------------


def load_scene_file(path: Path, task: TaskSpec, objects: dict[str, ObjectSpec]) -> list[SceneSpec]:
    condition = path.stem
    checks.choice(condition, SCENE_CONDITIONS, path, "file name", "scene condition")
    doc = read_yaml(path)
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise DataError(path, f"expected a list of scenes, got {type(doc).__name__}", field=None)
    return [scene_from_mapping(item, path=path, index=i, task=task, condition=condition, objects=objects)
            for i, item in enumerate(doc)]


def load_suite(tasks_root: str | os.PathLike = "tasks", hardware_root: str | os.PathLike = "hardware") -> Suite:
    """The benchmark as data: tasks_root/{suite.yaml, objects.yaml, <task>/...} and hardware_root/bench.yaml."""
    root, hardware = resolve_path(tasks_root), resolve_path(hardware_root)
    if not root.is_dir():
        raise DataError(root, "the tasks folder does not exist")
    manifest = load_manifest(root / "suite.yaml")
    objects = load_objects(root / "objects.yaml")
    geometry = load_geometry(hardware / "bench.yaml")
    tasks = {name: load_task(root / name, name, objects) for name in manifest.tasks}
    scenes: dict[str, SceneSpec] = {}
    sources: dict[str, str] = {}
    for name in manifest.tasks:
        folder = root / name / "scenes"
        if not folder.is_dir():
            raise DataError(folder, "the task has no scenes folder")
        for path in sorted(folder.glob("*.yaml")):
            for scene in load_scene_file(path, tasks[name], objects):
                if scene.scene_id in scenes:
                    raise DataError(path, f"scene id {scene.scene_id!r} is also used in {sources[scene.scene_id]}",
                                    field=f"{scene.scene_id}.scene_id")
                scenes[scene.scene_id] = scene
                sources[scene.scene_id] = str(path)
    return Suite(objects=objects, tasks=tasks, scenes=scenes, geometry=geometry, manifest=manifest,
                 sources=sources, root=str(root))


__all__ = ["load_suite", "load_objects", "load_geometry", "load_arm_envelope", "load_manifest", "load_task", "load_scene_file",
           "parse_cell", "resolve_path"]
