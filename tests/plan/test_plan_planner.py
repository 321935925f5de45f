"""The planner on a suite with the protocol's scene counts: counts, matching, ids, orders, aliases."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from spabench.errors import DataError
from spabench.plan.aliases import assign_aliases, seeded_rng
from spabench.plan.config import campaign_from_mapping
from spabench.plan.orders import counterbalanced
from spabench.plan.planner import build_plan, evaluation_ids, spread_pick
from spabench.suite.vocabulary import CONDITION_COUNTS, CONDITIONS, TASKS


def _campaign(campaign_yaml, name="spabench_full", **changes):
    data = campaign_yaml(name)
    data.update(changes)
    return campaign_from_mapping(data)


@pytest.fixture(scope="module")
def full_plan(full_suite, campaign_yaml):
    return build_plan(_campaign(campaign_yaml), full_suite)


def _by_policy(trials):
    out = defaultdict(list)
    for t in trials:
        out[t.policy].append(t)
    return out


def test_every_policy_gets_the_protocol_counts(full_plan):
    by_policy = _by_policy(full_plan.trials)
    assert set(by_policy) == {"molmoact2", "pi05", "groot_fllm"}
    for policy, trials in by_policy.items():
        assert len(trials) == 900, policy
        counts = Counter((t.task, t.condition) for t in trials)
        expected = {(task, c): n for task, per in CONDITION_COUNTS.items() for c, n in per.items()}
        assert dict(counts) == expected, policy
    assert len(full_plan.trials) == 2700
    assert len(full_plan.evaluations) == 900


def test_direct_and_paraphrase_trials_sit_on_matched_ood_scenes(full_plan, full_suite):
    for trials in _by_policy(full_plan.trials).values():
        ood = {(t.task, t.scene_id): t for t in trials if t.condition == "ood"}
        by_cond = defaultdict(set)
        for t in trials:
            by_cond[(t.task, t.condition)].add(t.scene_id)
            if t.condition in ("direct", "paraphrase_ood", "paraphrase_direct"):
                partner = ood.get((t.task, t.scene_id))
                assert partner is not None, f"{t.trial_id} has no OOD trial on {t.scene_id}"
                assert t.matched_group is not None and t.matched_group == partner.matched_group
                assert t.scene_condition == "ood" and t.withheld
                scene = full_suite.scene(t.scene_id)
                assert scene.matched_group == t.matched_group
            if t.condition.startswith("paraphrase"):
                assert full_suite.scene(t.scene_id).paraphrase
                assert t.instruction_variant == "paraphrase"
            else:
                assert t.instruction_variant == "original"
        for task in TASKS:
            direct = by_cond[(task, "direct")]
            assert len(direct) == 20
            # the four conditions on the same paraphrase scenes
            assert by_cond[(task, "paraphrase_ood")] == by_cond[(task, "paraphrase_direct")]
            assert by_cond[(task, "paraphrase_ood")] <= direct <= by_cond[(task, "ood")]
            assert len(by_cond[(task, "ood")]) == 50


def test_instructions_follow_the_condition(full_plan, full_suite):
    for t in full_plan.trials:
        ins = full_suite.scene(t.scene_id).instructions
        expected = {"direct": ins.direct, "paraphrase_ood": ins.paraphrase_spatial,
                    "paraphrase_direct": ins.paraphrase_direct}.get(t.condition, ins.spatial)
        assert t.instruction == expected


def test_evaluation_ids_shared_across_policies_and_unique_per_scene_condition(full_plan):
    evals = defaultdict(list)
    for t in full_plan.trials:
        evals[t.evaluation_id].append(t)
    assert len(evals) == 900
    for eid, trials in evals.items():
        assert sorted(t.policy for t in trials) == sorted(["molmoact2", "pi05", "groot_fllm"])
        assert len({(t.scene_id, t.condition, t.instruction) for t in trials}) == 1, eid
    pairs = {(t.scene_id, t.condition) for t in full_plan.trials}
    assert len(pairs) == 900


def test_evaluation_ids_do_not_depend_on_policies_or_counts(full_plan, full_suite, campaign_yaml):
    reference = {(t.scene_id, t.condition): t.evaluation_id for t in full_plan.trials}
    other = build_plan(_campaign(campaign_yaml, policies=[{"name": "zz", "card": "vla0"}], seed=99),
                       full_suite)
    assert {(t.scene_id, t.condition): t.evaluation_id for t in other.trials} == reference
    demo = build_plan(_campaign(campaign_yaml, "demo_twin"), full_suite)
    for t in demo.trials:
        assert reference[(t.scene_id, t.condition)] == t.evaluation_id
    ids = evaluation_ids(full_suite)
    assert len(ids) == 900 and len(set(ids.values())) == 900
    assert sorted(ids.values())[0] == "E0001" and sorted(ids.values())[-1] == "E0900"


def test_trial_ids_unique_and_order_is_a_permutation(full_plan):
    ids = [t.trial_id for t in full_plan.trials]
    assert len(set(ids)) == len(ids)
    assert sorted(t.order for t in full_plan.trials) == list(range(1, len(ids) + 1))
    assert [t.order for t in full_plan.trials] == list(range(1, len(ids) + 1))
    for t in full_plan.trials:
        assert t.trial_id == f"{t.evaluation_id}-{t.alias}"


def _contiguous(orders):
    orders = sorted(orders)
    return orders == list(range(orders[0], orders[0] + len(orders)))


def test_interleaved_keeps_evaluations_and_scenes_adjacent(full_plan):
    by_eval, by_scene = defaultdict(list), defaultdict(list)
    for t in full_plan.trials:
        by_eval[t.evaluation_id].append(t.order)
        by_scene[t.scene_id].append(t.order)
    assert all(_contiguous(o) for o in by_eval.values())
    assert all(_contiguous(o) for o in by_scene.values())
    # interleaved really mixes tasks: the first 60 trials are not all one task
    assert len({t.task for t in full_plan.trials[:60]}) > 1


def test_blocked_order_by_task_condition_scene(full_suite, campaign_yaml):
    plan = build_plan(_campaign(campaign_yaml, order="blocked"), full_suite)
    t_rank = {t: i for i, t in enumerate(TASKS)}
    c_rank = {c: i for i, c in enumerate(CONDITIONS)}
    keys = [(t_rank[t.task], c_rank[t.condition], t.scene_id) for t in plan.trials]
    assert keys == sorted(keys)
    by_eval = defaultdict(list)
    for t in plan.trials:
        by_eval[t.evaluation_id].append(t.order)
    assert all(_contiguous(o) for o in by_eval.values())


@pytest.mark.parametrize("order", ["blocked", "interleaved"])
def test_policies_counterbalanced(full_suite, campaign_yaml, order):
    plan = build_plan(_campaign(campaign_yaml, order=order), full_suite)
    by_eval = defaultdict(list)
    for t in plan.trials:
        by_eval[t.evaluation_id].append(t)
    position = Counter()
    for trials in by_eval.values():
        for pos, t in enumerate(sorted(trials, key=lambda t: t.order)):
            position[(t.policy, pos)] += 1
    for pos in range(3):
        counts = [position[(p, pos)] for p in ("molmoact2", "pi05", "groot_fllm")]
        assert max(counts) - min(counts) <= 1, (pos, counts)
    # not a fixed rotation: the sequence of first policies is not periodic with period 3
    firsts = [sorted(ts, key=lambda t: t.order)[0].policy
              for ts in sorted(by_eval.values(), key=lambda ts: min(t.order for t in ts))]
    assert any(firsts[i] != firsts[i + 3] for i in range(len(firsts) - 3))


def test_counterbalanced_rows_are_latin():
    rows = counterbalanced(["a", "b", "c", "d"], 8, seeded_rng(1, "x"))
    for cycle in (rows[:4], rows[4:]):
        for pos in range(4):
            assert sorted(r[pos] for r in cycle) == ["a", "b", "c", "d"]


def test_aliases_are_a_seeded_permutation():
    policies = ["pi05", "molmoact2", "groot_fft", "groot_fllm", "vla0"]
    a = assign_aliases(policies, 5)
    assert sorted(a.values()) == [f"P{i}" for i in range(1, 6)]
    assert assign_aliases(policies, 5) == a
    mappings = {tuple(assign_aliases(policies, s).values()) for s in range(10)}
    assert len(mappings) > 1
    assert assign_aliases(policies, 5, blind=False) == {p: p for p in policies}


def test_plan_aliases_and_unblinded_trial_ids(full_plan, full_suite, campaign_yaml):
    assert sorted(full_plan.aliases.values()) == ["P1", "P2", "P3"]
    for t in full_plan.trials:
        assert t.alias == full_plan.aliases[t.policy]
    open_plan = build_plan(_campaign(campaign_yaml, "demo_twin", blind_aliases=False), full_suite)
    assert all(t.alias == t.policy for t in open_plan.trials)


def test_deterministic_for_a_seed(full_plan, full_suite, campaign_yaml):
    again = build_plan(_campaign(campaign_yaml), full_suite)
    assert again.trials == full_plan.trials
    other = build_plan(_campaign(campaign_yaml, seed=1), full_suite)
    assert other.trials != full_plan.trials
    assert {(t.evaluation_id, t.policy) for t in other.trials} == {(t.evaluation_id, t.policy)
                                                                   for t in full_plan.trials}


def test_timers_and_cards_come_from_policy_entries(full_suite, campaign_yaml):
    plan = build_plan(_campaign(campaign_yaml, "spabench_all5"), full_suite)
    timers = {t.policy: t.timer_s for t in plan.trials}
    cards = {t.policy: t.card for t in plan.trials}
    assert timers["vla0"] == 90.0 and timers["pi05"] == 60.0
    assert cards["groot_fllm"] == "groot_fllm"
    assert len(plan.trials) == 4500


def test_demo_counts_keep_the_matching_rules(full_suite, campaign_yaml):
    campaign = _campaign(campaign_yaml, "demo_twin")
    plan = build_plan(campaign, full_suite)
    for trials in _by_policy(plan.trials).values():
        counts = Counter((t.task, t.condition) for t in trials)
        expected = {(task, c): n for task, per in campaign.trial_counts().items() for c, n in per.items()}
        assert dict(counts) == expected
        ood = {(t.task, t.scene_id) for t in trials if t.condition == "ood"}
        for t in trials:
            if t.condition in ("direct", "paraphrase_ood", "paraphrase_direct"):
                assert (t.task, t.scene_id) in ood and t.matched_group
            if t.condition.startswith("paraphrase"):
                assert full_suite.scene(t.scene_id).paraphrase
    # the small OOD sample is spread over withheld cells
    cells = {t.cell for t in plan.trials if t.task == "counting" and t.condition == "ood"}
    assert len(cells) == 3


def test_spread_pick_prefers_unused_cells(full_suite):
    scenes = full_suite.scenes_for("counting", "id")
    picked = spread_pick(scenes, 4)
    assert len({s.cell.key for s in picked}) == 4
    assert spread_pick(scenes, 4) == picked


def test_too_few_scenes_names_the_scene_file(suite_factory, campaign_yaml):
    suite = suite_factory(drop={("ordinal_position", "ood"): 1})
    with pytest.raises(DataError) as info:
        build_plan(_campaign(campaign_yaml), suite)
    text = str(info.value)
    assert "tasks/ordinal_position/scenes/ood.yaml" in text and "50" in text and "49" in text


def test_missing_direct_instruction_is_a_data_error(full_suite, without_instruction, campaign_yaml):
    scene_id = next(s.scene_id for s in full_suite.scenes_for("counting", "ood") if s.matched_group)
    suite = without_instruction(full_suite, scene_id, "direct")
    with pytest.raises(DataError) as info:
        build_plan(_campaign(campaign_yaml), suite)
    assert scene_id in str(info.value) and "instructions.direct" in str(info.value)


def test_task_missing_from_suite(suite_factory, campaign_yaml):
    suite = suite_factory(tasks=("counting",))
    with pytest.raises(DataError, match="tasks/suite.yaml.*object_state"):
        build_plan(_campaign(campaign_yaml), suite)
    only = build_plan(_campaign(campaign_yaml, tasks=["counting"]), suite)
    assert {t.task for t in only.trials} == {"counting"}
    assert len(only.trials) == 150 * 3
