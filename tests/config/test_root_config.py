"""The typed root config: every top-level key validated, the groups built into their dataclasses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spabench.bench.config import BenchConfig
from spabench.config import SpabenchConfig, top_level_keys
from spabench.errors import ConfigError
from spabench.operator.config import OperatorConfig

REPO = Path(__file__).resolve().parents[2]


def test_conf_config_yaml_and_the_typed_root_agree():
    """Each top-level key is declared once as a typed field and listed in conf/config.yaml with the same default."""
    data = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())
    data.pop("defaults")
    keys = top_level_keys()
    assert list(data) == list(keys)
    for name, (default, _) in keys.items():
        assert data[name] == default, name
    assert SpabenchConfig.from_mapping(data).max_trials is None


@pytest.mark.parametrize("key,value,allowed", [
    ("max_trials", "abc", "an integer >= 1, or null"),
    ("port", "abc", "an integer 0..65535, or null"),
    ("port", 99999, "an integer 0..65535, or null"),
    ("seed", -1, "an integer >= 0"),
    ("bootstrap", 1.5, "an integer >= 1"),
    ("dry_run", "yes", "true | false"),
    ("max_trials", 0, "an integer >= 1, or null"),
    ("grasp_noise_cm", float("nan"), "a number >= 0"),
])
def test_a_bad_top_level_value_names_key_value_and_allowed(key, value, allowed):
    with pytest.raises(ConfigError) as info:
        SpabenchConfig.from_mapping({key: value})
    text = str(info.value)
    assert f"key '{key}'" in text and repr(value)[:10] in text and f"allowed: {allowed}" in text


def test_the_operator_groups_console_section_is_checked_when_the_group_is_built():
    """The console types operator.console (spabench.console.config); the operator package does not
    import it, so the root config checks the section: a bad or unknown field fails before any run."""
    with pytest.raises(ConfigError, match=r"operator.console, field 'stream_hz': 0"):
        SpabenchConfig.from_mapping({"operator": {"type": "web", "console": {"stream_hz": 0}}}, groups=("operator",))
    with pytest.raises(ConfigError, match=r"operator.console.*strem_hz"):
        SpabenchConfig.from_mapping({"operator": {"console": {"strem_hz": 8}}}, groups=("operator",))
    cfg = SpabenchConfig.from_mapping({"operator": {"console": {"port": 0}}}, groups=("operator",))
    assert cfg.operator.console == {"port": 0}


def test_unknown_top_level_key_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"unknown key 'max_trial'.*max_trials.*config groups: bench"):
        SpabenchConfig.from_mapping({"max_trial": 3})


def test_groups_become_their_typed_objects_and_unread_groups_stay_none():
    bench = yaml.safe_load((REPO / "conf" / "bench" / "sim.yaml").read_text())
    cfg = SpabenchConfig.from_mapping({"bench": bench, "operator": {"type": "auto"}, "max_trials": 2},
                                      groups=("bench", "operator"))
    assert isinstance(cfg.bench, BenchConfig) and isinstance(cfg.operator, OperatorConfig)
    assert cfg.max_trials == 2 and cfg.policy is None and cfg.campaign is None
    with pytest.raises(ConfigError, match="config group 'suite' is not set"):
        SpabenchConfig.from_mapping({"bench": bench}, groups=("bench", "suite"))


def test_card_overrides_are_mappings():
    with pytest.raises(ConfigError, match=r"key 'cards.pi05': '10.0.0.5' \(allowed: a mapping of card fields"):
        SpabenchConfig.from_mapping({"cards": {"pi05": "10.0.0.5"}})
    cfg = SpabenchConfig.from_mapping({"cards": {"pi05": {"host": "10.0.0.5"}}})
    assert cfg.cards == {"pi05": {"host": "10.0.0.5"}}


def test_paths_are_absolute_from_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = SpabenchConfig.from_mapping({"out": "rel", "campaign_dir": "~/c"})
    assert cfg.out == tmp_path / "rel" and cfg.campaign_dir == Path.home() / "c"


def test_replace_validates_like_from_mapping():
    cfg = SpabenchConfig.from_mapping({})
    assert cfg.replace(max_trials=3).max_trials == 3
    with pytest.raises(ConfigError, match="max_trials"):
        cfg.replace(max_trials="x")
