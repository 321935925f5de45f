"""Issue 35: one loader for every file a lab brings. A campaign given as `campaign=FILE.yaml`, a lab's
bench, campaign or card in `config_dir=DIR` are all composed the way Hydra composes `conf/`, so a
`defaults:` list works in each and what a command decides from a file sees its inherited values.

Measured before: `plan campaign=FILE.yaml` with `defaults: [smoke, _self_]` was refused with
"conf/campaign/FILE.yaml: field 'defaults': unknown field" (a conf/ path that does not exist; the
same file as DIR/campaign/FILE.yaml planned), and a lab bench `defaults: [sim_demo, _self_]`
(type: sim by inheritance) got operator=terminal at `run` instead of the twin's auto."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.support.campaigns import plan_smoke

from spabench.cli.commands import COMMANDS
from spabench.cli.main import compose, main
from spabench.errors import ConfigError
from spabench.plan.planner import read_plan_csv


def _planned(folder: Path) -> dict:
    return yaml.safe_load((folder / "config.yaml").read_text())["campaign"]


@pytest.mark.parametrize("preset", ["smoke", "/campaign/smoke@_here_"])   # relative, or Hydra's absolute form
def test_a_campaign_file_with_a_defaults_list_plans_as_the_same_file_in_a_lab_folder(tmp_path, preset):
    text = f"defaults:\n  - {preset}\n  - _self_\nname: lab_pilot\nseed: 7\n"
    (tmp_path / "pilot.yaml").write_text(text)
    (tmp_path / "lab" / "campaign").mkdir(parents=True)
    (tmp_path / "lab" / "campaign" / "lab_pilot.yaml").write_text(text)
    as_file, as_option = tmp_path / "as_file", tmp_path / "as_option"
    assert main(["plan", f"campaign={tmp_path / 'pilot.yaml'}", f"out={as_file}"]) == 0
    assert main(["plan", "campaign=lab_pilot", f"config_dir={tmp_path / 'lab'}", f"out={as_option}"]) == 0
    smoke = yaml.safe_load((Path("conf") / "campaign" / "smoke.yaml").read_text())
    planned = _planned(as_file)
    assert (planned["name"], planned["seed"]) == ("lab_pilot", 7)                  # the file's own values
    assert [(p["card"], p["timer_s"]) for p in planned["policies"]] == [   # smoke's, inherited
        (p["card"], p["timer_s"]) for p in smoke["policies"]]
    assert planned == _planned(as_option)
    # the caller's campaign.* keys still win over the file's and its defaults'
    again = tmp_path / "again"
    assert main(["plan", f"campaign={tmp_path / 'pilot.yaml'}", "campaign.seed=9", "campaign.order=interleaved",
                 f"out={again}"]) == 0
    assert (_planned(again)["seed"], _planned(again)["order"]) == (9, "interleaved")


def test_a_campaign_file_without_a_name_is_named_after_the_file_and_a_bad_field_names_the_file(tmp_path, capsys):
    campaign = plan_smoke(tmp_path, name="nameless")   # smoke.yaml's fields, written out with its name
    data = yaml.safe_load((tmp_path / "nameless.yaml").read_text())
    data.pop("name")
    (tmp_path / "my_pilot.yaml").write_text(yaml.safe_dump(data))
    assert main(["plan", f"campaign={tmp_path / 'my_pilot.yaml'}", f"out={tmp_path / 'p'}"]) == 0
    assert _planned(tmp_path / "p")["name"] == "my_pilot" and campaign.is_dir()
    (tmp_path / "bad.yaml").write_text("defaults: [smoke, _self_]\ncolour: red\n")
    capsys.readouterr()
    assert main(["plan", f"campaign={tmp_path / 'bad.yaml'}", f"out={tmp_path / 'b'}"]) == 2
    said = "".join(capsys.readouterr())
    assert "colour" in said and "defaults" not in said and "conf/campaign/bad.yaml" not in said, said
    assert not (tmp_path / "b").exists()
    (tmp_path / "missing.yaml").write_text("defaults: [no_such_preset, _self_]\n")
    with pytest.raises(ConfigError, match="no_such_preset"):
        compose(COMMANDS["plan"], [f"campaign={tmp_path / 'missing.yaml'}"])


def test_a_lab_bench_inheriting_the_twin_gets_the_twins_operator(tmp_path):
    lab = tmp_path / "lab"
    (lab / "bench").mkdir(parents=True)
    (lab / "bench" / "mybench.yaml").write_text("defaults: [sim_demo, _self_]\nhome_speed_deg_s: 50.0\n")
    campaign = plan_smoke(tmp_path)   # a twin campaign
    cfg = compose(COMMANDS["run"], [f"campaign={campaign}", "bench=mybench", f"config_dir={lab}"])
    assert (cfg.bench.type, cfg.bench.home_speed_deg_s) == ("sim", 50.0)
    assert cfg.operator.type == "auto"
    # a lab bench inheriting the robot keeps the person at the robot
    (lab / "bench" / "myarm.yaml").write_text("defaults: [so101, _self_]\nport: /dev/ttyLAB0\n")
    cfg = compose(COMMANDS["run"], [f"campaign={campaign}", "bench=myarm", f"config_dir={lab}", "dry_run=true"])
    assert (cfg.bench.type, cfg.operator.type) == ("so101", "terminal")


def test_a_lab_card_inheriting_a_shipped_card_is_planned_from_a_campaign_file(tmp_path):
    lab = tmp_path / "lab"
    (lab / "policy").mkdir(parents=True)
    (lab / "policy" / "lab_card.yaml").write_text("defaults: [scripted_compositional, _self_]\n"
                                                 "name: lab_card\ntimer_s: 7\n")
    (tmp_path / "pilot.yaml").write_text("defaults: [smoke, _self_]\npolicies:\n  - {name: lab_card, card: lab_card}\n")
    out = tmp_path / "planned"
    assert main(["plan", f"campaign={tmp_path / 'pilot.yaml'}", f"config_dir={lab}", f"out={out}"]) == 0
    rows = read_plan_csv(out / "plan.csv")
    assert rows and {(r.card, r.timer_s, r.control_hz) for r in rows} == {("lab_card", 7.0, 30.0)}
