"""The suite's design contracts: what makes the frozen scenes a valid Spa-Bench benchmark.

`validate_suite(suite)` returns every Violation (rule name, scene or task, message with the values);
`check_suite(suite)` raises one DataError listing them all. Targets are recomputed from positions,
states and attributes by `resolvers.resolve_targets`, never taken from the scene's own `targets`.

Rules (see RULES): the withheld-cell design, which conditions test which cells, one valid target per
spatial instruction (none under no-intervention), goals that already hold / do not yet hold, unique
size extremes, direct and paraphrased wording, layout (workspace, overlaps, bowl), and the protocol's
scene counts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations

from spabench.errors import DataError
from spabench.suite import resolvers as R
from spabench.suite.geometry import (
    DIRECTION_VECTORS,
    distance,
    edge_gap_cm,
    footprint_gap,
    footprints_apart,
    placed_footprint,
    point_footprint_distance,
    relation_offset,
    y_interval,
)
from spabench.suite.model import SceneSpec
from spabench.suite.spec import Suite, TaskSpec
from spabench.suite.vocabulary import CONDITION_COUNTS
from spabench.suite.wording import renderings, spatial_words_in

MAX_CANDIDATES = 5
MIN_GAP_CM = 1.0                 # clear gap between two footprints on the table
BOWL_CLEARANCE_CM = 1.0          # clear gap between a footprint and the bowl's rim
ROW_ALIGN_CM = 3.0               # ordinal rows: centres within this of the row's median x
RELATION_MARGIN_CM = 1.0         # relation clearly holds / clearly does not (distance)
RELATION_MARGIN_DEG = 10.0       # ... and angle
GOAL_REGION_OFFSET_CM = 5.5      # where a relational target would go: reference + offset * direction
GOAL_REGION_CLEAR_CM = 2.5       # that spot is this far from every other footprint and the bowl rim
GOAL_REGION_SLACK_CM = 3.0       # ... and within the workspace grown by this much
OOD_COUNTING_START = 2           # the protocol's withheld counting cells start from two in the bowl

OWN_POOL_CONDITIONS = ("id", "ood", "direct", "no_intervention", "no_movement", "movement_required")
DIRECT_VARIANT_TASKS = ("object_state",)   # direct controls run on a declared variant scene (twins)
ABSENT_ORDINAL_CELLS = ("position_2_of_3",)  # "Absent" from training: no ID or OOD scene uses it
FAMILY_SIZE = 4                            # Relational Placement: four-instruction families
NO_MOTION_CONDITIONS = ("no_intervention", "no_movement")

RULES: dict[str, str] = {
    "withheld_concept_observed": "every withheld cell's concept appears in an observed cell with another argument",
    "withheld_object_direct": "every withheld cell's object is a target of a direct instruction somewhere",
    "cell_condition": "OOD scenes test withheld cells; ID, cross-task and relational controls observed ones",
    "unique_target": "the spatial instruction has exactly one valid target, and it is the scene's target",
    "no_valid_target": "a no-intervention instruction has no valid target",
    "target_matches_cell": "the resolved target embodies the cell's argument",
    "counting_change": "a counting scene needs the count changed in the cell's direction",
    "goal_already_holds": "no-intervention counting and no-movement scenes already satisfy the request",
    "goal_not_met": "relational scenes that need movement do not already satisfy the relation",
    "goal_matches": "the goal record says what the task and condition require",
    "references": "references are the ones the cell needs, present and uniquely named",
    "relative_size_extremes": "relative size scenes have a unique smallest and a unique largest object",
    "instruction_matches_cell": "the spatial (and paraphrased spatial) instruction renders the scene's cell",
    "direct_instruction": "a direct instruction names its target uniquely and has no spatial concept word",
    "paraphrase_keeps_target": "paraphrases keep the target and differ from the originals",
    "matched_group": "matched groups sit on OOD scenes, are unique, and carry the direct instruction",
    "task_objects": "ID/OOD/control scenes use the task's objects; cross-task scenes other tasks' objects",
    "max_candidates": "at most five candidate objects per scene",
    "workspace": "object centres lie in the workspace; objects in the bowl lie inside it",
    "no_overlap": "footprints on the table do not overlap (clear gap)",
    "bowl_clearance": "footprints keep clear of the bowl",
    "ordinal_row": "ordinal scenes are one row of n objects with clear gaps",
    "goal_region_free": "the spot a relational target must reach is free, near and inside the workspace",
    "movement_pairs": "each movement-required scene names its no-movement partner (field partner) and "
                      "matches its objects and cell",
    "state_twins": "Object State ID/OOD scenes hold both twins of the named kind, differing only on the "
                   "queried axis",
    "direct_variant": "Object State direct controls run on a declared variant of their matched OOD scene: "
                      "same matched_group, the non-target twin removed, nothing else changed",
    "training_support": "ID scenes use cells with training support: Counting single-object moves; no "
                        "Ordinal ID/OOD scene at position 2 of 3",
    "cross_task_roles": "the transferred object is the target in some cross-task scenes, each paired "
                        "(family) with a scene where it is present in another role",
    "relational_families": "Relational Placement scenes come in four-instruction families over one pair "
                           "(A dir B, A opposite B, B dir A, B opposite A)",
    "condition_counts": "scene counts per task and condition equal the manifest's",
    "protocol_counts": "the manifest's counts equal the Spa-Bench protocol's",
}


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    scene_id: str | None = None
    task: str | None = None

    def __str__(self) -> str:
        where = self.scene_id or (f"task {self.task}" if self.task else "suite")
        return f"{where}: [{self.rule}] {self.message}"


class _Collector:
    def __init__(self) -> None:
        self.items: list[Violation] = []

    def scene(self, scene: SceneSpec, rule: str, message: str) -> None:
        self.items.append(Violation(rule=rule, message=message, scene_id=scene.scene_id, task=scene.task))

    def task(self, task: str | None, rule: str, message: str) -> None:
        self.items.append(Violation(rule=rule, message=message, task=task))


def _fmt(ids) -> str:
    return "{" + ", ".join(sorted(ids)) + "}" if ids else "{}"


# -- task-level rules -------------------------------------------------------------------------------


def _check_matrix(suite: Suite, out: _Collector) -> None:
    direct_targets = {t for s in suite.scenes.values() if s.instructions.direct for t in s.targets}
    for name, task in suite.tasks.items():
        observed = task.observed
        for cell in task.withheld_cells:
            others = [c.key for c in observed if c.concept == cell.concept and c.argument != cell.argument]
            if not others:
                out.task(name, "withheld_concept_observed",
                         f"withheld cell {cell.key}: concept {cell.concept!r} has no observed cell with another "
                         f"argument (observed: {', '.join(c.key for c in observed) or 'none'})")
            members = task.arguments[cell.argument].objects
            if members and not direct_targets.intersection(members):
                out.task(name, "withheld_object_direct",
                         f"withheld cell {cell.key}: none of {_fmt(members)} is the target of a direct instruction")


def expected_scene_counts(task: str) -> dict[str, int]:
    trials = CONDITION_COUNTS[task]
    scene_counts = {c: n for c, n in trials.items() if c in ("id", "ood", "cross_task", "novel_object",
                                                               "no_intervention", "no_movement",
                                                               "movement_required")}
    if task in DIRECT_VARIANT_TASKS:
        scene_counts["direct"] = trials.get("direct", 0)
    scene_counts["matched"] = trials.get("direct", 0)
    scene_counts["paraphrase"] = max(trials.get("paraphrase_ood", 0), trials.get("paraphrase_direct", 0))
    return scene_counts


def _check_counts(suite: Suite, out: _Collector) -> None:
    manifest = suite.manifest
    if manifest is None:
        return
    for task in manifest.tasks:
        declared = {k: v for k, v in manifest.counts.get(task, {}).items() if v}
        if manifest.protocol == "spa-bench":
            expected = expected_scene_counts(task)
            if declared != expected:
                out.task(task, "protocol_counts",
                         f"manifest counts {dict(sorted(declared.items()))} differ from the protocol's "
                         f"{dict(sorted(expected.items()))}")
        scenes = [s for s in suite.scenes.values() if s.task == task]
        actual = Counter(s.condition for s in scenes)
        actual["matched"] = sum(1 for s in scenes if s.condition == "ood" and s.matched_group)
        actual["paraphrase"] = sum(1 for s in scenes if s.condition == "ood" and s.matched_group and s.paraphrase)
        for key in sorted(set(declared) | {k for k, v in actual.items() if v}):
            if actual.get(key, 0) != declared.get(key, 0):
                out.task(task, "condition_counts",
                         f"{key}: {actual.get(key, 0)} scenes, the manifest says {declared.get(key, 0)}")


def _check_matched_groups(suite: Suite, out: _Collector) -> None:
    groups: dict[str, dict[str, list[SceneSpec]]] = {}
    for scene in sorted(suite.scenes.values(), key=lambda s: s.scene_id):
        if scene.matched_group:
            groups.setdefault(scene.matched_group, {}).setdefault(scene.condition, []).append(scene)
            if scene.condition not in ("ood", "direct"):
                out.scene(scene, "matched_group", f"matched_group {scene.matched_group!r} on a "
                                                  f"{scene.condition} scene (only OOD scenes and their direct "
                                                  f"variants are matched)")
        elif scene.instructions.direct:
            out.scene(scene, "matched_group", "a direct instruction on a scene without matched_group")
        elif scene.condition == "direct":
            out.scene(scene, "direct_variant", "a direct variant scene without matched_group")
    for group, members in groups.items():
        ood, variants = members.get("ood", []), members.get("direct", [])
        for extra in ood[1:] + variants[1:]:
            first = (ood if extra.condition == "ood" else variants)[0]
            out.scene(extra, "matched_group", f"matched_group {group!r} is also used by {first.scene_id}")
        if not ood:
            for v in variants:
                out.scene(v, "direct_variant", f"matched_group {group!r} has no OOD scene")
            continue
        scene = ood[0]
        carrier = variants[0] if variants else scene   # the scene the direct trials play on
        ins, direct_ins = scene.instructions, carrier.instructions
        if not direct_ins.direct:
            out.scene(carrier, "matched_group", "a matched scene needs a direct instruction"
                      + (" (on its direct variant)" if variants else ""))
        if variants and ins.direct:
            out.scene(scene, "direct_variant", f"the direct instruction belongs on the direct variant "
                                               f"{variants[0].scene_id}, not on the OOD scene")
        for s_ in (scene, *variants):
            if s_.paraphrase != scene.paraphrase:
                out.scene(s_, "paraphrase_keeps_target", f"paraphrase flag differs from {scene.scene_id}")
        if scene.paraphrase and not (ins.paraphrase_spatial and direct_ins.paraphrase_direct):
            out.scene(scene, "paraphrase_keeps_target",
                      "paraphrase: true needs paraphrase_spatial (OOD scene) and paraphrase_direct "
                      "(the scene the direct trials play on)")
    for scene in suite.scenes.values():
        ins = scene.instructions
        has_para = ins.paraphrase_spatial is not None or ins.paraphrase_direct is not None
        if scene.paraphrase and not scene.matched_group:
            out.scene(scene, "matched_group", "paraphrase: true on a scene without matched_group")
        if has_para and not scene.paraphrase:
            out.scene(scene, "paraphrase_keeps_target", "paraphrase instructions on a scene without paraphrase: true")


def _check_direct_variants(suite: Suite, out: _Collector) -> None:
    """Object State: every matched OOD scene has one declared variant with the non-target twin removed."""
    by_group = {}
    for s_ in suite.scenes.values():
        if s_.condition == "direct" and s_.matched_group:
            by_group[s_.matched_group] = s_
    for name in suite.tasks:
        if name not in DIRECT_VARIANT_TASKS:
            continue
        task = suite.tasks[name]
        for ood in suite.scenes_for(name, "ood"):
            if not ood.matched_group:
                continue
            variant = by_group.get(ood.matched_group)
            if variant is None:
                out.scene(ood, "direct_variant", f"matched_group {ood.matched_group!r} has no direct variant scene")
                continue
            members = set(task.arguments[ood.cell.argument].objects)
            expected = [p for p in ood.objects if p.object_id not in members - set(ood.targets)]
            problems = []
            if variant.partner != ood.scene_id:
                problems.append(f"partner {variant.partner!r}, expected {ood.scene_id!r}")
            if sorted(variant.objects, key=lambda p: p.object_id) != sorted(expected, key=lambda p: p.object_id):
                problems.append(f"objects {sorted(p.object_id for p in variant.objects)} differ from the OOD "
                                f"scene minus its non-target twin {sorted(p.object_id for p in expected)} "
                                f"(positions and states must match too)")
            if variant.cell != ood.cell or variant.targets != ood.targets:
                problems.append(f"cell/targets {variant.cell.key} {list(variant.targets)} differ from "
                                f"{ood.cell.key} {list(ood.targets)}")
            for p_ in problems:
                out.scene(variant, "direct_variant", p_)


def _check_state_twins(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    if scene.task != "object_state" or scene.condition not in ("id", "ood"):
        return
    members = task.arguments[scene.cell.argument].objects
    present = {o.object_id: o for o in scene.objects if o.object_id in members and o.location == "table"}
    if len(present) != len(members) or len(members) != 2:
        out.scene(scene, "state_twins", f"holds {sorted(present)} of the {scene.cell.argument} twins "
                                        f"{list(members)}; both must be on the table")
        return
    a, b = present.values()
    concept = scene.cell.concept
    queried, other = ("lid", "pose") if concept in R.LID_CONCEPTS else ("pose", "lid")
    qa, qb = getattr(a.state, queried), getattr(b.state, queried)
    oa, ob = getattr(a.state, other), getattr(b.state, other)
    if qa == qb or oa != ob:
        out.scene(scene, "state_twins",
                  f"twins {a.object_id} {queried}={qa} {other}={oa} and {b.object_id} {queried}={qb} {other}={ob}: "
                  f"they must differ on {queried} (the queried axis of {concept!r}) and agree on {other}")


def _check_training_support(scene: SceneSpec, out: _Collector) -> None:
    if scene.task == "counting" and scene.condition == "id":
        start, goal = R.start_count(scene), R.goal_count(scene.cell.concept)
        if goal is not None and abs(goal - start) != 1:
            out.scene(scene, "training_support", f"start {start} -> goal {goal} moves {abs(goal - start)} objects; "
                                                 f"training demonstrations move exactly one")
    if scene.task == "ordinal_position" and scene.condition in ("id", "ood"):
        position = R.ordinal_position(scene.cell.concept)
        if position is not None and f"position_{position[0]}_of_{position[1]}" in ABSENT_ORDINAL_CELLS:
            out.scene(scene, "training_support", f"cell {scene.cell.key}: position {position[0]} of {position[1]} "
                                                 f"is absent from training (no ID or OOD scene may use it)")


def _check_cross_task_roles(suite: Suite, out: _Collector) -> None:
    for name, task in suite.tasks.items():
        scenes = suite.scenes_for(name, "cross_task")
        if not scenes:
            continue
        foreign = set(task.cross_task_objects)
        families: dict[str, list[SceneSpec]] = {}
        for s_ in scenes:
            if s_.family:
                families.setdefault(s_.family, []).append(s_)
        target_role = [s_ for s_ in scenes if set(s_.targets) & foreign]
        if not target_role:
            out.task(name, "cross_task_roles", f"no cross_task scene has a transferred object "
                                               f"({', '.join(sorted(foreign))}) as its target")
        for s_ in target_role:
            moved = sorted(set(s_.targets) & foreign)
            partners = [p for p in families.get(s_.family or "", []) if p.scene_id != s_.scene_id
                        and set(moved) <= {o.object_id for o in p.objects} and not set(moved) & set(p.targets)]
            if not partners:
                out.scene(s_, "cross_task_roles", f"transferred target {moved} has no partner scene in family "
                                                  f"{s_.family!r} where it is present but not the target")


def _check_relational_families(suite: Suite, out: _Collector) -> None:
    for name in suite.tasks:
        if name != "relational_placement":
            continue
        by_condition: dict[str, dict[str, list[SceneSpec]]] = {}
        for s_ in sorted(suite.scenes.values(), key=lambda x: x.scene_id):
            if s_.task != name:
                continue
            if not s_.family:
                out.scene(s_, "relational_families", "no family: relational scenes come in four-instruction families")
                continue
            by_condition.setdefault(s_.condition, {}).setdefault(s_.family, []).append(s_)
        for condition, families in by_condition.items():
            short = [f for f, members in families.items() if len(members) != FAMILY_SIZE]
            for f in short[1:]:
                out.scene(families[f][0], "relational_families",
                          f"family {f!r} has {len(families[f])} scenes; only one {condition} family may be short of "
                          f"{FAMILY_SIZE} (also short: {short[0]})")
            for f, members in families.items():
                pairs = {tuple(sorted(m.cell.argument.split("/"))) for m in members}
                axes = {tuple(sorted((m.cell.concept, _OPPOSITE[m.cell.concept]))) for m in members}
                keys = [m.cell.key for m in members]
                if len(pairs) != 1 or len(axes) != 1 or len(set(keys)) != len(keys) or len(members) > FAMILY_SIZE:
                    out.scene(members[0], "relational_families",
                              f"family {f!r} cells {keys}: a family is one pair in both roles along one "
                              f"direction axis, each instruction once")


_OPPOSITE = {"left": "right", "right": "left", "front": "behind", "behind": "front"}


# -- scene-level rules ------------------------------------------------------------------------------


def _check_cell(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    status = task.cell_status(scene.cell)
    if scene.withheld != (status == "withheld"):
        out.scene(scene, "cell_condition", f"withheld: {str(scene.withheld).lower()} but cell {scene.cell.key} "
                                           f"is {status}")
    condition = scene.condition
    wanted = {"ood": ("withheld",), "direct": ("withheld",), "no_intervention": ("observed", "control"),
              "novel_object": ("control",), "cross_task": ("observed", "control")}.get(condition, ("observed",))
    if status not in wanted:
        out.scene(scene, "cell_condition",
                  f"a {condition} scene must test a {' or '.join(wanted)} cell; {scene.cell.key} is {status}")
    if condition == "novel_object":
        members = task.arguments[scene.cell.argument].objects
        if not members or not all(suite.objects[m].novel for m in members):
            out.scene(scene, "cell_condition",
                      f"a novel_object scene's argument must be a novel object, {scene.cell.argument} is not")


def _check_targets(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    resolved = R.resolve_targets(scene, suite)
    stored = set(scene.targets)
    if scene.task == "counting":
        _check_counting(scene, resolved, out)
        return
    if scene.condition == "no_intervention":
        if resolved or stored:
            out.scene(scene, "no_valid_target",
                      f"the instruction should have no valid target; resolved {_fmt(resolved)}, "
                      f"targets {_fmt(stored)}")
        return
    if len(resolved) != 1 or resolved != stored:
        out.scene(scene, "unique_target",
                  f"instruction {scene.instructions.spatial!r} resolves to {_fmt(resolved)}; "
                  f"targets {_fmt(stored)} (exactly one expected)")
        return
    members = task.arguments[scene.cell.argument].objects
    (target,) = resolved
    if members and target not in members:
        out.scene(scene, "target_matches_cell",
                  f"resolved target {target} is not a {scene.cell.argument} (allowed: {', '.join(members)})")


def _check_counting(scene: SceneSpec, movable: set[str], out: _Collector) -> None:
    goal = R.goal_count(scene.cell.concept)
    if goal is None:
        out.scene(scene, "counting_change", f"concept {scene.cell.concept!r} names no count")
        return
    start = R.start_count(scene)
    targets = set(scene.targets)
    if scene.condition == "no_intervention":
        if start != goal:
            out.scene(scene, "goal_already_holds", f"{start} objects start in the bowl, the instruction asks for {goal}")
        if targets:
            out.scene(scene, "no_valid_target", f"targets {_fmt(targets)} on a scene whose count already holds")
        return
    needed = abs(goal - start)
    direction = "addition" if goal > start else "removal" if goal < start else "none"
    if direction != scene.cell.argument:
        out.scene(scene, "counting_change",
                  f"start {start} -> goal {goal} is {direction}, the cell says {scene.cell.argument}")
    if scene.condition == "ood" and start != OOD_COUNTING_START:
        out.scene(scene, "counting_change", f"withheld counting cells start from {OOD_COUNTING_START} objects in "
                                            f"the bowl, this scene from {start}")
    if len(targets) != needed or not targets <= movable:
        out.scene(scene, "counting_change",
                  f"targets {_fmt(targets)} must be {needed} of the movable objects {_fmt(movable)}")
    if direction == "addition" and len(movable) < needed:
        out.scene(scene, "counting_change", f"only {len(movable)} objects on the table, {needed} must go in")


def _check_goal(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    goal = scene.goal
    problems = []
    no_motion = scene.condition in NO_MOTION_CONDITIONS
    if no_motion and goal.kind != "no_motion":
        problems.append(f"kind {goal.kind!r}, expected 'no_motion' on a {scene.condition} scene")
    if scene.task == "counting":
        count = R.goal_count(scene.cell.concept)
        if not no_motion and goal.kind != "count_in_bowl":
            problems.append(f"kind {goal.kind!r}, expected 'count_in_bowl'")
        if goal.count != count:
            problems.append(f"count {goal.count}, the cell asks for {count}")
    elif scene.task == "relational_placement":
        relation = R.requested_relation(scene, suite)
        if not no_motion and goal.kind != "relation":
            problems.append(f"kind {goal.kind!r}, expected 'relation'")
        if relation is not None:
            target, reference, direction = relation
            got = (goal.objects, goal.reference, goal.direction)
            if got != ((target,), reference, direction):
                problems.append(f"objects/reference/direction {got}, the cell asks for {((target,), reference, direction)}")
    elif not no_motion:
        if goal.kind != "in_bowl":
            problems.append(f"kind {goal.kind!r}, expected 'in_bowl'")
        if tuple(goal.objects) != tuple(scene.targets):
            problems.append(f"objects {list(goal.objects)} differ from targets {list(scene.targets)}")
    for p in problems:
        out.scene(scene, "goal_matches", p)

    if scene.task == "relational_placement":
        _check_relation_state(scene, suite, out)


def _relation_margin(scene: SceneSpec, suite: Suite) -> tuple[float, float, float | None] | None:
    """(centre distance, angle off the direction, edge gap) of the requested relation as set up."""
    relation = R.requested_relation(scene, suite)
    if relation is None:
        return None
    by_id = {o.object_id: o for o in scene.objects}
    if relation[0] not in by_id or relation[1] not in by_id:
        return None
    t, r = by_id[relation[0]], by_id[relation[1]]
    dist, angle = relation_offset((t.x_cm, t.y_cm), (r.x_cm, r.y_cm), relation[2])
    specs = suite.objects
    gap = (edge_gap_cm((t.x_cm, t.y_cm), (r.x_cm, r.y_cm), specs[t.object_id], specs[r.object_id])
           if t.object_id in specs and r.object_id in specs else None)
    return dist, angle, gap


def _check_relation_state(scene: SceneSpec, suite: Suite, out: _Collector) -> None:
    """No-movement scenes satisfy the suite's relation rule with room to spare, every other
    Relational scene clearly fails it (suite.relation_rule: the configured bound)."""
    offset = _relation_margin(scene, suite)
    if offset is None:
        return
    dist, angle, gap = offset
    rule = suite.relation_rule
    gap_text = f", edge gap {gap:.1f} cm" if gap is not None else ""
    what = f"target {dist:.1f} cm from the reference{gap_text} at {angle:.0f} deg off the direction"
    margins = f"{rule.bound} bound, margins {RELATION_MARGIN_CM:g} cm / {RELATION_MARGIN_DEG:g} deg"
    regenerate = " (scenes are placed for one bound: `spabench suite generate` rebuilds them for this one)"
    if scene.condition == "no_movement":
        if not rule.clearly_holds(dist, angle, gap, RELATION_MARGIN_CM, RELATION_MARGIN_DEG):
            out.scene(scene, "goal_already_holds",
                      f"{what}; the relation must clearly hold under the suite's rule ({margins}){regenerate}")
    elif not rule.clearly_fails(dist, angle, gap, RELATION_MARGIN_CM, RELATION_MARGIN_DEG):
        out.scene(scene, "goal_not_met",
                  f"{what}; the relation must clearly not hold yet under the suite's rule ({margins}){regenerate}")


def _check_references(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    refs = list(scene.references)
    argument = task.arguments[scene.cell.argument]
    if scene.task == "relational_placement":
        expected = list(argument.references)
        if refs != expected:
            out.scene(scene, "references", f"references {refs}, the cell {scene.cell.key} needs {expected}")
    elif scene.task == "referential_description":
        need = 2 if scene.cell.concept == "between" else 1
        if len(refs) != need:
            out.scene(scene, "references", f"{scene.cell.concept} needs {need} reference(s), got {refs}")
        clash = [r for r in refs if r in argument.objects]
        if clash:
            out.scene(scene, "references", f"reference(s) {clash} are themselves {scene.cell.argument}s")
    elif refs:
        out.scene(scene, "references", f"{scene.task} instructions have no references, got {refs}")
    names = Counter(suite.objects[o.object_id].display_name for o in scene.objects)
    for r in refs:
        name = suite.objects[r].display_name
        if names[name] > 1:
            out.scene(scene, "references", f"reference {r} is named {name!r}, which {names[name]} objects share")


def _check_sizes(scene: SceneSpec, suite: Suite, out: _Collector) -> None:
    volumes = {o.object_id: R.size_metric(suite.objects[o.object_id]) for o in R.table_objects(scene)}
    for largest, label in ((False, "smallest"), (True, "largest")):
        tied = R.extreme(volumes, largest=largest, ratio=R.SIZE_RATIO_MARGIN)
        if len(tied) != 1:
            sizes = ", ".join(f"{oid}={volumes[oid]:.0f}" for oid in sorted(tied))
            out.scene(scene, "relative_size_extremes",
                      f"no unique {label} object (within {R.SIZE_RATIO_MARGIN}x: {sizes} cm^3)")


def _check_wording(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    ins = scene.instructions
    allowed = renderings(task, "spatial", scene, suite.objects)
    if ins.spatial not in allowed:
        out.scene(scene, "instruction_matches_cell",
                  f"spatial instruction {ins.spatial!r} does not render cell {scene.cell.key} "
                  f"(expected one of {allowed})")
    if ins.paraphrase_spatial is not None:
        allowed_p = renderings(task, "paraphrase_spatial", scene, suite.objects)
        if ins.paraphrase_spatial not in allowed_p or ins.paraphrase_spatial == ins.spatial:
            out.scene(scene, "paraphrase_keeps_target",
                      f"paraphrase_spatial {ins.paraphrase_spatial!r} must paraphrase cell {scene.cell.key} with the "
                      f"same references (expected one of {allowed_p}) and differ from the original")
    for kind in ("direct", "paraphrase_direct"):
        text = getattr(ins, kind)
        if text is None:
            continue
        rule = "direct_instruction" if kind == "direct" else "paraphrase_keeps_target"
        if not scene.targets:
            out.scene(scene, rule, f"{kind} instruction on a scene without targets")
            continue
        name = suite.objects[scene.targets[0]].display_name
        if name.lower() not in text.lower():
            out.scene(scene, rule, f"{kind} {text!r} does not name the target's display name {name!r}")
        spatial = spatial_words_in(text)
        if spatial:
            out.scene(scene, "direct_instruction", f"{kind} {text!r} contains spatial concept word(s) {spatial}")
        sharing = [o.object_id for o in scene.objects if suite.objects[o.object_id].display_name == name]
        if len(sharing) > 1:
            out.scene(scene, "direct_instruction",
                      f"{kind} {text!r} names {name!r}, which {len(sharing)} objects share: {sharing}")
    if ins.paraphrase_direct is not None and ins.paraphrase_direct == ins.direct:
        out.scene(scene, "paraphrase_keeps_target", "paraphrase_direct repeats the direct instruction")


def _check_objects(scene: SceneSpec, task: TaskSpec, suite: Suite, out: _Collector) -> None:
    ids = [o.object_id for o in scene.objects]
    novel = [oid for oid in ids if suite.objects[oid].novel]
    if scene.condition == "novel_object":
        argument = task.arguments[scene.cell.argument]
        if set(novel) != set(argument.objects) or set(scene.targets) != set(novel):
            out.scene(scene, "task_objects", f"a novel_object scene holds its novel object as the target; "
                                             f"novel {novel}, targets {list(scene.targets)}")
        others = [oid for oid in ids if oid not in novel and oid not in task.pool]
        if others:
            out.scene(scene, "task_objects", f"objects {others} are not in {task.name}'s objects")
    elif novel:
        out.scene(scene, "task_objects", f"novel object(s) {novel} appear outside the novel_object condition")
    if scene.condition in OWN_POOL_CONDITIONS:
        foreign = [oid for oid in ids if oid not in task.pool]
        if foreign:
            out.scene(scene, "task_objects",
                      f"objects {foreign} are not among {task.name}'s objects ({', '.join(task.pool)})")
    elif scene.condition == "cross_task":
        stray = [oid for oid in ids if oid not in task.pool and oid not in task.cross_task_objects]
        if stray:
            out.scene(scene, "task_objects",
                      f"objects {stray} are neither {task.name}'s own nor its transferred objects "
                      f"({', '.join(task.cross_task_objects)})")
        if not any(oid in task.cross_task_objects for oid in ids):
            out.scene(scene, "task_objects", "a cross_task scene needs objects from other tasks")
    if len(ids) > MAX_CANDIDATES:
        out.scene(scene, "max_candidates", f"{len(ids)} objects, at most {MAX_CANDIDATES}")


def _check_layout(scene: SceneSpec, suite: Suite, out: _Collector) -> None:
    g = suite.geometry
    (x_lo, x_hi), (y_lo, y_hi) = g.workspace_x_cm, g.workspace_y_cm
    bowl = g.bowl_xy_cm
    prints = {}
    for o in scene.objects:
        if o.location == "bowl":
            if distance((o.x_cm, o.y_cm), bowl) > g.bowl_inner_radius_cm:
                out.scene(scene, "workspace", f"{o.object_id} is in the bowl but at ({o.x_cm}, {o.y_cm}), more than "
                                              f"{g.bowl_inner_radius_cm} cm from the bowl centre {tuple(bowl)}")
            continue
        if not (x_lo <= o.x_cm <= x_hi and y_lo <= o.y_cm <= y_hi):
            out.scene(scene, "workspace", f"{o.object_id} at ({o.x_cm}, {o.y_cm}) is outside the workspace "
                                          f"x {x_lo}..{x_hi}, y {y_lo}..{y_hi}")
        poly = placed_footprint(suite.objects[o.object_id], o)
        prints[o.object_id] = poly
        clearance = point_footprint_distance(bowl, poly) - g.bowl_outer_radius_cm
        if clearance < BOWL_CLEARANCE_CM:
            out.scene(scene, "bowl_clearance", f"{o.object_id} is {clearance:.1f} cm from the bowl rim "
                                               f"(at least {BOWL_CLEARANCE_CM} cm)")
    for (a, pa), (b, pb) in combinations(prints.items(), 2):
        if not footprints_apart(pa, pb, MIN_GAP_CM):
            gap = footprint_gap(pa, pb)
            out.scene(scene, "no_overlap", f"{a} and {b} are {gap:.1f} cm apart (at least {MIN_GAP_CM} cm)")


def _check_ordinal_row(scene: SceneSpec, suite: Suite, out: _Collector) -> None:
    row = R.ordinal_row(scene, suite)
    position = R.ordinal_position(scene.cell.concept)
    if position is not None and len(row) != position[1]:
        out.scene(scene, "ordinal_row", f"cell {scene.cell.key} needs a row of {position[1]}, the scene has {len(row)}")
    if not row:
        return
    xs = sorted(o.x_cm for o in row)
    median = xs[len(xs) // 2]
    for o in row:
        if abs(o.x_cm - median) > ROW_ALIGN_CM:
            out.scene(scene, "ordinal_row", f"{o.object_id} at x={o.x_cm} is off the row (median x {median}, "
                                            f"+-{ROW_ALIGN_CM} cm)")
    intervals = [y_interval(placed_footprint(suite.objects[o.object_id], o)) for o in row]
    for i in range(len(row) - 1):
        gap = intervals[i][0] - intervals[i + 1][1]
        if gap < R.ORDINAL_GAP_CM:
            out.scene(scene, "ordinal_row", f"{row[i].object_id} and {row[i + 1].object_id} leave a {gap:.1f} cm gap "
                                            f"across y (at least {R.ORDINAL_GAP_CM} cm)")


def _check_goal_region(scene: SceneSpec, suite: Suite, out: _Collector) -> None:
    relation = R.requested_relation(scene, suite)
    if relation is None:
        return
    target, reference, direction = relation
    by_id = {o.object_id: o for o in scene.objects}
    if reference not in by_id:
        return
    ref = by_id[reference]
    ux, uy = DIRECTION_VECTORS[direction]
    spot = (ref.x_cm + GOAL_REGION_OFFSET_CM * ux, ref.y_cm + GOAL_REGION_OFFSET_CM * uy)
    g = suite.geometry
    (x_lo, x_hi), (y_lo, y_hi) = g.workspace_x_cm, g.workspace_y_cm
    s = GOAL_REGION_SLACK_CM
    if not (x_lo - s <= spot[0] <= x_hi + s and y_lo - s <= spot[1] <= y_hi + s):
        out.scene(scene, "goal_region_free", f"the spot {direction} of {reference} ({spot[0]:.1f}, {spot[1]:.1f}) "
                                             f"lies outside the workspace (+{s} cm)")
    if distance(spot, g.bowl_xy_cm) - g.bowl_outer_radius_cm < GOAL_REGION_CLEAR_CM:
        out.scene(scene, "goal_region_free", f"the spot {direction} of {reference} is against the bowl")
    for o in scene.objects:
        if o.object_id in (target, reference) or o.location != "table":
            continue
        d = point_footprint_distance(spot, placed_footprint(suite.objects[o.object_id], o))
        if d < GOAL_REGION_CLEAR_CM:
            out.scene(scene, "goal_region_free", f"{o.object_id} blocks the spot {direction} of {reference} "
                                                 f"({d:.1f} cm, at least {GOAL_REGION_CLEAR_CM} cm)")


def _check_movement_pairs(suite: Suite, out: _Collector) -> None:
    for name in suite.tasks:
        for scene in suite.scenes_for(name, "movement_required"):
            partner = suite.scenes.get(scene.partner or "")
            if partner is None or partner.condition != "no_movement":
                out.scene(scene, "movement_pairs", f"partner {scene.partner!r} is not a no_movement scene "
                                                   f"(each movement-required scene names its no-movement partner)")
                continue
            if sorted(o.object_id for o in scene.objects) != sorted(o.object_id for o in partner.objects) \
                    or scene.cell != partner.cell or scene.instructions.spatial != partner.instructions.spatial:
                out.scene(scene, "movement_pairs",
                          f"objects/cell/instruction differ from {partner.scene_id}: "
                          f"{sorted(o.object_id for o in scene.objects)} {scene.cell.key} vs "
                          f"{sorted(o.object_id for o in partner.objects)} {partner.cell.key}")


def validate_suite(suite: Suite) -> list[Violation]:
    """Every design-contract violation of the suite (empty when the suite is sound)."""
    out = _Collector()
    _check_matrix(suite, out)
    _check_counts(suite, out)
    _check_matched_groups(suite, out)
    _check_movement_pairs(suite, out)
    _check_direct_variants(suite, out)
    _check_cross_task_roles(suite, out)
    _check_relational_families(suite, out)
    for scene in sorted(suite.scenes.values(), key=lambda s: s.scene_id):
        task = suite.tasks.get(scene.task)
        if task is None:
            out.scene(scene, "cell_condition", f"task {scene.task!r} is not in the manifest")
            continue
        _check_cell(scene, task, suite, out)
        _check_objects(scene, task, suite, out)
        _check_layout(scene, suite, out)
        _check_targets(scene, task, suite, out)
        _check_goal(scene, task, suite, out)
        _check_references(scene, task, suite, out)
        _check_wording(scene, task, suite, out)
        _check_state_twins(scene, task, suite, out)
        _check_training_support(scene, out)
        if scene.task == "relative_size":
            _check_sizes(scene, suite, out)
        if scene.task == "ordinal_position":
            _check_ordinal_row(scene, suite, out)
        if scene.task == "relational_placement" and scene.condition in ("id", "ood", "cross_task", "movement_required"):
            _check_goal_region(scene, suite, out)
    return out.items


def check_suite(suite: Suite) -> None:
    """Raise one DataError listing every violation; return quietly for a sound suite."""
    violations = validate_suite(suite)
    if violations:
        lines = "\n".join(f"  - {v}" for v in violations)
        raise DataError(suite.root or "tasks", f"{len(violations)} design-contract violation(s):\n{lines}")


__all__ = ["Violation", "RULES", "validate_suite", "check_suite"]
