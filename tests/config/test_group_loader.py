"""Issue 35: every group (bench, card, campaign, operator, console, suite) is loaded by one OmegaConf
loader (spabench.config.typed_node), so an unknown field, a wrong type, a `???` and a non-finite number
are one error of one shape in every group: "<where>: field '<key>': ... (allowed: ...)"."""

from __future__ import annotations

import pytest

import spabench.sim.bench_config  # noqa: F401  (the twin registers bench type "sim")
from spabench.bench.config import BenchConfig
from spabench.console.config import ConsoleConfig
from spabench.errors import ConfigError
from spabench.operator.config import OperatorConfig
from spabench.plan.config import campaign_from_mapping
from spabench.policy.card import card_from_mapping
from spabench.suite.config import suite_config

CARD = {"name": "c", "protocol": "openpi", "port": 8000, "horizon": 10}
CAMPAIGN = {"name": "t", "seed": 3, "policies": [{"name": "a", "card": "pi05"}]}
# (loader, a valid mapping, its where, a float field, a bool field)
GROUPS = {
    "bench": (BenchConfig.from_mapping, {"type": "sim"}, "bench config", "max_relative_target", None),
    "card": (card_from_mapping, CARD, "policy card", "timer_s", "allow_remote_pickle"),
    "campaign": (campaign_from_mapping, CAMPAIGN, "campaign 't'", None, "blind_aliases"),
    "operator": (OperatorConfig.from_mapping, {}, "operator config", "wait_videos_s", "go_home_after"),
    "console": (ConsoleConfig.from_mapping, {}, "operator.console", "stream_hz", None),
    "suite": (suite_config, {}, "conf/suite", None, None),
}


@pytest.mark.parametrize("group", GROUPS)
def test_an_unknown_field_is_one_error_of_one_shape(group):
    load, data, where, *_ = GROUPS[group]
    with pytest.raises(ConfigError, match=rf"^{where}: field 'colour': unknown field \(allowed: \w+, "):
        load({**data, "colour": "red"})


@pytest.mark.parametrize("group", [g for g in GROUPS if GROUPS[g][3]])
def test_a_number_must_be_a_finite_number(group):
    load, data, where, number, _ = GROUPS[group]
    with pytest.raises(ConfigError, match=rf"^{where}: field '{number}': 'abc' \(allowed: a number"):
        load({**data, number: "abc"})
    for bad in ("nan", "inf", float("-inf")):   # OmegaConf reads "nan" and "inf" as floats
        with pytest.raises(ConfigError, match=rf"field '{number}': .* \(allowed: a finite number\)"):
            load({**data, number: bad})


@pytest.mark.parametrize("group", [g for g in GROUPS if GROUPS[g][4]])
def test_booleans_read_as_omegaconf_reads_them(group):
    load, data, where, _, flag = GROUPS[group]
    assert getattr(load({**data, flag: "off"}), flag) is False
    assert getattr(load({**data, flag: "yes"}), flag) is True
    with pytest.raises(ConfigError, match=rf"^{where}: field '{flag}': 'maybe' \(allowed: true \| false\)"):
        load({**data, flag: "maybe"})


def test_a_required_value_and_a_nested_item_are_named_by_their_place():
    with pytest.raises(ConfigError, match=r"^policy card: field 'horizon' is required \(\?\?\?\)"):
        card_from_mapping({**CARD, "horizon": "???"})
    with pytest.raises(ConfigError, match=r"^campaign 't': field 'policies\[0\]\.timr_s': unknown field"):
        campaign_from_mapping({**CAMPAIGN, "policies": [{"name": "a", "card": "pi05", "timr_s": 3}]})
    with pytest.raises(ConfigError, match=r"^bench config: field 'sim\.shadow': unknown field"):
        BenchConfig.from_mapping({"type": "sim", "sim": {"shadow": True}})


def test_a_number_given_to_a_text_field_is_that_text():
    assert card_from_mapping({**CARD, "host": 10}).host == "10"
