"""A scan of the committed tasks/ against the authors' scene design (their released materials: each
task's training object pool, the A/B twins, the Counting goals they used; written out below, see the
README's "The suite: what each scene tests"), independent of the contracts code: plain YAML in, facts out.

Measured on main (before the regenerated suite): all 110 Object State ID/OOD/pilot scenes held one
instance of the named kind; Relational ID used pairs outside its pool in 20 of 20, Counting ID/OOD
used blocks and the tape ball in 70 of 70, Referential references were the pink marker or the
highlighter in 52 of 70; 12 of 20 Counting ID scenes needed multi-object moves; 4 of 20 Ordinal ID
scenes used position 2 of 3; cross-task objects were only distractors in three tasks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

TASKS = Path(__file__).resolve().parents[2] / "tasks"

# The authors' verified training inventory per task, spelled as tasks/objects.yaml ids.
POOLS = {
    "relational_placement": {"red_block", "blue_block", "green_pen", "pink_marker"},
    "referential_description": {"crushed_coke_can", "crushed_pepsi_can", "green_pencil_sharpener",
                                "red_pencil_sharpener", "green_pen", "yellow_pen", "airplane_with_propellers",
                                "airplane_without_propellers"},
    "object_state": {"white_cup_a", "white_cup_b", "striped_cup_a", "striped_cup_b", "spice_container_a",
                     "spice_container_b", "brown_cup_a", "brown_cup_b"},
    "ordinal_position": {"airplane_with_propellers", "blue_tape_ball", "green_highlighter", "yellow_pen"},
    "counting": {"green_pencil_sharpener", "airplane_without_propellers", "blue_pen", "yellow_block"},
    "relative_size": {"green_block", "crushed_pepsi_can", "juggling_ball", "red_pencil_sharpener"},
}
TWINS = {"white_cup": ("white_cup_a", "white_cup_b"), "striped_cup": ("striped_cup_a", "striped_cup_b"),
         "brown_cup": ("brown_cup_a", "brown_cup_b"), "spice_container": ("spice_container_a", "spice_container_b")}
OBSERVED_COUNTING = {"goal_0|removal": 1, "goal_1|addition": 0, "goal_2|addition": 1, "goal_2|removal": 3,
                     "goal_3|removal": 4}


def scenes(task: str, condition: str) -> list[dict]:
    path = TASKS / task / "scenes" / f"{condition}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else []


def test_object_state_scenes_hold_both_twins_differing_only_on_the_queried_axis():
    n = 0
    for condition in ("id", "ood"):
        for s in scenes("object_state", condition):
            concept, kind = s["cell"].split("|")
            a, b = (next(o for o in s["objects"] if o["object_id"] == t) for t in TWINS[kind])
            queried, other = ("lid", "pose") if concept in ("open", "closed") else ("pose", "lid")
            assert a["state"][queried] != b["state"][queried], s["scene_id"]
            assert a["state"][other] == b["state"][other], s["scene_id"]
            assert s["targets"][0] in TWINS[kind]
            n += 1
    assert n == 70


def test_direct_controls_run_on_the_ood_scene_without_the_other_twin():
    ood = {s["scene_id"]: s for s in scenes("object_state", "ood")}
    variants = scenes("object_state", "direct")
    assert len(variants) == 20
    for v in variants:
        original = ood[v["partner"]]
        assert v["matched_group"] == original["matched_group"]
        twin = next(t for t in TWINS[v["cell"].split("|")[1]] if t not in v["targets"])
        assert v["objects"] == [o for o in original["objects"] if o["object_id"] != twin]
        assert v["instructions"]["direct"].startswith("Move a ")  # category only ("Move a white cup ...")


def test_only_the_tasks_own_pool_outside_cross_task_scenes():
    for task, pool in POOLS.items():
        for path in (TASKS / task / "scenes").glob("*.yaml"):
            if path.stem in ("cross_task", "novel_object"):
                continue
            for s in yaml.safe_load(path.read_text()):
                foreign = {o["object_id"] for o in s["objects"]} - pool
                assert not foreign, (s["scene_id"], foreign)
    pilot = scenes("object_state", "novel_object")
    assert pilot and all({o["object_id"] for o in s["objects"]} - {"black_cup"} <= POOLS["object_state"]
                         for s in pilot)


def test_no_scene_on_a_cell_without_training_support():
    for s in scenes("counting", "id"):
        start = sum(o.get("location") == "bowl" for o in s["objects"])
        assert OBSERVED_COUNTING[s["cell"]] == start, (s["scene_id"], s["cell"], start)
    for condition in ("id", "ood"):
        assert not [s["scene_id"] for s in scenes("ordinal_position", condition)
                    if s["cell"].startswith("position_2_of_3|")]


def test_transferred_objects_are_targets_in_every_cross_task_task():
    for task in ("relative_size", "relational_placement", "referential_description", "ordinal_position",
                 "counting"):
        cross = scenes(task, "cross_task")
        foreign = {s["scene_id"]: {o["object_id"] for o in s["objects"]} - POOLS[task] for s in cross}
        as_target = [s for s in cross if set(s["targets"]) & foreign[s["scene_id"]]]
        assert as_target, task
        families = Counter(s["family"] for s in cross)
        for s in as_target:  # the paired scene holds the same object in another role
            moved = set(s["targets"]) & foreign[s["scene_id"]]
            partners = [p for p in cross if p["family"] == s["family"] and p["scene_id"] != s["scene_id"]
                        and moved <= {o["object_id"] for o in p["objects"]} and not moved & set(p["targets"])]
            if task == "relational_placement":  # the juggling ball is the reference in its family's partners
                partners += [p for p in cross if p["family"] == s["family"] and moved & set(p["references"])]
            assert partners, (task, s["scene_id"])
        assert all(n >= 2 for n in families.values())


def test_relational_families_and_movement_partners():
    for condition in ("id", "ood", "cross_task", "no_movement", "movement_required"):
        families = Counter(s["family"] for s in scenes("relational_placement", condition))
        assert sum(1 for n in families.values() if n != 4) <= 1, (condition, families)
    no_movement = {s["scene_id"]: s for s in scenes("relational_placement", "no_movement")}
    for s in scenes("relational_placement", "movement_required"):
        partner = no_movement[s["partner"]]
        assert partner["instructions"]["spatial"] == s["instructions"]["spatial"]
        assert sorted(o["object_id"] for o in partner["objects"]) == sorted(o["object_id"] for o in s["objects"])
