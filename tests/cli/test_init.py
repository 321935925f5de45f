"""Issue 40: `spabench init DIR` makes a lab folder to edit from the installed package (the bench file,
every policy card, a pilot campaign, a README of what to change first), never overwriting a file.

Measured before: `spabench init lab` was "unknown command 'init'".
"""

from __future__ import annotations

import pytest
import yaml

from spabench.cli.main import main
from spabench.paths import conf_dir


def test_init_copies_the_lab_files_and_the_lab_plans_its_pilot(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "lab"]) == 0
    lab = tmp_path / "lab"
    cards = sorted(p.name for p in (conf_dir() / "policy").glob("*.yaml"))
    assert sorted(p.name for p in (lab / "policy").iterdir()) == cards and len(cards) >= 5
    assert (lab / "bench" / "so101.yaml").read_bytes() == (conf_dir() / "bench" / "so101.yaml").read_bytes()
    assert "What to change first" in (lab / "README.md").read_text()
    pilot = yaml.safe_load((lab / "campaign" / "pilot.yaml").read_text())
    assert pilot["name"] == "pilot" and pilot["bench"] == "sim"
    said = capsys.readouterr().out
    assert "wrote bench/so101.yaml" in said and "kept" not in said
    assert main(["plan", "campaign=pilot", "config_dir=lab", "out=pilot"]) == 0
    planned = yaml.safe_load((tmp_path / "pilot" / "config.yaml").read_text())
    assert planned["campaign"]["name"] == "pilot" and planned["config_dir"] == str(lab)


def test_init_never_overwrites_and_says_which_files_it_kept(tmp_path, capsys):
    lab = tmp_path / "lab"
    (lab / "bench").mkdir(parents=True)
    (lab / "bench" / "so101.yaml").write_text("port: /dev/ttyMINE\n")
    assert main(["init", f"out={lab}"]) == 0
    assert (lab / "bench" / "so101.yaml").read_text() == "port: /dev/ttyMINE\n"
    said = capsys.readouterr().out
    assert "kept  bench/so101.yaml" in said and "wrote policy/pi05.yaml" in said
    (lab / "README.md").write_text("ours\n")
    assert main(["init", str(lab)]) == 0
    assert (lab / "README.md").read_text() == "ours\n"
    said = capsys.readouterr().out
    assert "wrote" not in said and "kept  README.md" in said


@pytest.mark.parametrize(("args", "expected"), [
    ([], "give the lab folder"),
    (["lab", "colour=red"], "unknown key 'colour'"),
    (["lab", "config_dir=x"], "key 'config_dir' is not read by this command"),
])
def test_init_refuses_bad_input_before_writing(tmp_path, monkeypatch, capsys, args, expected):
    monkeypatch.chdir(tmp_path)
    assert main(["init", *args]) == 2
    assert expected in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_init_refuses_a_file_or_a_campaign_folder(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert main(["init", str(tmp_path / "afile")]) == 2
    (tmp_path / "campaign").mkdir()
    (tmp_path / "campaign" / "config.yaml").write_text("campaign: {}\n")
    assert main(["init", str(tmp_path / "campaign")]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and "holds a config.yaml" in err
    assert sorted(p.name for p in (tmp_path / "campaign").iterdir()) == ["config.yaml"]


def test_init_help_and_version(capsys):
    assert main(["init", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: spabench init DIR") and "out" in out
    import spabench

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"spabench {spabench.__version__}"
