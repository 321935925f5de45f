"""Each command's own config: OmegaConf's struct checks, the declared ranges, the groups as typed objects."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from spabench.analysis.commands import ReportConfig
from spabench.bench.config import BenchConfig
from spabench.cli.commands import COMMANDS
from spabench.config import CommandConfig
from spabench.errors import ConfigError
from spabench.operator.commands import ScoreConfig
from spabench.operator.config import OperatorConfig
from spabench.rollout.commands import RunConfig
from spabench.standins.serve import ServeScriptedConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_declares_a_schema_omegaconf_can_type(name):
    """The schema is a CommandConfig whose every field OmegaConf can type (so Hydra composes into it),
    with one line of help per key, named after its command."""
    schema = COMMANDS[name].schema
    assert issubclass(schema, CommandConfig) and schema.command == name
    OmegaConf.structured(schema)
    for f in dataclasses.fields(schema):
        assert f.metadata.get("help"), f"{name}: {f.name} has no help"


@pytest.mark.parametrize("schema,key,value,allowed", [
    (RunConfig, "max_trials", "abc", "allowed: an integer >= 1, or null"),
    (ServeScriptedConfig, "port", 99999, "allowed: an integer 0..65535, or null"),
    (ServeScriptedConfig, "seed", -1, "allowed: an integer >= 0"),
    (ReportConfig, "bootstrap", 1.5, "allowed: an integer >= 1"),
    (RunConfig, "dry_run", "maybe", "allowed: true | false"),
    (RunConfig, "max_trials", 0, "allowed: an integer >= 1, or null"),
    (ServeScriptedConfig, "grasp_noise_cm", float("nan"), "allowed: a number >= 0"),
    (ReportConfig, "bench_kind", "robot", "allowed: so101 | sim, or null"),
])
def test_a_bad_value_names_the_command_the_key_and_what_is_allowed(schema, key, value, allowed):
    with pytest.raises(ConfigError) as info:
        schema.from_mapping({key: value})
    text = str(info.value)
    assert text.startswith(f"spabench {schema.command}: key '{key}': {repr(value)[:3]}") and allowed in text, text


def test_the_operator_groups_console_section_is_checked_when_the_group_is_built():
    """The console types operator.console (spabench.console.config); the operator package does not
    import it, so the command's config checks the section: a bad or unknown field fails before any run."""
    with pytest.raises(ConfigError, match=r"operator.console: field 'stream_hz': 0"):
        RunConfig.from_mapping({"operator": {"type": "web", "console": {"stream_hz": 0}}})
    with pytest.raises(ConfigError, match=r"operator.console.*strem_hz"):
        RunConfig.from_mapping({"operator": {"console": {"strem_hz": 8}}})
    cfg = RunConfig.from_mapping({"operator": {"console": {"port": 0}}})
    assert cfg.operator.console == {"port": 0}


def test_a_key_the_command_does_not_read_is_refused_naming_what_it_accepts():
    with pytest.raises(ConfigError, match=r"spabench score: unknown key 'max_trials'\. It accepts: keys .*attempt"):
        ScoreConfig.from_mapping({"max_trials": 3})
    with pytest.raises(ConfigError, match=r"spabench report: 'bench' is not accepted: it reads no 'bench' group"):
        ReportConfig.from_mapping({"bench": {"type": "sim"}})


def test_groups_become_their_typed_objects_and_groups_not_given_stay_none():
    bench = yaml.safe_load((REPO / "conf" / "bench" / "sim.yaml").read_text())
    cfg = RunConfig.from_mapping({"bench": bench, "operator": {"type": "auto"}, "max_trials": 2})
    assert isinstance(cfg.bench, BenchConfig) and isinstance(cfg.operator, OperatorConfig)
    assert cfg.max_trials == 2 and cfg.suite is None
    with pytest.raises(ConfigError, match="config group 'suite' was not loaded"):
        cfg.need("suite")


def test_card_overrides_are_mappings():
    with pytest.raises(ConfigError, match=r"spabench run: key 'cards\.pi05': '10\.0\.0\.5'"):
        RunConfig.from_mapping({"cards": {"pi05": "10.0.0.5"}})
    cfg = RunConfig.from_mapping({"cards": {"pi05": {"host": "10.0.0.5"}}})
    assert cfg.cards == {"pi05": {"host": "10.0.0.5"}}


def test_paths_are_absolute_from_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = ReportConfig.from_mapping({"out": "rel", "campaign_dir": "~/c"})
    assert cfg.out == tmp_path / "rel" and cfg.campaign_dir == Path.home() / "c"
