"""The `spabench` entry point: command dispatch, config composition and its error messages."""

from __future__ import annotations

import csv
import subprocess
import sys

from spabench.cli.main import main


def test_usage_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("plan", "run", "report", "suite validate", "serve lerobot", "export lerobot", "demo"):
        assert name in out


def test_unknown_command_is_an_error(capsys):
    assert main(["fly"]) == 2
    assert "unknown command 'fly'" in capsys.readouterr().err


def test_unknown_group_option_names_the_allowed_ones(capsys, tmp_path):
    assert main(["plan", "campaign=nope", f"out={tmp_path / 'x'}"]) == 2
    err = capsys.readouterr().err
    assert "no campaign preset" in err and "spabench_full" in err and ".yaml file" in err
    assert not (tmp_path / "x").exists()
    assert main(["plan", "campaign=smoke", "suite=nope", f"out={tmp_path / 'x'}"]) == 2
    err = capsys.readouterr().err
    assert "no option 'nope' for group 'suite'" in err and "allowed: spabench" in err


def test_unknown_top_level_key_is_refused(capsys, tmp_path):
    assert main(["plan", "campaign=smoke", f"outt={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'outt'" in err and "out," in err


def test_bad_group_value_names_field_and_allowed_values(capsys, tmp_path):
    assert main(["plan", "campaign=smoke", "campaign.order=zigzag", f"out={tmp_path / 'x'}"]) == 2
    err = capsys.readouterr().err
    assert "order" in err and "blocked" in err and "interleaved" in err
    assert not (tmp_path / "x").exists()


def test_plan_through_the_cli_writes_ledger_and_plan(tmp_path):
    out = tmp_path / "camp"
    assert main(["plan", "campaign=spabench_full", f"out={out}"]) == 0
    assert (out / "ledger.sqlite").is_file()
    with open(out / "plan.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2700
    # Planning into the same folder again refuses and keeps the ledger.
    assert main(["plan", "campaign=spabench_full", f"out={out}"]) == 2


def test_relative_out_is_taken_from_the_callers_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "campaign=smoke", "out=rel"]) == 0
    assert (tmp_path / "rel" / "ledger.sqlite").is_file()


def test_console_script_runs_light_commands_without_torch(tmp_path):
    """`spabench suite validate` must not pay for LeRobot/torch (offline installs stay light)."""
    code = (
        "import sys; from spabench.cli.main import main; rc = main(['suite', 'validate']);"
        "heavy = [m for m in ('torch', 'lerobot') if m in sys.modules]; print('HEAVY', heavy); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout
