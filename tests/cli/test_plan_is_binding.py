"""Issue 35: what the plan binds at `run`, and what a run may change without spending a trial.

Measured on main before: `run dry_run=true` on the planned bench used up the trials (the counted run then
said every trial had a complete attempt, and the report dropped the dry runs as "run on a bench of another
kind"); raising the arm envelope's table_margin_cm in hardware/bench.yaml after planning changed the
campaign hash, so the campaign could never resume.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.support.campaigns import ledger_count, plan_smoke
from tests.support.cli_servers import cli_server

from spabench.cli.main import main

TWO = [{"name": "scripted_compositional", "card": "scripted_compositional", "timer_s": 1.0},
       {"name": "scripted_memorising", "card": "scripted_memorising", "timer_s": 1.0}]
SMALL = ["bench.cameras.wrist.width=32", "bench.cameras.wrist.height=24"]


def _server(tmp_path: Path, card_name: str):
    """`spabench serve scripted policy=<card>` in a subprocess (the stand-in that card names); yields its port."""
    return cli_server("scripted", f"policy={card_name}", log=tmp_path / f"{card_name}.log")


def _cards(campaign: Path, ports: dict[str, int]) -> list[str]:
    """cards.<alias>.port=N for each planned card (aliases on: a card is addressed by its alias)."""
    import csv

    with open(campaign / "plan.csv", newline="") as fh:
        aliases = {row["card"]: row["alias"] for row in csv.DictReader(fh)}
    return [f"cards.{aliases[card]}.port={port}" for card, port in ports.items()]


def _said(capsys) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


def _attempts(campaign: Path) -> list[tuple]:
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:
        return conn.execute("SELECT trial_id, status, dry_run FROM attempts ORDER BY attempt_id").fetchall()


@pytest.mark.slow
@pytest.mark.bench
def test_a_dry_run_on_the_planned_bench_spends_no_trial_and_is_reported_as_a_dry_run(tmp_path, capsys):
    """On the twin (the planned bench): a dry run runs each trial once and leaves it pending; the counted
    run then runs every trial again; the report counts only the counted rollouts and lists the dry runs
    by themselves (never as 'a bench of another kind')."""
    pytest.importorskip("mujoco")
    campaign = plan_smoke(tmp_path, policies=TWO, bench="sim")
    with _server(tmp_path, "scripted_compositional") as p1, _server(tmp_path, "scripted_memorising") as p2:
        cards = _cards(campaign, {"scripted_compositional": p1, "scripted_memorising": p2})
        capsys.readouterr()
        assert main(["run", f"campaign={campaign}", "dry_run=true", *cards, *SMALL]) == 0
        out = capsys.readouterr().out
        assert "every trial has a complete attempt" not in out, out
        dry = _attempts(campaign)
        assert [(s, d) for _, s, d in dry] == [("complete", 1), ("complete", 1)], dry
        # the progress and the export say what the dry runs are: nothing counted, none a result
        assert main(["ledger", "status", f"campaign={campaign}"]) == 0
        said = capsys.readouterr().out
        assert "0/2 trials complete" in said and "2 dry-run attempt(s) (dry_run=true: not counted" in said, said
        assert main(["export", "outcomes", f"campaign={campaign}", f"out={tmp_path / 'o.csv'}"]) == 2
        said = _said(capsys)
        assert "no scored rollout to export" in said and "2 dry-run rollout(s) left out" in said, said
        assert main(["run", f"campaign={campaign}", *cards, *SMALL]) == 0
        out = capsys.readouterr().out
    counted = [a for a in _attempts(campaign) if a[2] == 0]
    assert sorted(t for t, s, _ in counted if s == "complete") == sorted(t for t, _, _ in dry), out
    assert main(["report", f"campaign={campaign}", f"out={tmp_path / 'r'}"]) == 0
    said = capsys.readouterr().out
    assert "another kind" not in said and "2 dry-run rollout(s)" in said, said
    assert "report: 2 rollouts" in said, said
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Dry runs (not counted)" in md and "2 rollout(s) were dry runs" in md
    assert len((tmp_path / "r" / "dry_runs.csv").read_text().strip().splitlines()) == 3


@pytest.mark.slow
@pytest.mark.bench
def test_a_safety_limit_raised_after_planning_is_recorded_and_reported_not_refused(tmp_path, capsys):
    """The campaign's bench.yaml gets a higher table_margin_cm after planning: the run resumes, the ledger
    records the change (old and new values) once, and the report shows it. A change of the geometry
    (not a safety limit) still refuses the campaign."""
    import json
    import shutil

    import yaml

    pytest.importorskip("mujoco")
    hardware = tmp_path / "hardware"
    shutil.copytree(Path(__file__).resolve().parents[2] / "hardware", hardware)
    from spabench.cli.main import main as cli

    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "campaign" / "smoke.yaml").read_text())
    spec.update(policies=TWO[:1], bench="sim")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    campaign = tmp_path / "c"
    assert cli(["plan", f"campaign={tmp_path / 'c.yaml'}", f"out={campaign}", f"suite.hardware={hardware}"]) == 0
    bench_yaml = hardware / "bench.yaml"
    bench_yaml.write_text(bench_yaml.read_text().replace("table_margin_cm: 0.5 ", "table_margin_cm: 2.0 "))
    assert "table_margin_cm: 2.0 " in bench_yaml.read_text()
    with _server(tmp_path, "scripted_compositional") as port:
        capsys.readouterr()
        code = cli(["run", f"campaign={campaign}", *_cards(campaign, {"scripted_compositional": port}), *SMALL])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "table_margin_cm 0.5 -> 2.0" in out, out
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:
        events = [json.loads(p) for (p,) in conn.execute(
            "SELECT payload FROM events WHERE kind = 'safety_limits_changed'")]
        complete = conn.execute("SELECT COUNT(*) FROM attempts WHERE status = 'complete'").fetchone()[0]
    assert complete == 1 and len(events) == 1, events
    assert events[0]["changed"] == {"table_margin_cm": [0.5, 2.0]}
    assert events[0]["old"]["table_margin_cm"] == 0.5 and events[0]["new"]["table_margin_cm"] == 2.0
    assert cli(["report", f"campaign={campaign}", f"out={tmp_path / 'r'}"]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Safety limits changed during the campaign" in md and "| table_margin_cm | 0.5 | 2.0 |" in md, md
    # the geometry is the plan's: moving the bowl refuses the campaign, as before
    bench_yaml.write_text(bench_yaml.read_text().replace("bowl_xy_cm: [20.0, -19.0]", "bowl_xy_cm: [21.0, -19.0]"))
    capsys.readouterr()
    assert cli(["run", f"campaign={campaign}", *_cards(campaign, {"scripted_compositional": port}), *SMALL]) == 2
    assert "was planned with config hash" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.bench
def test_a_counted_run_refuses_another_timer_than_the_planned_one_and_a_dry_run_may_shorten_it(tmp_path, capsys):
    """Measured before: `run operator.timer_s=S` replaced the planned timer on a counted run (planned 3 s,
    ran 1 s, counted, the report said 3 s). Now a counted run with another timer is refused before the
    ledger is written; the planned timer itself is accepted; a dry run may shorten it and counts nothing."""
    pytest.importorskip("mujoco")
    campaign = plan_smoke(tmp_path, policies=[{**TWO[0], "timer_s": 3.0}], bench="sim")
    events = ledger_count(campaign, "events")
    with _server(tmp_path, "scripted_compositional") as port:
        cards = _cards(campaign, {"scripted_compositional": port})
        capsys.readouterr()
        assert main(["run", f"campaign={campaign}", "operator.timer_s=1", *cards, *SMALL]) == 2
        said = capsys.readouterr().out
        assert "operator.timer_s=1 would replace the planned timer (3 s)" in said and "dry_run=true" in said, said
        assert _attempts(campaign) == []
        assert ledger_count(campaign, "events") == events   # nothing written: not even an event
        assert main(["run", f"campaign={campaign}", "operator.timer_s=0.5", "dry_run=true", *cards, *SMALL]) == 0
        assert [(s, d) for _, s, d in _attempts(campaign)] == [("complete", 1)]
        assert main(["run", f"campaign={campaign}", "operator.timer_s=3", *cards, *SMALL]) == 0
    counted = [a for a in _attempts(campaign) if a[2] == 0]
    assert [s for _, s, _ in counted] == ["complete"], _attempts(campaign)
