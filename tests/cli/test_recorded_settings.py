"""Issue 17: what a campaign was planned with is recorded and reused (the lab's config_dir, the suite's
folders), folders given on the command line are taken from the working directory, and `score`
names its rater.

Measured on main before: config_dir was not recorded (forgetting it at `run` silently used the
checkout's card), `suite.root=` was relative to the checkout while `out=` was relative to the working
directory, and `score operator.rater=NAME` was ignored unless operator=terminal was also given."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from tests.support.campaigns import plan_smoke

from spabench.cli.commands import COMMANDS
from spabench.cli.main import compose, main
from spabench.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _lab(tmp_path: Path) -> Path:
    lab = tmp_path / "lab"
    for group in ("policy", "campaign"):
        (lab / group).mkdir(parents=True)
    card = yaml.safe_load((REPO / "conf" / "policy" / "scripted_compositional.yaml").read_text())
    card.update(name="lab_policy", host="10.9.9.9")
    (lab / "policy" / "lab_policy.yaml").write_text(yaml.safe_dump(card))
    campaign = yaml.safe_load((REPO / "conf" / "campaign" / "smoke.yaml").read_text())
    campaign.update(name="lab_campaign", bench="sim", policies=[{"name": "lab_policy", "card": "lab_policy"}])
    (lab / "campaign" / "lab_campaign.yaml").write_text(yaml.safe_dump(campaign))
    return lab


def test_config_dir_is_recorded_and_reused(tmp_path):
    from spabench.rollout.policies import load_cards

    lab = _lab(tmp_path)
    out = tmp_path / "planned"
    assert main(["plan", "campaign=lab_campaign", f"config_dir={lab}", f"out={out}"]) == 0
    cfg = compose(COMMANDS["run"], [f"campaign={out}"])          # config_dir not given again
    assert cfg.config_dir == lab
    assert load_cards(["lab_policy"], *_cards_of(cfg))["lab_policy"].host == "10.9.9.9"
    shutil.rmtree(lab)
    with pytest.raises(ConfigError, match="planned with config_dir=.*give the lab's folder"):
        compose(COMMANDS["run"], [f"campaign={out}"])


def test_suite_folders_are_from_the_working_directory_and_recorded(tmp_path, monkeypatch):
    shutil.copytree(REPO / "tasks", tmp_path / "my_tasks")
    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load((REPO / "conf" / "campaign" / "smoke.yaml").read_text())
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**data, "bench": "sim"}))
    assert main(["plan", "campaign=c.yaml", "out=planned", "suite.root=my_tasks",
                 f"suite.hardware={REPO / 'hardware'}"]) == 0
    recorded = yaml.safe_load((tmp_path / "planned" / "config.yaml").read_text())["suite"]
    assert recorded["root"] == str(tmp_path / "my_tasks")
    cfg = compose(COMMANDS["run"], ["campaign=planned"])
    assert cfg.suite.root == str(tmp_path / "my_tasks")


def test_score_names_its_rater(tmp_path):
    campaign = plan_smoke(tmp_path)
    cfg = compose(COMMANDS["score"], [f"campaign={campaign}", "operator.rater=alice"])
    assert (cfg.operator.type, cfg.operator.rater) == ("terminal", "alice")


def test_a_lab_card_with_defaults_and_env_is_read_by_plan_and_run(tmp_path, monkeypatch):
    """Measured before: a lab card using Hydra `defaults:` or `${oc.env:VAR}` worked for `serve
    scripted`, was refused by `plan` and crashed `run` with a traceback. One loader now reads it."""
    from spabench.rollout.policies import load_cards

    lab = _lab(tmp_path)
    (lab / "policy" / "lab_pi.yaml").write_text("defaults:\n  - pi05\n  - _self_\nname: lab_pi\n"
                                                "host: ${oc.env:SPABENCH_TEST_GPU,10.1.1.1}\n")
    campaign = yaml.safe_load((lab / "campaign" / "lab_campaign.yaml").read_text())
    campaign.update(name="lab_pi_campaign", policies=[{"name": "lab_pi", "card": "lab_pi"}])
    (lab / "campaign" / "lab_pi_campaign.yaml").write_text(yaml.safe_dump(campaign))
    monkeypatch.setenv("SPABENCH_TEST_GPU", "10.7.7.7")
    out = tmp_path / "planned"
    assert main(["plan", "campaign=lab_pi_campaign", f"config_dir={lab}", f"out={out}"]) == 0
    card = load_cards(["lab_pi"], *_cards_of(compose(COMMANDS["run"], [f"campaign={out}"])))["lab_pi"]
    assert (card.host, card.protocol, card.horizon) == ("10.7.7.7", "openpi", 50)   # pi05's fields, lab's host


def _cards_of(cfg):
    """What `run` passes load_cards: the per-card overrides and where the card files are."""
    return cfg.cards, cfg.group_dirs("policy")
