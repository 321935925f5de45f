"""CampaignConfig: the shipped campaigns load, counts follow the protocol, bad configs fail clearly."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from spabench.errors import ConfigError
from spabench.plan.config import CampaignConfig, PolicyEntry, campaign_from_mapping
from spabench.suite.vocabulary import CONDITION_COUNTS, TASKS

SHIPPED = ("spabench_full", "spabench_all5", "demo_twin", "smoke")


def _base(**changes) -> dict:
    data = {"name": "t", "seed": 3, "order": "blocked",
            "policies": [{"name": "a", "card": "pi05"}, {"name": "b", "card": "vla0", "timer_s": 90}]}
    data.update(changes)
    return data


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_campaigns_validate_through_structured_schema(name, campaign_yaml):
    raw = campaign_yaml(name)
    merged = OmegaConf.merge(OmegaConf.structured(CampaignConfig), raw)
    via_schema = OmegaConf.to_object(merged)
    assert isinstance(via_schema, CampaignConfig)
    assert all(isinstance(p, PolicyEntry) for p in via_schema.policies)
    assert via_schema.name == name
    assert via_schema.as_dict() == campaign_from_mapping(raw).as_dict()


def test_full_campaign_has_protocol_counts(campaign_yaml):
    c = campaign_from_mapping(campaign_yaml("spabench_full"))
    assert [p.name for p in c.policies] == ["molmoact2", "pi05", "groot_fllm"]
    assert {p.timer_s for p in c.policies} == {None}     # the cards' timers (60 s)
    assert (c.order, c.seed, c.bench, c.blind_aliases) == ("interleaved", 20261130, "so101", True)
    assert c.trial_counts() == CONDITION_COUNTS
    per_task = {t: sum(v.values()) for t, v in c.trial_counts().items()}
    assert per_task["relational_placement"] == 170 and per_task["relative_size"] == 130
    assert sum(per_task.values()) == 900


def test_all5_adds_groot_fllm_and_vla0_with_90s(campaign_yaml):
    c = campaign_from_mapping(campaign_yaml("spabench_all5"))
    from spabench.plan.planner import policy_rates

    timers = {name: timer for name, (timer, _) in policy_rates(c).items()}
    assert set(timers) == {"pi05", "molmoact2", "groot_fft", "groot_fllm", "vla0"}
    assert timers["vla0"] == 90.0 and timers["groot_fllm"] == 60.0   # from the cards


def test_demo_and_smoke_sizes(campaign_yaml):
    demo = campaign_from_mapping(campaign_yaml("demo_twin"))
    assert demo.bench == "sim"
    assert {p.card for p in demo.policies} == {"scripted_compositional", "scripted_memorising"}
    counts = demo.trial_counts()
    assert 60 <= sum(n for per in counts.values() for n in per.values()) <= 70
    # every condition of every task gets at least one trial
    assert all(n >= 1 for per in counts.values() for n in per.values())
    smoke = campaign_from_mapping(campaign_yaml("smoke"))
    assert len(smoke.policies) == 1
    assert sum(n for per in smoke.trial_counts().values() for n in per.values()) == 1


def test_counts_override_only_touches_conditions_a_task_has():
    c = campaign_from_mapping(_base(counts={"no_intervention": 2, "novel_object": 1, "id": 3}))
    counts = c.trial_counts()
    assert "no_intervention" not in counts["relative_size"]
    assert "no_intervention" not in counts["relational_placement"]
    assert counts["counting"]["no_intervention"] == 2 and counts["object_state"]["novel_object"] == 1
    assert "novel_object" not in counts["counting"]
    assert counts["counting"]["ood"] == 50            # not overridden: protocol count


def test_default_tasks_are_all_six():
    c = campaign_from_mapping({k: v for k, v in _base().items()})
    assert c.tasks == list(TASKS)


@pytest.mark.parametrize(
    "change, field, allowed",
    [
        ({"order": "zigzag"}, "order", "blocked | interleaved"),
        ({"bench": "ur5"}, "bench", "so101 | sim"),
        ({"policies": [{"name": "a", "card": "pi05", "timr_s": 60}]}, "policies[0].timr_s", "name, card, timer_s"),
        ({"policies": [{"name": "a"}]}, "policies[0].card", None),
        ({"policies": [{"name": "a", "card": "pi05", "timer_s": -1}]}, "policies[0].timer_s", None),
        ({"policies": [{"name": "a", "card": "x"}, {"name": "a", "card": "y"}]}, "policies", None),
        ({"policies": []}, "policies", None),
        ({"counts": {"id": -1}}, "counts.id", None),
        ({"counts": {"idd": 1}}, "counts", "id, ood, direct"),
        ({"counts": {"ood": 1, "direct": 2}}, "counts.direct", None),
        ({"counts": {"direct": 2, "paraphrase_direct": 3}}, "counts.paraphrase_ood", None),
        ({"tasks": ["counting", "juggling"]}, "tasks[1]", "object_state"),
        ({"tasks": []}, "tasks", None),
        ({"colour": "red"}, "colour", "name, policies, seed"),
        ({"seed": "abc"}, "seed", None),
    ],
)
def test_bad_campaign_config_names_field_and_allowed(change, field, allowed):
    with pytest.raises(ConfigError) as info:
        campaign_from_mapping(_base(**change))
    text = str(info.value)
    assert "campaign 't'" in text
    assert f"field '{field}'" in text
    if allowed:
        assert "allowed:" in text and allowed in text


def test_missing_seed_is_named():
    data = _base()
    del data["seed"]
    with pytest.raises(ConfigError, match="field 'seed' is required"):
        campaign_from_mapping(data)


def test_all_zero_counts_rejected():
    zero = {c: 0 for c in ("id", "ood", "direct", "paraphrase_ood", "paraphrase_direct", "cross_task",
                           "novel_object", "no_intervention", "no_movement", "movement_required")}
    with pytest.raises(ConfigError, match="no trials"):
        campaign_from_mapping(_base(counts=zero))


def test_structured_merge_surfaces_config_error():
    """The lead's CLI validates via OmegaConf.structured + to_object; __post_init__'s error must reach it."""
    merged = OmegaConf.merge(OmegaConf.structured(CampaignConfig), _base(order="zigzag"))
    with pytest.raises(Exception) as info:
        OmegaConf.to_object(merged)
    chain, exc = [], info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    assert any(isinstance(e, ConfigError) and "zigzag" in str(e) for e in chain)
