"""Each design contract catches a deliberately broken copy of the committed suite.

Every case copies tasks/ to tmp_path, breaks one thing in the YAML, loads the copy and asserts that
validate_suite names the broken scene (or task) under the expected rule.
"""

from __future__ import annotations

import pytest

from spabench.errors import DataError
from spabench.suite import RULES, check_suite, validate_suite
from spabench.suite.geometry import DIRECTION_VECTORS


def _first(suite, task, condition, pred=lambda s: True):
    return next(s for s in suite.scenes_for(task, condition) if pred(s))


def _obj(scene_map, object_id):
    return next(o for o in scene_map["objects"] if o["object_id"] == object_id)


# Each breaker gets (copy, committed suite) and returns the scene id (or "task:<name>") it broke.

def break_withheld_concept(copy, suite):
    def change(m):
        moved = [c for c in m["observed"] if c.startswith("upside_down|")]
        m["observed"] = [c for c in m["observed"] if c not in moved]
        m["controls"] = m["controls"] + moved
    copy.edit("object_state/matrix.yaml", change)
    return "task:object_state"


def break_withheld_object_direct(copy, suite):
    def change(scenes):
        for s in scenes:
            if s["cell"] == "smallest|juggling_ball":
                s.pop("matched_group", None)
                s.pop("paraphrase", None)
                s["instructions"] = {"spatial": s["instructions"]["spatial"]}
    copy.edit("relative_size/scenes/ood.yaml", change)
    return "task:relative_size"


def break_cell_condition(copy, suite):
    scene = _first(suite, "object_state", "ood")
    copy.edit_scene("object_state", "ood", scene.scene_id, lambda s: s.update(cell="open|white_cup"))
    return scene.scene_id


def break_unique_target(copy, suite):
    scene = _first(suite, "object_state", "id", lambda s: s.cell.concept == "closed")
    copy.edit_scene("object_state", "id", scene.scene_id,
                    lambda s: _obj(s, scene.targets[0])["state"].update(lid="open"))
    return scene.scene_id


def break_no_valid_target(copy, suite):
    scene = _first(suite, "object_state", "no_intervention", lambda s: s.cell.concept in ("upright", "upside_down"))
    member = next(o.object_id for o in scene.objects
                  if o.object_id in suite.tasks["object_state"].arguments[scene.cell.argument].objects)
    copy.edit_scene("object_state", "no_intervention", scene.scene_id,
                    lambda s: _obj(s, member)["state"].update(pose=scene.cell.concept))
    return scene.scene_id


def break_target_matches_cell(copy, suite):
    scene = _first(suite, "relative_size", "id", lambda s: s.cell.key == "smallest|red_pencil_sharpener")
    copy.edit_scene("relative_size", "id", scene.scene_id, lambda s: s.update(cell="smallest|green_block"))
    return scene.scene_id


def break_counting_change(copy, suite):
    scene = _first(suite, "counting", "ood")
    in_bowl = next(o.object_id for o in scene.objects if o.location == "bowl")
    copy.edit_scene("counting", "ood", scene.scene_id,
                    lambda s: _obj(s, in_bowl).update(location="table", x_cm=12, y_cm=17.5))
    return scene.scene_id


def break_goal_already_holds(copy, suite):
    scene = _first(suite, "relational_placement", "no_movement")
    target, ref = scene.targets[0], scene.references[0]
    r = next(o for o in scene.objects if o.object_id == ref)
    t = next(o for o in scene.objects if o.object_id == target)
    copy.edit_scene("relational_placement", "no_movement", scene.scene_id,
                    lambda s: _obj(s, target).update(x_cm=2 * r.x_cm - t.x_cm, y_cm=2 * r.y_cm - t.y_cm))
    return scene.scene_id


def break_goal_not_met(copy, suite):
    scene = _first(suite, "relational_placement", "id")
    target, ref = scene.targets[0], scene.references[0]
    r = next(o for o in scene.objects if o.object_id == ref)
    ux, uy = DIRECTION_VECTORS[scene.cell.concept]
    copy.edit_scene("relational_placement", "id", scene.scene_id,
                    lambda s: _obj(s, target).update(x_cm=r.x_cm + 5 * ux, y_cm=r.y_cm + 5 * uy))
    return scene.scene_id


def break_goal_matches(copy, suite):
    scene = _first(suite, "object_state", "id")
    other = next(o.object_id for o in scene.objects if o.object_id != scene.targets[0])
    copy.edit_scene("object_state", "id", scene.scene_id, lambda s: s["goal"].update(objects=[other]))
    return scene.scene_id


def break_references(copy, suite):
    scene = _first(suite, "referential_description", "id", lambda s: s.cell.concept != "between")
    member = next(o.object_id for o in scene.objects if o.object_id not in scene.references)
    copy.edit_scene("referential_description", "id", scene.scene_id,
                    lambda s: s.update(references=s["references"] + [member]))
    return scene.scene_id


def break_relative_size_extremes(copy, suite):
    scene = _first(suite, "relative_size", "id", lambda s: s.cell.key == "smallest|green_block")
    copy.edit_scene("relative_size", "id", scene.scene_id,
                    lambda s: s["objects"].append({"object_id": "yellow_block", "x_cm": 30, "y_cm": 18}))
    return scene.scene_id


def break_instruction_matches_cell(copy, suite):
    scene = _first(suite, "object_state", "id", lambda s: s.cell.argument != "brown_cup")
    copy.edit_scene("object_state", "id", scene.scene_id,
                    lambda s: s["instructions"].update(spatial="Place the open brown cup in the bowl."))
    return scene.scene_id


def break_direct_instruction(copy, suite):
    scene = _first(suite, "referential_description", "ood", lambda s: s.matched_group is not None)
    name = suite.objects[scene.targets[0]].display_name
    copy.edit_scene("referential_description", "ood", scene.scene_id,
                    lambda s: s["instructions"].update(direct=f"Move the {name} on the left into the bowl."))
    return scene.scene_id


def break_paraphrase_keeps_target(copy, suite):
    scene = _first(suite, "object_state", "ood", lambda s: s.paraphrase and s.cell.argument != "brown_cup")
    copy.edit_scene("object_state", "ood", scene.scene_id,
                    lambda s: s["instructions"].update(
                        paraphrase_spatial=f"Put the brown cup that is {scene.cell.concept} into the bowl."))
    return scene.scene_id


def break_matched_group(copy, suite):
    scene = _first(suite, "counting", "id")
    copy.edit_scene("counting", "id", scene.scene_id, lambda s: s.update(matched_group="counting-m99"))
    return scene.scene_id


def break_task_objects(copy, suite):
    """Measured on main: Counting ID scenes used blocks outside Counting's pool."""
    scene = _first(suite, "counting", "id", lambda s: any(o.object_id == "yellow_block" for o in s.objects))

    def change(s):
        _obj(s, "yellow_block")["object_id"] = "red_block"
        s["targets"] = ["red_block" if t == "yellow_block" else t for t in s["targets"]]
    copy.edit_scene("counting", "id", scene.scene_id, change)
    return scene.scene_id


def break_state_twins(copy, suite):
    """Measured on main: every Object State scene held one instance of the named kind."""
    scene = _first(suite, "object_state", "ood")
    members = suite.tasks["object_state"].arguments[scene.cell.argument].objects
    twin = next(m for m in members if m not in scene.targets)
    copy.edit_scene("object_state", "ood", scene.scene_id,
                    lambda s: s.update(objects=[o for o in s["objects"] if o["object_id"] != twin]))
    return scene.scene_id


def break_direct_variant(copy, suite):
    variant = _first(suite, "object_state", "direct")
    moved = variant.objects[-1].object_id
    copy.edit_scene("object_state", "direct", variant.scene_id,
                    lambda s: _obj(s, moved).update(x_cm=_obj(s, moved)["x_cm"] + 0.5))
    return variant.scene_id


def break_training_support(copy, suite):
    """Measured on main: 12 of 20 Counting ID scenes needed multi-object moves."""
    scene = _first(suite, "counting", "id", lambda s: s.cell.key == "goal_2|addition"
                   and sum(o.location == "bowl" for o in s.objects) == 1)
    in_bowl = next(o.object_id for o in scene.objects if o.location == "bowl")
    copy.edit_scene("counting", "id", scene.scene_id,
                    lambda s: _obj(s, in_bowl).update(location="table", x_cm=12, y_cm=17.5))
    return scene.scene_id


def break_cross_task_roles(copy, suite):
    """Measured on main: cross-task objects were only distractors; here the partner loses the object."""
    scene = _first(suite, "ordinal_position", "cross_task", lambda s: "red_block" in s.targets)
    partner = next(s for s in suite.scenes_for("ordinal_position", "cross_task")
                   if s.family == scene.family and s.scene_id != scene.scene_id)
    copy.edit_scene("ordinal_position", "cross_task", partner.scene_id, lambda s: s.update(family="elsewhere"))
    return scene.scene_id


def break_relational_families(copy, suite):
    scene = _first(suite, "relational_placement", "id")
    other = next(s for s in suite.scenes_for("relational_placement", "id") if s.family != scene.family)
    copy.edit_scene("relational_placement", "id", other.scene_id, lambda s: s.update(family=scene.family))
    return scene.scene_id


def break_max_candidates(copy, suite):
    scene = _first(suite, "object_state", "id", lambda s: len(s.objects) == 5)
    copy.edit_scene("object_state", "id", scene.scene_id,
                    lambda s: s["objects"].append({"object_id": "black_cup", "x_cm": 12, "y_cm": 18,
                                                   "state": {"lid": "open", "pose": "upright"}}))
    return scene.scene_id


def break_workspace(copy, suite):
    scene = _first(suite, "ordinal_position", "id")
    copy.edit_scene("ordinal_position", "id", scene.scene_id, lambda s: s["objects"][0].update(x_cm=45))
    return scene.scene_id


def break_no_overlap(copy, suite):
    scene = _first(suite, "object_state", "id")
    a = scene.objects[0]
    copy.edit_scene("object_state", "id", scene.scene_id,
                    lambda s: s["objects"][1].update(x_cm=a.x_cm + 1, y_cm=a.y_cm))
    return scene.scene_id


def break_bowl_clearance(copy, suite):
    scene = _first(suite, "relative_size", "id")
    bx, by = suite.geometry.bowl_xy_cm
    copy.edit_scene("relative_size", "id", scene.scene_id,
                    lambda s: s["objects"][0].update(x_cm=bx, y_cm=suite.geometry.workspace_y_cm[0]))
    return scene.scene_id


def break_ordinal_row(copy, suite):
    scene = _first(suite, "ordinal_position", "id")
    row_min_x = min(o.x_cm for o in scene.objects)
    oid = next(o.object_id for o in scene.objects if o.x_cm == row_min_x)
    copy.edit_scene("ordinal_position", "id", scene.scene_id, lambda s: _obj(s, oid).update(x_cm=row_min_x - 4.5))
    return scene.scene_id


def break_goal_region_free(copy, suite):
    scene = _first(suite, "relational_placement", "id", lambda s: s.cell.concept == "behind")
    copy.edit_scene("relational_placement", "id", scene.scene_id,
                    lambda s: _obj(s, scene.references[0]).update(x_cm=suite.geometry.workspace_x_cm[1]))
    return scene.scene_id


def break_movement_pairs(copy, suite):
    scene = _first(suite, "relational_placement", "movement_required", lambda s: len(s.objects) >= 3)
    named = set(scene.targets) | set(scene.references)
    copy.edit_scene("relational_placement", "movement_required", scene.scene_id,
                    lambda s: s.update(objects=[o for o in s["objects"] if o["object_id"] in named]))
    return scene.scene_id


def break_movement_partner_field(copy, suite):
    """Measured on main: the pairing lived only in a notes string; now a field the contract reads."""
    scene = _first(suite, "relational_placement", "movement_required")
    copy.edit_scene("relational_placement", "movement_required", scene.scene_id, lambda s: s.pop("partner"))
    return scene.scene_id


def break_condition_counts(copy, suite):
    copy.edit("counting/scenes/id.yaml", lambda scenes: scenes[:-1])
    return "task:counting"


def break_protocol_counts(copy, suite):
    copy.edit("counting/scenes/id.yaml", lambda scenes: scenes[:-1])
    copy.edit("suite.yaml", lambda m: m["counts"]["counting"].update(id=19))
    return "task:counting"


CASES = {
    "state_twins": break_state_twins,
    "direct_variant": break_direct_variant,
    "training_support": break_training_support,
    "cross_task_roles": break_cross_task_roles,
    "relational_families": break_relational_families,
    "withheld_concept_observed": break_withheld_concept,
    "withheld_object_direct": break_withheld_object_direct,
    "cell_condition": break_cell_condition,
    "unique_target": break_unique_target,
    "no_valid_target": break_no_valid_target,
    "target_matches_cell": break_target_matches_cell,
    "counting_change": break_counting_change,
    "goal_already_holds": break_goal_already_holds,
    "goal_not_met": break_goal_not_met,
    "goal_matches": break_goal_matches,
    "references": break_references,
    "relative_size_extremes": break_relative_size_extremes,
    "instruction_matches_cell": break_instruction_matches_cell,
    "direct_instruction": break_direct_instruction,
    "paraphrase_keeps_target": break_paraphrase_keeps_target,
    "matched_group": break_matched_group,
    "task_objects": break_task_objects,
    "max_candidates": break_max_candidates,
    "workspace": break_workspace,
    "no_overlap": break_no_overlap,
    "bowl_clearance": break_bowl_clearance,
    "ordinal_row": break_ordinal_row,
    "goal_region_free": break_goal_region_free,
    "movement_pairs": break_movement_pairs,
    "condition_counts": break_condition_counts,
    "protocol_counts": break_protocol_counts,
}


def test_every_rule_has_a_breaking_case():
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_contract_catches_a_broken_copy(rule, suite, suite_copy):
    where = CASES[rule](suite_copy, suite)
    broken = suite_copy.load()
    violations = validate_suite(broken)
    hits = [v for v in violations if v.rule == rule]
    if where.startswith("task:"):
        hits = [v for v in hits if v.task == where[5:] and v.scene_id is None]
    else:
        hits = [v for v in hits if v.scene_id == where]
    assert hits, f"expected [{rule}] at {where}; got {[str(v) for v in violations][:10]}"
    assert all(v.message for v in hits)
    with pytest.raises(DataError) as err:
        check_suite(broken)
    assert f"[{rule}]" in str(err.value) and str(suite_copy.root) in str(err.value)


# The new rules' errors name the scene, the rule and the values.
@pytest.mark.parametrize("breaker,rule,values", [
    (break_state_twins, "state_twins", ("twins",)),
    (break_direct_variant, "direct_variant", ("positions",)),
    (break_training_support, "training_support", ("start 0 -> goal 2", "moves 2")),
    (break_cross_task_roles, "cross_task_roles", ("red_block",)),
    (break_relational_families, "relational_families", ("cells",)),
    (break_movement_partner_field, "movement_pairs", ("partner None",)),
])
def test_new_rules_name_scene_rule_and_values(breaker, rule, values, suite, suite_copy):
    where = breaker(suite_copy, suite)
    with pytest.raises(DataError) as err:
        check_suite(suite_copy.load())
    lines = [line for line in str(err.value).splitlines() if f"[{rule}]" in line and where in line]
    assert lines, str(err.value)[:2000]
    assert all(any(v in line for line in lines) for v in values), lines
