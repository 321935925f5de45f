"""Output folders: nothing the tool did not write is deleted or overwritten (issue 10, part 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spabench.analysis.commands import ReportConfig, report
from spabench.errors import ConfigError
from spabench.outputs import MARKER, check_new_folder, claim_new_folder, read_marker, replace_output


def _user_folder(path: Path) -> dict[str, str]:
    path.mkdir(parents=True, exist_ok=True)
    (path / "report.md").write_text("my own notes called report.md")
    (path / "outcomes.csv").write_text("a,b\n1,2\n")
    (path / "thesis.tex").write_text("\\documentclass{article}")
    (path / "data").mkdir()
    (path / "data" / "raw.bin").write_bytes(b"\x00\x01")
    return _snapshot(path)


def _snapshot(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): (p.read_bytes().hex() if p.is_file() else "dir")
            for p in sorted(path.rglob("*"))}


def _report(csv: Path, out: Path | str) -> int:
    return report(ReportConfig.from_mapping({"outcomes": str(csv), "out": str(out), "bootstrap": 50}))


def test_report_refuses_a_folder_with_user_files_and_deletes_nothing(tmp_path, example_csv):
    out = tmp_path / "mine"
    before = _user_folder(out)
    with pytest.raises(ConfigError, match="spabench did not write.*outcomes.csv"):
        _report(example_csv, out)
    assert _snapshot(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_report_out_dot_refuses_the_current_folder(tmp_path, example_csv, monkeypatch):
    before = _user_folder(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(ConfigError, match="did not write"):
        _report(example_csv, ".")
    assert _snapshot(tmp_path / "cwd") == before


@pytest.mark.slow
def test_report_replaces_only_its_own_previous_output(tmp_path, example_csv):
    out = tmp_path / "report"
    assert _report(example_csv, out) == 0
    marker = read_marker(out)
    assert marker["command"] == "report" and "summary.csv" in marker["entries"]
    (out / "summary.csv").write_text("stale")
    assert _report(example_csv, out) == 0                      # exactly a previous report: replaced
    assert (out / "summary.csv").read_text() != "stale"
    (out / "my_analysis.ipynb").write_text("{}")                # now it holds a user file too
    with pytest.raises(ConfigError, match="my_analysis.ipynb"):
        _report(example_csv, out)
    assert (out / "my_analysis.ipynb").read_text() == "{}" and (out / "summary.csv").exists()


def test_report_into_an_empty_current_folder(tmp_path, example_csv, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    assert _report(example_csv, ".") == 0
    assert (tmp_path / "empty" / "report.md").is_file() and (tmp_path / "empty" / MARKER).is_file()


def test_a_marker_of_another_command_is_not_enough(tmp_path):
    out = claim_new_folder(tmp_path / "campaign", "plan")
    (out / "ledger.sqlite").write_text("x")
    with pytest.raises(ConfigError, match="'plan' output"), replace_output(out, "report"):
        pass
    assert (out / "ledger.sqlite").read_text() == "x"


def test_failure_inside_the_block_leaves_the_previous_output(tmp_path):
    out = tmp_path / "o"
    with replace_output(out, "report") as staging:
        (staging / "a.txt").write_text("one")
    with pytest.raises(RuntimeError), replace_output(out, "report") as staging:
        (staging / "a.txt").write_text("two")
        raise RuntimeError("disk on fire")
    assert (out / "a.txt").read_text() == "one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_file_and_unwritable_targets(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("keep")
    with pytest.raises(ConfigError, match="is a file"), replace_output(target, "report"):
        pass
    with pytest.raises(ConfigError, match="not a folder"):
        check_new_folder(target, "plan")
    assert target.read_text() == "keep"
    # /proc refuses new folders even to root: the OSError becomes one clear ConfigError
    with pytest.raises(ConfigError, match="cannot"):
        claim_new_folder("/proc/spabench-never/x", "plan")
    with pytest.raises(ConfigError, match="cannot"), replace_output("/proc/spabench-never", "report"):
        pass
