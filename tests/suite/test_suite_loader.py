"""Bad input gets one DataError naming the file, the scene id / field and the allowed values."""

from __future__ import annotations

import pytest

from spabench.errors import DataError
from spabench.suite.loader import load_suite

from .conftest import HARDWARE

SCENES = "object_state/scenes/id.yaml"
SCENE_ID = "object_state-id-001"


def _error(copy, **kwargs) -> str:
    with pytest.raises(DataError) as err:
        load_suite(copy.root, kwargs.get("hardware", HARDWARE))
    return str(err.value)


def test_malformed_yaml_names_file_and_line(suite_copy):
    path = suite_copy.path(SCENES)
    path.write_text(path.read_text().replace("cell: ", "cell: [", 1))  # an unclosed flow sequence
    msg = _error(suite_copy)
    assert str(path) in msg and "not valid YAML at line" in msg


def test_unknown_object_id(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s["objects"][0].update(object_id="purple_cup"))
    msg = _error(suite_copy)
    assert SCENES in msg and f"{SCENE_ID}.objects[0].object_id" in msg
    assert "'purple_cup'" in msg and "allowed:" in msg and "white_cup_a" in msg and "bowl," not in msg


def test_unknown_state_value(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s["objects"][0]["state"].update(pose="sideways"))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.objects[0].state.pose" in msg and "'sideways'" in msg
    assert "allowed: upright, upside_down" in msg


def test_lid_state_on_an_object_without_a_lid(suite_copy):
    scene = "counting-id-001"
    suite_copy.edit_scene("counting", "id", scene, lambda s: s["objects"][0].update(state={"lid": "open"}))
    msg = _error(suite_copy)
    assert "counting/scenes/id.yaml" in msg and f"{scene}.objects[0].state.lid" in msg and "has no lid" in msg


def test_missing_state_of_a_lidded_object(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s["objects"][0]["state"].pop("lid"))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.objects[0].state.lid" in msg and "allowed: open, closed" in msg


def test_missing_key(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s.pop("goal"))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.goal" in msg and "missing key 'goal'" in msg and "allowed:" in msg


def test_unknown_key(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s.update(colour="red"))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.colour" in msg and "unknown key 'colour'" in msg and "scene_id" in msg


def test_unknown_scene_condition_file(suite_copy):
    suite_copy.path("counting/scenes/easy.yaml").write_text("[]\n")
    msg = _error(suite_copy)
    assert "easy.yaml" in msg and "unknown scene condition 'easy'" in msg
    assert "allowed: id, ood, cross_task, novel_object, no_intervention, no_movement, movement_required" in msg


def test_cell_not_in_the_matrix(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s.update(cell="sticky|white_cup"))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.cell" in msg and "'sticky|white_cup'" in msg and "open|white_cup" in msg


def test_condition_field_must_match_the_file(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s.update(condition="ood"))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.condition" in msg and "allowed: id" in msg


def test_target_not_in_the_scene(suite_copy):
    suite_copy.edit_scene("object_state", "id", SCENE_ID, lambda s: s.update(targets=["juggling_ball"]))
    msg = _error(suite_copy)
    assert f"{SCENE_ID}.targets[0]" in msg and "juggling_ball" in msg


def test_bad_goal_direction(suite_copy):
    scene = "relational_placement-id-001"
    suite_copy.edit_scene("relational_placement", "id", scene, lambda s: s["goal"].update(direction="above"))
    msg = _error(suite_copy)
    assert f"{scene}.goal.direction" in msg and "allowed: left, right, front, behind" in msg


def test_duplicate_scene_id_across_files(suite_copy):
    suite_copy.edit_scene("object_state", "ood", "object_state-ood-001", lambda s: s.update(scene_id=SCENE_ID))
    msg = _error(suite_copy)
    assert f"{SCENE_ID!r} is also used in" in msg


def test_unknown_key_in_the_inventory(suite_copy):
    suite_copy.edit("objects.yaml", lambda d: d["objects"]["red_block"].update(weight_g=20))
    msg = _error(suite_copy)
    assert "objects.yaml" in msg and "objects.red_block.weight_g" in msg and "allowed: family" in msg


def test_unknown_task_in_the_manifest(suite_copy):
    suite_copy.edit("suite.yaml", lambda d: d["tasks"].append("juggling"))
    msg = _error(suite_copy)
    assert "suite.yaml" in msg and "tasks[6]" in msg and "allowed: object_state" in msg


def test_unknown_placeholder_in_a_prompt(suite_copy):
    suite_copy.edit("counting/prompts.yaml", lambda d: d.update(spatial=["Leave {how_many} in the bowl."]))
    msg = _error(suite_copy)
    assert "counting/prompts.yaml" in msg and "'how_many'" in msg and "allowed: concept, argument" in msg


def test_bench_geometry_missing_key(suite_copy, tmp_path):
    hardware = tmp_path / "hardware"
    hardware.mkdir()
    text = (HARDWARE / "bench.yaml").read_text()
    (hardware / "bench.yaml").write_text("\n".join(l for l in text.splitlines() if not l.startswith("bowl_xy_cm")))
    msg = _error(suite_copy, hardware=hardware)
    assert "bench.yaml" in msg and "missing key 'bowl_xy_cm'" in msg
