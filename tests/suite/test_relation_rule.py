"""The Relational Placement rule is one suite setting: scenes are placed, checked, planned and run for it.

Measured on main: `conf/suite relation.bound=sheet` changed only the checklist's wording. The
contracts still checked the committed scenes against the paper's bound, so relational_placement-ood-040
(target 10.1 cm from its reference, edge gap 8.0 cm, 27 deg off the direction) passed although its
start already meets the sheet bound, and 9 other Relational scenes sat inside its 1 cm margin.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from spabench.errors import ConfigError, DataError
from spabench.suite import load_suite, validate_suite
from spabench.suite import resolvers as R
from spabench.suite.generator import DEFAULT_SEED, build_suite, generate_suite
from spabench.suite.geometry import DIRECTION_VECTORS
from spabench.suite.success import DEFAULT_RELATION_RULE, RelationRule

from .conftest import HARDWARE, TASKS

SHEET = RelationRule(bound="sheet")
RELATION_RULES = ("goal_already_holds", "goal_not_met")


def _start(scene, suite):
    """(centre distance, angle off the direction, edge gap) of the requested relation, computed here
    from the scene file and the inventory (not with the contracts' or generator's helpers)."""
    target, reference, direction = R.requested_relation(scene, suite)
    by_id = {o.object_id: o for o in scene.objects}
    t, r = by_id[target], by_id[reference]
    dx, dy = t.x_cm - r.x_cm, t.y_cm - r.y_cm
    ux, uy = DIRECTION_VECTORS[direction]   # the bench frame: a fact of the suite, not the rule under test
    dist = math.hypot(dx, dy)
    angle = math.degrees(math.acos(max(-1.0, min(1.0, (dx * ux + dy * uy) / dist))))

    def half(oid):
        spec = suite.objects[oid]
        return spec.footprint_radius_cm or min(spec.size_cm[:2]) / 2

    return dist, angle, dist - half(target) - half(reference)


def test_committed_scenes_are_checked_against_the_configured_rule():
    suite = load_suite(TASKS, HARDWARE)
    assert suite.relation_rule == DEFAULT_RELATION_RULE and validate_suite(suite) == []
    suite.relation_rule = SHEET
    violations = validate_suite(suite)
    assert violations and {v.rule for v in violations} <= set(RELATION_RULES)
    flagged = {v.scene_id for v in violations}
    assert all(s.startswith("relational_placement-") for s in flagged)
    assert "relational_placement-ood-040" in flagged          # its start already meets the sheet bound
    dist, angle, gap = _start(suite.scene("relational_placement-ood-040"), suite)
    assert SHEET.holds(dist, angle, gap) and not DEFAULT_RELATION_RULE.holds(dist, angle, gap)


def test_a_suite_generated_for_the_sheet_rule_tests_it():
    suite = build_suite(DEFAULT_SEED, TASKS, HARDWARE, SHEET)
    assert suite.relation_rule == SHEET and validate_suite(suite) == []
    relational = [s for s in suite.scenes.values() if s.task == "relational_placement"
                  and R.requested_relation(s, suite) is not None]
    assert len(relational) >= 100
    for scene in relational:
        dist, angle, gap = _start(scene, suite)
        if scene.condition == "no_movement":   # already placed, with a margin: gap 3-7 cm, within 35 deg
            assert 3.0 <= gap <= 7.0 and angle <= 35.0, (scene.scene_id, dist, angle, gap)
        else:                                   # needs movement: gap >= 9 cm or >= 55 deg off
            assert gap >= 9.0 or angle >= 55.0, (scene.scene_id, dist, angle, gap)
    # the bounds are different rules: some of these no-movement starts are outside the paper's 3 inches
    suite.relation_rule = DEFAULT_RELATION_RULE
    assert {v.rule for v in validate_suite(suite)} == {"goal_already_holds"}


def _plan(out, suite_settings):
    from spabench.plan.commands import PlanConfig, plan

    campaign = yaml.safe_load(Path("conf/campaign/smoke.yaml").read_text())
    return plan(PlanConfig.from_mapping({"campaign": campaign, "suite": suite_settings, "out": str(out)}))


def test_plan_refuses_scenes_placed_for_another_rule(tmp_path):
    settings = yaml.safe_load(Path("conf/suite/spabench.yaml").read_text())
    settings["relation"]["bound"] = "sheet"
    with pytest.raises(DataError, match="goal_not_met") as caught:
        _plan(tmp_path / "c", settings)
    assert "spabench suite generate" in str(caught.value)
    assert not (tmp_path / "c").exists()   # nothing written


def test_run_is_bound_to_the_planned_rule(tmp_path):
    from spabench.plan.planner import planned_relation_rule
    from spabench.rollout.binding import check_relation_binding

    settings = yaml.safe_load(Path("conf/suite/spabench.yaml").read_text())
    assert _plan(tmp_path / "paper", settings) == 0
    assert planned_relation_rule(tmp_path / "paper") == DEFAULT_RELATION_RULE
    assert "relation" not in yaml.safe_load((tmp_path / "paper" / "config.yaml").read_text())["suite"]
    check_relation_binding(tmp_path / "paper", DEFAULT_RELATION_RULE)
    with pytest.raises(ConfigError, match="suite.relation.bound=paper"):
        check_relation_binding(tmp_path / "paper", SHEET)

    generate_suite(DEFAULT_SEED, tmp_path / "tasks", source_root=TASKS, hardware_root=HARDWARE, relation_rule=SHEET)
    settings.update(root=str(tmp_path / "tasks"), relation={**settings["relation"], "bound": "sheet"})
    assert _plan(tmp_path / "sheet", settings) == 0
    recorded = yaml.safe_load((tmp_path / "sheet" / "config.yaml").read_text())["suite"]["relation"]
    assert recorded["bound"] == "sheet" and planned_relation_rule(tmp_path / "sheet") == SHEET
    with pytest.raises(ConfigError, match="planned with the Relational Placement rule"):
        check_relation_binding(tmp_path / "sheet", DEFAULT_RELATION_RULE)


def test_the_printed_next_command_runs_with_the_planned_suite(tmp_path, capsys):
    """Measured before: plan printed `spabench run campaign=DIR bench=sim operator=auto` for a
    campaign planned on a sheet-bound suite folder, and that command was refused (another rule)
    and would have loaded the default tasks/."""
    from spabench.cli.commands import COMMANDS
    from spabench.cli.main import compose
    from spabench.rollout.binding import check_relation_binding

    settings = yaml.safe_load(Path("conf/suite/spabench.yaml").read_text())
    assert _plan(tmp_path / "paper", settings) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("next: "))
    assert "suite." not in line
    generate_suite(DEFAULT_SEED, tmp_path / "tasks", source_root=TASKS, hardware_root=HARDWARE, relation_rule=SHEET)
    settings.update(root=str(tmp_path / "tasks"), relation={**settings["relation"], "bound": "sheet"})
    assert _plan(tmp_path / "sheet", settings) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("next: "))
    assert f"suite.root={tmp_path / 'tasks'}" in line and "suite.relation.bound=sheet" in line
    words = line.removeprefix("next: spabench run ").split()
    cfg = compose(COMMANDS["run"], words)
    assert cfg.need("suite").root == str(tmp_path / "tasks")
    check_relation_binding(tmp_path / "sheet", cfg.need("suite").relation)   # accepted as printed
