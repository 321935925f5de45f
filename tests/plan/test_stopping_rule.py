"""Issue 38: campaign.stopping, a comparison campaign's stopping rule, checked at `plan`: one clear
error for each bad rule, and a campaign without one keeps its config hash."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from spabench.cli.main import main
from spabench.errors import ConfigError
from spabench.plan.config import CampaignConfig, StoppingRule, campaign_from_mapping


def _campaign(**stopping) -> dict:
    return {"name": "t", "seed": 3, "order": "interleaved",
            "policies": [{"name": "p", "card": "pi05"}, {"name": "q", "card": "vla0"}],
            "stopping": {"kind": "sequential", "a": "p", "b": "q", **stopping}}


def test_a_rule_is_typed_and_recorded_only_when_set():
    campaign = campaign_from_mapping(_campaign(alpha=0.1, max_pairs=120))
    assert campaign.stopping_rule() == StoppingRule("sequential", "p", "q", 0.1, 120)
    assert campaign.as_dict()["stopping"] == {"kind": "sequential", "a": "p", "b": "q", "alpha": 0.1,
                                              "max_pairs": 120}
    plain = _campaign()
    plain.pop("stopping")
    assert "stopping" not in campaign_from_mapping(plain).as_dict()   # the config hash of older campaigns holds
    merged = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(CampaignConfig), _campaign(alpha=0.2)))
    assert merged.stopping_rule().alpha == 0.2


@pytest.mark.parametrize(("stopping", "order", "message"), [
    ({"a": "nobody"}, "interleaved", r"field 'stopping.a': 'nobody' is not a policy of the campaign \(allowed: p, q\)"),
    ({"b": "p"}, "interleaved", "a and b are the same policy"),
    ({"alpha": 0.5}, "interleaved", r"field 'stopping.alpha': 0.5 \(allowed: a number > 0 and < 0.5\)"),
    ({"alpha": 0}, "interleaved", r"field 'stopping.alpha': 0.0 \(allowed: a number > 0 and < 0.5\)"),
    ({"max_pairs": 0}, "interleaved", "field 'stopping.max_pairs': 0"),
    ({"kind": "bayes"}, "interleaved", r"field 'stopping.kind': 'bayes' \(allowed: sequential\)"),
    ({"patience": 3}, "interleaved", "field 'stopping.patience': unknown field"),
    ({}, "blocked", "a stopping rule needs order: interleaved"),
])
def test_a_bad_rule_is_one_clear_error(stopping, order, message):
    with pytest.raises(ConfigError, match=message):
        campaign_from_mapping({**_campaign(**stopping), "order": order})


def test_plan_refuses_a_rule_on_a_shared_ledger(tmp_path, capsys):
    out = tmp_path / "c"
    code = main(["plan", "campaign=demo_twin", f"out={out}", "+campaign.stopping.kind=sequential",
                 "+campaign.stopping.a=scripted_compositional", "+campaign.stopping.b=scripted_memorising",
                 "ledger=postgresql://bench@127.0.0.1:1/spabench"])
    err = capsys.readouterr().err
    assert code == 2 and "campaign.stopping runs on one bench" in err and not out.exists()
