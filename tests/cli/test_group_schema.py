"""Issue 35 step A: each group field of a command's schema is typed by its chosen option's dataclass when
Hydra composes, so a bad group key or value is Hydra's/OmegaConf's own error at the merge (reworded once,
naming the command, the key and what the group takes), and a group field the option file leaves at its
default needs no `+`.

Measured before: `composed()` returned the untyped group and the error came only after composing, from
the group's loader, naming "bench config" instead of the command."""

from __future__ import annotations

import pytest

from spabench.cli.commands import COMMANDS
from spabench.cli.main import compose, composed, main
from spabench.errors import ConfigError


@pytest.mark.parametrize("item,expected", [
    ("bench.fsp=30", "spabench demo: field 'bench.fsp': unknown field (allowed: type, robot_id, cameras, fps"),
    ("bench.fps=abc", "spabench demo: field 'bench.fps': 'abc' (allowed: an integer > 0)"),
    ("operator.timer_s=abc", "spabench demo: field 'operator.timer_s': 'abc' (allowed: a number"),
    ("suite.seed=abc", "spabench demo: field 'suite.seed': 'abc' (allowed: an integer"),
])
def test_a_bad_group_key_fails_at_hydras_merge_naming_the_command(item, expected, capsys):
    with pytest.raises(ConfigError) as raised:
        composed(COMMANDS["demo"], [item])
    assert str(raised.value).startswith(expected), raised.value
    assert main(["demo", item]) == 2
    err = capsys.readouterr().err
    assert err.count("spabench: error:") == 1 and expected in err


@pytest.mark.parametrize("item,expected", [
    ("operator.console.prot=1", "spabench console: field 'operator.console.prot': unknown field (allowed: host, port,"),
    ("operator.console.port=abc", "spabench console: field 'operator.console.port': 'abc' (allowed: an integer 0..65535)"),
])
def test_a_bad_console_key_fails_at_hydras_merge(item, expected, tmp_path):
    """The operator group's `console` section is typed by the console package's ConsoleConfig in the
    schema node. Measured before: composing passed and the error came after, from the group's loader."""
    with pytest.raises(ConfigError) as raised:
        composed(COMMANDS["console"], [f"campaign={tmp_path}", item])
    assert str(raised.value).startswith(expected), raised.value


def test_the_bench_node_is_the_class_its_type_names():
    """so101's `port` exists on an so101 bench and not on the twin."""
    assert compose(COMMANDS["demo"], ["bench=so101", "bench.port=/dev/spabench-x"]).bench.port == "/dev/spabench-x"
    with pytest.raises(ConfigError, match="field 'bench.port': unknown field"):
        composed(COMMANDS["demo"], ["bench=sim", "bench.port=/dev/spabench-x"])


def test_a_bench_type_override_points_to_the_bench_option(capsys):
    """The bench node is typed by its option file's `type:`; `bench.type=` cannot change the class.
    Measured before: "'so101' given to the 'sim' bench config (allowed: sim, so101)", as if so101 were
    allowed there."""
    assert main(["demo", "bench=sim_demo", "bench.type=so101", "--cfg", "job"]) == 2
    err = capsys.readouterr().err
    assert "field 'type': 'so101' (allowed: 'sim'" in err and "bench=<option>" in err, err


def test_a_group_field_left_at_its_default_and_a_null_mapping_need_no_plus():
    cfg = compose(COMMANDS["plan"], ["campaign=demo_twin", "out=x", "suite.seed=7", "campaign.stopping.kind=sequential",
                                     "campaign.stopping.a=scripted_compositional",
                                     "campaign.stopping.b=scripted_memorising"])
    assert cfg.suite.seed == 7
    assert cfg.campaign.stopping["kind"] == "sequential" and cfg.campaign.stopping["b"] == "scripted_memorising"
