"""The committed benchmark data: inventory, matrices, counts, contracts, commands, import weight."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from omegaconf import OmegaConf

from spabench.suite import check_suite, validate_suite
from spabench.suite.commands import SuiteValidateConfig, validate
from spabench.suite.config import SuiteConfig
from spabench.suite.resolvers import ordinal_row, resolve_targets, size_metric
from spabench.suite.vocabulary import CONDITION_COUNTS, TASKS

from .conftest import HARDWARE, REPO
from .conftest import TASKS as TASKS_DIR

PROTOCOL_FAMILIES = {
    "block": {"red_block", "blue_block", "green_block", "yellow_block"},
    "pen": {"green_pen", "yellow_pen", "blue_pen"},
    "pencil_sharpener": {"green_pencil_sharpener", "red_pencil_sharpener"},
    "crushed_soda_can": {"crushed_coke_can", "crushed_pepsi_can"},
    "airplane": {"airplane_with_propellers", "airplane_without_propellers"},
    "cup": {"white_cup_a", "white_cup_b", "striped_cup_a", "striped_cup_b", "brown_cup_a", "brown_cup_b"},
    "spice_container": {"spice_container_a", "spice_container_b"},
    "marker": {"pink_marker"},
    "highlighter": {"green_highlighter"},
    "tape_ball": {"blue_tape_ball"},
    "juggling_ball": {"juggling_ball"},
}

PROTOCOL_WITHHELD = {
    "object_state": {"upside_down|white_cup", "open|striped_cup", "closed|brown_cup", "upright|spice_container"},
    "relational_placement": {f"{d}|{pair}" for d in ("left", "right", "front", "behind")
                             for pair in ("green_pen/red_block", "red_block/green_pen")},
    "referential_description": {"furthest|airplane", "closest|crushed_soda_can", "between|pencil_sharpener"},
    "ordinal_position": {
        "position_1_of_2|airplane", "position_1_of_2|highlighter", "position_2_of_2|tape_ball",
        "position_2_of_2|yellow_pen", "position_1_of_3|tape_ball", "position_1_of_3|yellow_pen",
        "position_3_of_3|airplane", "position_3_of_3|highlighter", "position_1_of_4|airplane",
        "position_2_of_4|tape_ball", "position_3_of_4|highlighter", "position_4_of_4|yellow_pen",
    },
    "counting": {"goal_1|removal", "goal_3|addition"},
    "relative_size": {"largest|green_block", "smallest|juggling_ball"},
}


def test_inventory_is_the_protocols(suite):
    regular = {oid: o for oid, o in suite.objects.items() if not o.novel and o.family != "bowl"}
    assert len(regular) == 25
    families: dict[str, set[str]] = {}
    for oid, spec in regular.items():
        families.setdefault(spec.family, set()).add(oid)
    assert families == PROTOCOL_FAMILIES
    assert len(families) == 11
    novel = [oid for oid, o in suite.objects.items() if o.novel]
    assert novel == ["black_cup"] and suite.objects["black_cup"].family == "cup"
    assert [oid for oid, o in suite.objects.items() if o.family == "bowl"] == ["bowl"]
    assert len(suite.objects) == 25 + 1 + 1
    for oid in families["cup"] | families["spice_container"] | {"black_cup"}:
        assert suite.objects[oid].has_lid and suite.objects[oid].can_invert
    assert not any(o.has_lid or o.can_invert for oid, o in regular.items()
                   if o.family not in ("cup", "spice_container"))


def test_training_size_ranks_hold(suite):
    ranked = ["red_pencil_sharpener", "green_block", "juggling_ball", "crushed_pepsi_can"]
    assert [suite.objects[o].size_rank for o in ranked] == [1, 2, 3, 4]
    volumes = [size_metric(suite.objects[o]) for o in ranked]
    longest = [max(suite.objects[o].size_cm) for o in ranked]
    assert volumes == sorted(volumes) and len(set(volumes)) == 4
    assert longest == sorted(longest) and len(set(longest)) == 4


def test_withheld_cells_are_the_protocols(suite):
    for task in TASKS:
        assert suite.tasks[task].withheld == PROTOCOL_WITHHELD[task], task


def test_committed_suite_passes_every_contract(suite):
    assert validate_suite(suite) == []
    check_suite(suite)  # raises on any violation


def test_scene_counts_are_the_protocols(suite):
    for task in TASKS:
        scenes = [s for s in suite.scenes.values() if s.task == task]
        by_condition = Counter(s.condition for s in scenes)
        trials = CONDITION_COUNTS[task]
        expected = {c: n for c, n in trials.items() if c not in ("direct", "paraphrase_ood", "paraphrase_direct")}
        if task == "object_state":  # direct controls run on declared variants of their OOD scenes
            expected["direct"] = trials["direct"]
        assert dict(by_condition) == expected, task
        ood = [s for s in scenes if s.condition == "ood"]
        matched = [s for s in ood if s.matched_group]
        assert len(matched) == trials["direct"] == 20
        assert len([s for s in matched if s.paraphrase]) == trials["paraphrase_ood"] == 10
        carriers = {s.matched_group: s for s in scenes if s.condition == "direct"} or {s.matched_group: s for s in matched}
        assert all(carriers[s.matched_group].instructions.direct for s in matched)
        assert len({s.matched_group for s in matched}) == 20
        # every withheld cell is tested, and has a matched (direct-control) scene
        assert {s.cell.key for s in ood} == suite.tasks[task].withheld
        assert {s.cell.key for s in matched} == suite.tasks[task].withheld


def test_totals_per_policy_are_900():
    per_task = {t: sum(CONDITION_COUNTS[t].values()) for t in TASKS}
    assert per_task["relational_placement"] == 170 and per_task["relative_size"] == 130
    assert sum(per_task.values()) == 900


def test_scene_ids_name_task_condition_and_number(suite):
    for scene_id, scene in suite.scenes.items():
        task, condition, number = scene_id.rsplit("-", 2)
        assert (task, condition) == (scene.task, scene.condition) and len(number) == 3


def test_ordinals_count_from_the_robots_left_which_is_plus_y(suite):
    for scene in suite.scenes_for("ordinal_position", "id"):
        row = ordinal_row(scene, suite)
        k = int(scene.cell.concept.split("_")[1])
        assert row[k - 1].object_id == scene.targets[0]
        assert row[0].y_cm == max(o.y_cm for o in scene.objects)


def test_resolvers_agree_with_every_stored_target(suite):
    for scene in suite.scenes.values():
        resolved = resolve_targets(scene, suite)
        if scene.task == "counting":
            assert set(scene.targets) <= resolved
        else:
            assert resolved == set(scene.targets), scene.scene_id


def test_direct_instructions_look_like_the_protocols_example(suite):
    scene = next(s for s in suite.scenes_for("referential_description", "ood")
                 if s.matched_group and s.targets == ("crushed_coke_can",))
    assert scene.instructions.direct == "Move the crushed Coke can into the bowl."


def test_importing_the_suite_does_not_import_lerobot_or_torch():
    code = ("import sys, spabench.suite, spabench.suite.generator, spabench.suite.commands, "
            "spabench.suite.config; heavy = [m for m in ('lerobot', 'torch') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_suite_config_and_its_yaml_agree():
    conf = OmegaConf.load(REPO / "conf" / "suite" / "spabench.yaml")
    merged = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SuiteConfig), conf))
    assert merged == SuiteConfig()
    assert (merged.root, merged.hardware, merged.seed) == ("tasks", "hardware", 20261130)


def _cfg(root):
    return SuiteValidateConfig.from_mapping({"suite": {"root": str(root), "hardware": str(HARDWARE), "seed": 20261130}})


def test_validate_command_reports_ok(capsys):
    assert validate(_cfg(TASKS_DIR)) == 0
    out = capsys.readouterr().out
    assert "suite OK" in out and "680 scenes" in out


def test_validate_command_exits_2_on_a_violation(suite_copy, capsys):
    suite_copy.edit_scene("counting", "id", "counting-id-003", lambda s: s["objects"][0].update(x_cm=55))
    assert validate(_cfg(suite_copy.root)) == 2
    out = capsys.readouterr().out
    assert "counting-id-003: [workspace]" in out


def test_validate_command_exits_2_on_a_data_error(suite_copy, capsys):
    suite_copy.path("counting/scenes/id.yaml").write_text("- scene_id: [unclosed\n")
    assert validate(_cfg(suite_copy.root)) == 2
    assert "id.yaml" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["", "   "])
def test_suite_config_rejects_an_empty_root(bad):
    from spabench.errors import ConfigError

    with pytest.raises(ConfigError, match="root"):
        SuiteConfig(root=bad)
