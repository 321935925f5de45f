"""Issue 8's reproductions through the real CLI (`spabench.cli.main.main`): typed top-level keys,
campaign selection, the campaign's bench binding, per-card overrides, a lab's own config folder."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml
from tests.support.campaigns import by_alias, card_aliases, ledger_count, plan_smoke

from spabench.cli.commands import COMMANDS
from spabench.cli.main import compose, main

REPO = Path(__file__).resolve().parents[2]


def _plan(tmp_path: Path, name: str = "c", **campaign) -> Path:
    """A one-trial smoke campaign (bench kind and other fields as given), planned through the CLI."""
    return plan_smoke(tmp_path, name, **campaign)


def _attempts(campaign: Path) -> int:
    return ledger_count(campaign, "attempts")


def _events(campaign: Path) -> int:
    return ledger_count(campaign, "events")


# ---------------------------------------------------------------------------- typed top-level keys
def test_max_trials_abc_fails_before_anything_naming_the_key(tmp_path, capsys):
    campaign = _plan(tmp_path)
    capsys.readouterr()
    before = (campaign / "ledger.sqlite").read_bytes()
    assert main(["run", f"campaign={campaign}", "max_trials=abc"]) == 2
    err = capsys.readouterr().err
    assert "key 'max_trials': 'abc' (allowed: an integer >= 1, or null)" in err
    assert "Traceback" not in err and "ValueError" not in err
    assert (campaign / "ledger.sqlite").read_bytes() == before


@pytest.mark.parametrize("value", ["abc", "99999", "-1"])
def test_serve_port_is_checked_before_listening(value, capsys):
    assert main(["serve", "scripted", f"port={value}"]) == 2
    err = capsys.readouterr().err
    assert "key 'port'" in err and "allowed: an integer 0..65535" in err and "Traceback" not in err


def test_a_wrong_camera_key_lists_the_allowed_fields_without_omegaconf_internals(tmp_path, capsys):
    campaign = _plan(tmp_path)
    capsys.readouterr()
    assert main(["run", f"campaign={campaign}", "bench.cameras.wrist.widht=320"]) == 2
    err = capsys.readouterr().err
    assert "cameras.wrist.widht" in err and "allowed:" in err and "width" in err and "height" in err
    assert "reference_type" not in err and "object_type" not in err and "full_key" not in err


def test_an_unknown_top_level_key_lists_the_allowed_ones(tmp_path, capsys):
    assert main(["report", "outcomes=x.csv", f"out={tmp_path}", "bootstrapp=10"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'bootstrapp'" in err and "bootstrap" in err


# ---------------------------------------------------------------------------- campaign selection
def test_plan_takes_a_campaign_yaml_file_and_records_its_name(tmp_path):
    data = yaml.safe_load((REPO / "conf" / "campaign" / "smoke.yaml").read_text())
    data.update(name="my_campaign", seed=11)
    path = tmp_path / "my_campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "planned"
    assert main(["plan", f"campaign={path}", f"out={out}", "campaign.order=interleaved"]) == 0
    recorded = yaml.safe_load((out / "config.yaml").read_text())["campaign"]
    assert recorded["name"] == "my_campaign" and recorded["seed"] == 11 and recorded["order"] == "interleaved"


def test_plan_refuses_a_folder_and_a_missing_file(tmp_path, capsys):
    campaign = _plan(tmp_path)
    capsys.readouterr()
    assert main(["plan", f"campaign={campaign}", f"out={tmp_path / 'x'}"]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "spabench run campaign=" in err
    assert main(["plan", f"campaign={tmp_path / 'absent.yaml'}", f"out={tmp_path / 'x'}"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_folder_named_like_a_preset_is_a_folder_for_run_and_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = compose(COMMANDS["report"], ["campaign=smoke", "out=r"])
    assert cfg.campaign_dir == tmp_path / "smoke"          # the folder ./smoke, not the smoke preset
    assert main(["run", "campaign=smoke"]) == 2
    err = capsys.readouterr().err
    assert f"campaign={tmp_path / 'smoke'}: no such folder" in err
    _plan(tmp_path, "smoke")
    assert compose(COMMANDS["run"], ["campaign=smoke"]).campaign_dir == tmp_path / "smoke"


def test_run_without_a_campaign_says_which_key(capsys):
    assert main(["run"]) == 2
    assert "run: campaign=DIR is missing" in capsys.readouterr().err


# ---------------------------------------------------------------------------- bench binding
def test_run_picks_the_planned_bench_kind(tmp_path):
    robot = _plan(tmp_path, "robot", bench="so101")
    twin = _plan(tmp_path, "twin", bench="sim")
    assert compose(COMMANDS["run"], [f"campaign={robot}"]).bench.type == "so101"
    assert compose(COMMANDS["run"], [f"campaign={twin}"]).bench.type == "sim"


def test_plan_prints_the_exact_next_command(tmp_path, capsys):
    _plan(tmp_path, "robot", bench="so101")
    out = capsys.readouterr().out
    assert f"next: spabench run campaign={tmp_path / 'robot'} bench=so101 operator=terminal" in out


def test_twin_on_a_robot_campaign_is_refused_without_dry_run(tmp_path, capsys):
    robot = _plan(tmp_path, "robot", bench="so101")
    capsys.readouterr()
    before = _events(robot)
    assert main(["run", f"campaign={robot}", "bench=sim", "operator=auto"]) == 2
    out = capsys.readouterr().out
    assert "planned for bench kind 'so101'" in out and "dry_run=true" in out
    assert _attempts(robot) == 0 and _events(robot) == before


def test_robot_campaign_without_bench_argument_tries_the_robot_not_the_twin(tmp_path, capsys):
    """Acceptance: planned for so101, no bench argument, no arm attached: the SO-101 is tried (and
    fails clearly); no attempt is recorded, none on the twin. The policy server is real (the
    scripted stand-in, reached through a per-card override), so the run gets as far as the bench."""
    robot = _plan(tmp_path, "robot", bench="so101")
    capsys.readouterr()
    server, port = _scripted_server()
    with server:
        code = main(["run", f"campaign={robot}", "operator=unattended", "bench.port=/dev/spabench-no-arm",
                     *by_alias(robot, [f"cards.scripted_compositional.port={port}"])])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "/dev/spabench-no-arm" in out and "bench config field 'port'" in out
    assert _attempts(robot) == 0


def _scripted_server():
    """The scripted stand-in, already bound to a port of its own (measured before: a port found free
    by a closed probe socket, which another test's server could take before this one bound it)."""
    from spabench.policy.card import load_card
    from spabench.standins.serve import ServeScriptedConfig, build_server

    _, server = build_server(ServeScriptedConfig.from_mapping(
        {"policy": load_card("scripted_compositional"), "suite": {"root": "tasks", "hardware": "hardware"},
         "port": 0}))
    server.listen()
    return server, server.port


@pytest.mark.slow
@pytest.mark.sim
def test_a_dry_run_on_the_twin_is_marked_dry_run(tmp_path, capsys):
    pytest.importorskip("mujoco")
    robot = _plan(tmp_path, "robot", bench="so101")
    server, port = _scripted_server()
    with server:
        code = main(["run", f"campaign={robot}", "bench=sim", "operator=auto", "dry_run=true", "operator.timer_s=1",
                     "bench.cameras.wrist.width=32", "bench.cameras.wrist.height=24",
                     *by_alias(robot, [f"cards.scripted_compositional.port={port}"])])
    out = capsys.readouterr().out
    assert code == 0, out
    with sqlite3.connect(robot / "ledger.sqlite") as conn:
        rows = conn.execute("SELECT bench_kind, dry_run, bench_id FROM attempts").fetchall()
    assert len(rows) == 1 and rows[0][0] == "sim" and rows[0][1] == 1 and rows[0][2]


# ---------------------------------------------------------------------------- per-card overrides
def test_card_overrides_as_documented(tmp_path, capsys):
    from spabench.rollout.policies import load_cards

    campaign = _plan(tmp_path)
    alias = card_aliases(campaign)["scripted_compositional"]
    cfg = compose(COMMANDS["run"], [f"campaign={campaign}", f"cards.{alias}.host=10.0.0.5",
                                    f"cards.{alias}.port=9001"])
    card = load_cards(["scripted_compositional"], *_cards_of(cfg), aliases={alias: "scripted_compositional"},
                      blind=True)["scripted_compositional"]
    assert (card.host, card.port) == ("10.0.0.5", 9001)
    capsys.readouterr()
    assert main(["run", f"campaign={campaign}", f"cards.{alias}.hots=10.0.0.5"]) == 2
    out = capsys.readouterr().out
    assert f"cards.{alias}" in out and "field 'hots': unknown field" in out and "allowed:" in out and "host" in out
    assert "conf/cards" not in out and _attempts(campaign) == 0
    assert main(["run", f"campaign={campaign}", "cards.pi05.host=10.0.0.5"]) == 2
    assert "with blind aliases on, address cards by alias" in capsys.readouterr().out


# ---------------------------------------------------------------------------- a lab's own folder
def test_config_dir_holds_the_labs_bench_policy_and_campaign(tmp_path, capsys):
    lab = tmp_path / "lab"
    for group in ("bench", "policy", "campaign"):
        (lab / group).mkdir(parents=True)
    bench = yaml.safe_load((REPO / "conf" / "bench" / "so101.yaml").read_text())
    bench.update(port="/dev/ttyLAB0", calibration_dir=str(tmp_path / "calib"))
    (lab / "bench" / "so101.yaml").write_text(yaml.safe_dump(bench))    # shadows the checkout's so101
    card = yaml.safe_load((REPO / "conf" / "policy" / "scripted_compositional.yaml").read_text())
    card.update(name="lab_policy", host="10.9.9.9")
    (lab / "policy" / "lab_policy.yaml").write_text(yaml.safe_dump(card))
    campaign = yaml.safe_load((REPO / "conf" / "campaign" / "smoke.yaml").read_text())
    campaign.update(name="lab_campaign", bench="so101",
                    policies=[{"name": "lab_policy", "card": "lab_policy", "timer_s": 20.0}])
    (lab / "campaign" / "lab_campaign.yaml").write_text(yaml.safe_dump(campaign))

    out = tmp_path / "planned"
    assert main(["plan", "campaign=lab_campaign", f"config_dir={lab}", f"out={out}"]) == 0
    assert f"config_dir={lab}" in capsys.readouterr().out
    cfg = compose(COMMANDS["run"], [f"campaign={out}", f"config_dir={lab}"])
    assert cfg.bench.port == "/dev/ttyLAB0" and cfg.config_dir == lab
    from spabench.rollout.policies import load_cards

    assert load_cards(["lab_policy"], *_cards_of(cfg))["lab_policy"].host == "10.9.9.9"
    assert main(["plan", "campaign=lab_campaign", f"out={tmp_path / 'y'}"]) == 2  # not without config_dir
    assert "no campaign preset" in capsys.readouterr().err
    assert main(["plan", "campaign=smoke", f"config_dir={tmp_path / 'nope'}", f"out={tmp_path / 'z'}"]) == 2
    assert "not a folder" in capsys.readouterr().err


# ---------------------------------------------------------------------------- help and listings
@pytest.mark.parametrize("group", ["serve", "suite", "export"])
def test_a_group_alone_lists_its_subcommands(group, capsys):
    assert main([group]) == 0
    out = capsys.readouterr().out
    assert "unknown command" not in out and "subcommands:" in out
    assert all(name in out for name in COMMANDS if name.startswith(group + " "))


def test_help_lists_options_with_defaults(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "max_trials" in out and "[null]" in out and "dry_run" in out and "[false]" in out
    assert "operator" in out and "terminal" in out and "campaign" in out
    assert "e-stop" in out and "abort" in out            # the bench keys
    assert main(["serve", "scripted", "--help"]) == 0
    out = capsys.readouterr().out
    assert "port" in out and "mode" in out and "[null]" in out and "state_blind" in out
    assert main(["serve", "scripted", "mode=clever"]) == 2
    # the command named, the declared choices (measured before: "conf/config.yaml: key 'mode'", a file it never read)
    assert "spabench serve scripted: key 'mode': 'clever' (allowed: compositional | memorising | state_blind, or null)" \
        in capsys.readouterr().err


# ---------------------------------------------------------------------------- report never pools
def _mixed_campaign(tmp_path: Path, kinds: list[tuple[str, bool]]) -> Path:
    from tests.integration.harness import trial_rows

    from spabench.ledger import Ledger

    campaign = tmp_path / "mixed"
    campaign.mkdir()
    with Ledger.create(campaign / "ledger.sqlite", trial_rows(len(kinds)), "h", {"campaign": "mixed"}) as ledger:
        for i, (kind, dry) in enumerate(kinds):
            a = ledger.begin_attempt(f"E{i:04d}-P1", bench_kind=kind, bench_id="b1", dry_run=dry)
            ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
            ledger.record_score(a, "operator", i % 2 == 0)
    return campaign


def test_report_refuses_to_pool_twin_and_robot_rollouts(tmp_path, capsys):
    campaign = _mixed_campaign(tmp_path, [("so101", False), ("so101", False), ("sim", False), ("sim", True)])
    assert main(["report", f"campaign={campaign}", f"out={tmp_path / 'r'}", "bootstrap=10"]) == 2
    err = capsys.readouterr().err
    assert "more than one bench kind" in err and "2 on the SO-101 robot (so101)" in err and "1 on the MuJoCo twin" in err
    assert "bench_kind=sim or bench_kind=so101" in err and not (tmp_path / "r").exists()
    assert main(["report", f"campaign={campaign}", f"out={tmp_path / 'r'}", "bootstrap=10", "bench_kind=so101"]) == 0
    out = capsys.readouterr().out
    assert "1 dry-run rollout(s) (dry_run=true) not counted" in out and "SO-101 robot rollouts only" in out
    assert "report: 2 rollouts" in out


def test_report_leaves_dry_runs_out_of_a_robot_campaign(tmp_path, capsys):
    campaign = _mixed_campaign(tmp_path, [("so101", False), ("so101", False), ("sim", True)])
    assert main(["report", f"campaign={campaign}", f"out={tmp_path / 'r'}", "bootstrap=10"]) == 0
    out = capsys.readouterr().out
    assert "1 dry-run rollout(s) (dry_run=true) not counted" in out and "report: 2 rollouts" in out


def _cards_of(cfg):
    """What `run` passes load_cards: the per-card overrides and where the card files are."""
    return cfg.cards, cfg.group_dirs("policy")
