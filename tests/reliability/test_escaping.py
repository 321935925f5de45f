"""Hostile labels in the report: TeX-like text, Markdown and spreadsheet formulas (issue 10, part 5)."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from spabench.analysis.commands import ReportConfig, report
from spabench.escaping import csv_cell, markdown_text, printable

HOSTILE = {"policy_a": "p$\\frac{$x", "policy_b": "=cmd|' /C calc'!A0"}


def test_helpers():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("@SUM(A1)") == "'@SUM(A1)" and csv_cell("-2") == "'-2"
    assert csv_cell(-2) == -2 and csv_cell("policy") == "policy"
    assert printable("a\nb\tc\x00") == "a b c\\x00"
    assert "\n" not in markdown_text("x\n# y") and "\\|" in markdown_text("a|b")


@pytest.mark.slow
def test_hostile_policy_names_reach_the_report_safely(tmp_path, example_csv):
    frame = pd.read_csv(example_csv, dtype=str, keep_default_na=False)
    frame["policy"] = frame["policy"].map(lambda p: HOSTILE.get(p, p))
    src = tmp_path / "hostile.csv"
    frame.to_csv(src, index=False)
    out = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"outcomes": str(src), "out": str(out), "bootstrap": 50})) == 0
    for name in ("summary.csv", "invalid.csv", "contrasts.csv", "failure_modes.csv"):
        for row in csv.reader(io.StringIO((out / name).read_text())):
            assert not any(cell.startswith(("=", "+", "@")) for cell in row), (name, row)
    summary = (out / "summary.csv").read_text()
    assert "'=cmd|' /C calc'!A0" in summary and "p$\\frac{$x" in summary
    md = (out / "report.md").read_text()
    assert "=cmd\\|' /C calc'!A0" in md and "p\\$\\\\frac\\{\\$x" in md
    svgs = [p for p in out.iterdir() if p.suffix == ".svg"]   # SVG by default: text stays text
    assert svgs
    drawn = "".join(p.read_text() for p in svgs)
    assert "calc" in drawn and "\\frac" in drawn   # both names drawn as plain text, not parsed as mathtext
