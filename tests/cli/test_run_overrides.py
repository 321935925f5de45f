"""Issue 17: per-policy settings at `run`, the operator a robot campaign defaults to, `dry_run` on any bench.

Measured on main before: `run campaign=DIR policy=pi05 policy.port=27422` was accepted and connected to
the card's own address; `cards.<card>.timer_s` at run was accepted and ignored; with aliases on,
`cards.P3.port=` was refused; a robot campaign without `operator=` ran with `auto` (no checklist, no
gate); `dry_run=true` on the planned bench kind was ignored.
"""

from __future__ import annotations

import csv
import io
import socket
import sqlite3
import sys
from pathlib import Path

import pytest
from tests.support.campaigns import plan_smoke

from spabench.cli.commands import COMMANDS
from spabench.cli.main import compose, main

TWO = [{"name": "scripted_compositional", "card": "scripted_compositional", "timer_s": 20.0},
       {"name": "scripted_memorising", "card": "scripted_memorising", "timer_s": 20.0}]
NAMES = ("scripted_compositional", "scripted_memorising")


_plan = plan_smoke


def _aliases(campaign: Path) -> dict[str, str]:
    """card -> alias, as plan.csv records them."""
    with open(campaign / "plan.csv", newline="") as fh:
        return {row["card"]: row["alias"] for row in csv.DictReader(fh)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(card_name: str, mode: str):
    from spabench.policy.card import load_card
    from spabench.standins.serve import ServeScriptedConfig, build_server

    port = _free_port()
    _, server = build_server(ServeScriptedConfig.from_mapping(
        {"policy": load_card(card_name), "suite": {"root": "tasks", "hardware": "hardware"}, "port": port,
         "mode": mode}))
    return server, port


def _attempts(campaign: Path) -> list[tuple]:
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:
        return conn.execute("SELECT bench_kind, dry_run FROM attempts").fetchall()


def test_policy_port_on_a_multi_card_campaign_names_the_replacement(tmp_path, capsys):
    campaign = _plan(tmp_path, policies=TWO)
    aliases = _aliases(campaign)
    capsys.readouterr()
    for args in (["policy.port=27422"], ["policy=scripted_compositional", "policy.port=27422"]):
        assert main(["run", f"campaign={campaign}", *args]) == 2
        err = capsys.readouterr().err
        assert "cards." in err and not any(n in err for n in NAMES), err
    assert main(["run", f"campaign={campaign}", "policy.port=27422"]) == 2
    err = capsys.readouterr().err
    assert all(f"cards.{a}.port=27422" in err for a in aliases.values())
    assert _attempts(campaign) == []


def test_policy_fields_on_a_single_card_campaign_go_to_its_card(tmp_path):
    from spabench.rollout.policies import load_cards

    campaign = _plan(tmp_path)
    cfg = compose(COMMANDS["run"], [f"campaign={campaign}", "policy.port=27422", "policy.host=10.0.0.7"])
    alias = _aliases(campaign)["scripted_compositional"]
    card = load_cards(["scripted_compositional"], *_cards_of(cfg), aliases={alias: "scripted_compositional"})
    assert (card["scripted_compositional"].port, card["scripted_compositional"].host) == (27422, "10.0.0.7")


@pytest.mark.parametrize("field", ["timer_s", "control_hz"])
def test_planned_values_are_refused_at_run_with_a_pointer_to_plan(tmp_path, field, capsys):
    campaign = _plan(tmp_path)
    capsys.readouterr()
    for item in (f"cards.scripted_compositional.{field}=5", f"policy.{field}=5"):
        assert main(["run", f"campaign={campaign}", item]) == 2
        err = capsys.readouterr().err
        assert "is planned" in err and "spabench plan" in err


@pytest.mark.slow
@pytest.mark.bench
def test_cards_by_alias_connect_that_server_and_print_no_policy_name(tmp_path, capsys):
    """With aliases on, `cards.P2.port=N` routes P2 to N: a dead port is reported under the alias (and
    nothing is recorded), the right ports complete both trials; no output names a policy."""
    pytest.importorskip("mujoco")
    campaign = _plan(tmp_path, policies=[{**p, "timer_s": 1.0} for p in TWO], bench="sim")
    aliases = _aliases(campaign)
    a1, a2 = aliases["scripted_compositional"], aliases["scripted_memorising"]
    s1, p1 = _server("scripted_compositional", "compositional")
    s2, p2 = _server("scripted_memorising", "memorising")
    dead = _free_port()
    small = ["bench.cameras.wrist.width=32", "bench.cameras.wrist.height=24"]
    capsys.readouterr()
    with s1, s2:
        code = main(["run", f"campaign={campaign}", f"cards.{a1}.port={p1}", f"cards.{a2}.port={dead}", *small])
        out = capsys.readouterr()
        assert code != 0 and f"{a2}" in out.out and str(dead) in out.out
        assert not any(n in out.out + out.err for n in NAMES)
        assert _attempts(campaign) == []
        code = main(["run", f"campaign={campaign}", f"cards.{a1}.port={p1}", f"cards.{a2}.port={p2}",
                     "dry_run=true", *small])
        out = capsys.readouterr()
    assert code == 0, out.out
    assert not any(n in out.out for n in NAMES)
    # dry_run=true on the planned bench kind is honoured: both attempts are marked and kept out
    assert _attempts(campaign) == [("sim", 1), ("sim", 1)]


def test_a_robot_campaign_defaults_to_the_terminal_operator(tmp_path, capsys, monkeypatch):
    """Emulated SO-101 (real LeRobot SO101Follower on the emulated Feetech bus), no `operator=`: the
    checklist and the scene-ready gate are shown; `q` at the gate ends the session before any attempt."""
    pytest.importorskip("lerobot")
    from tests.support.feetech_bus import EmulatedBus

    campaign = _plan(tmp_path, bench="so101")
    alias = _aliases(campaign)["scripted_compositional"]
    assert compose(COMMANDS["run"], [f"campaign={campaign}", "bench.port=/dev/x"]).operator.type == "terminal"
    server, port = _server("scripted_compositional", "compositional")
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ada\nq\n"))   # the rater's name, then q at the gate
    capsys.readouterr()
    with EmulatedBus() as bus, server:
        code = main(["run", f"campaign={campaign}", "bench=so101_emulated", f"bench.port={bus.port}",
                     f"cards.{alias}.port={port}", "bench.home_speed_deg_s=120"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Scene ready?" in out and "[ ] Clear the table" in out, out
    assert _attempts(campaign) == []


def test_auto_is_refused_on_a_robot_bench(tmp_path, capsys):
    campaign = _plan(tmp_path, bench="so101")
    capsys.readouterr()
    assert main(["run", f"campaign={campaign}", "operator=auto", "bench.port=/dev/spabench-no-arm"]) == 2
    assert "runs only on the twin" in capsys.readouterr().out
    assert _attempts(campaign) == []


def test_run_help_states_one_operator_default():
    from spabench.cli.main import command_help

    text = command_help(COMMANDS["run"])
    assert "default auto" not in text
    assert "operator  default terminal on a robot campaign, auto on the twin" in text


def _cards_of(cfg):
    """What `run` passes load_cards: the per-card overrides and where the card files are."""
    return cfg.cards, cfg.group_dirs("policy")
