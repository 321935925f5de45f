"""Outcomes validation: one clear DataError per malformed file, and nothing written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spabench.analysis import load_outcomes, outcomes_from_frame
from spabench.analysis.commands import ReportConfig, report
from spabench.errors import DataError

HEADER = "policy,task,condition,evaluation_id,success,matched_group,instruction_variant,failure_mode,valid"
GOOD = [
    "p,counting,id,E1,1,,original,,true",
    "p,counting,ood,E2,0,counting/g1,original,wrong_target,true",
    "p,counting,direct,E3,TRUE,counting/g1,,,",
]

# (name, rows replacing/added to GOOD, expected row, field, fragment of the allowed values)
CASES = [
    ("missing column", None, 1, "success", "required columns"),
    ("unknown task", ["p,stacking,id,E9,1,,,,true"], 5, "task", "object_state, relative_size"),
    ("unknown condition", ["p,counting,OOD2,E9,1,,,,true"], 5, "condition", "paraphrase_direct"),
    ("bad success", ["p,counting,id,E9,yes,,,,true"], 5, "success", "0, 1, true, false"),
    ("bad valid", ["p,counting,id,E9,1,,,,maybe"], 5, "valid", "0, 1, true, false"),
    ("unscored valid row", ["p,counting,id,E9,,,,,true"], 5, "success", "0, 1, true, false"),
    ("unknown failure mode", ["p,counting,id,E9,0,,,gripper_slip,true"], 5, "failure_mode",
     "grasp_failure"),
    ("failure mode outside its conditions", ["p,counting,id,E9,0,,,unnecessary_intervention,true"],
     5, "failure_mode", "no_intervention, no_movement"),
    ("wrong_instance outside its tasks", ["p,counting,id,E9,0,,,wrong_instance,true"], 5,
     "failure_mode", "object_state, referential_description"),
    ("unknown variant", ["p,counting,id,E9,1,,reworded,,true"], 5, "instruction_variant",
     "original, paraphrase"),
    ("paraphrase of an id trial", ["p,counting,id,E9,1,,paraphrase,,true"], 5, "instruction_variant",
     "original"),
    ("duplicate valid rollout", ["p,counting,id,E1,0,,original,,1"], 5, "evaluation_id",
     "one valid row per"),
    ("second ood in a matched group", ["p,counting,ood,E7,1,counting/g1,,,true"], 5, "matched_group",
     "one valid rollout per condition"),
    ("direct without matched group", ["p,counting,direct,E8,1,,,,true"], 5, "matched_group",
     "matched_group of an ood rollout"),
    ("empty policy", [",counting,id,E9,1,,,,true"], 5, "policy", "non-empty"),
]


def write(tmp_path: Path, lines: list[str], header: str = HEADER) -> Path:
    path = tmp_path / "outcomes.csv"
    path.write_text("\n".join([header] + lines) + "\n")
    return path


@pytest.mark.parametrize("name, extra, row, field, allowed", CASES, ids=[c[0] for c in CASES])
def test_malformed_csv_one_error_nothing_written(tmp_path, name, extra, row, field, allowed):
    if extra is None:
        path = write(tmp_path, [line.rsplit(",", 5)[0] for line in GOOD],
                     header="policy,task,condition,evaluation_id")
    else:
        path = write(tmp_path, GOOD + extra)
    out = tmp_path / "out"
    cfg = ReportConfig.from_mapping({"outcomes": str(path), "campaign_dir": None, "out": str(out)})
    with pytest.raises(DataError) as caught:
        report(cfg)
    message = str(caught.value)
    assert str(path) in message
    assert f"row {row}," in message
    assert f"field '{field}'" in message
    assert "allowed:" in message and allowed in message, message
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [path]


def test_ragged_row_and_empty_file(tmp_path):
    path = write(tmp_path, GOOD + ["p,counting,id"])
    with pytest.raises(DataError, match=r"row 5: the row has 3 fields but the header has 9"):
        load_outcomes(path)
    path.write_text("")
    with pytest.raises(DataError, match="empty"):
        load_outcomes(path)
    with pytest.raises(DataError, match="not found"):
        load_outcomes(tmp_path / "missing.csv")


def test_accepted_spellings_and_normalisation(tmp_path):
    path = write(tmp_path, GOOD + [
        "p,counting,ood,E4,False,counting/g1,paraphrase,NO_ACTION,True",   # ood + paraphrase variant
        "p,counting,id,E1,0,,original,,FALSE",                             # invalid duplicate: fine
        "p,counting,id,E5,,,original,,0",                                  # unscored invalid: fine
    ], header=HEADER.upper().replace(",", " ,"))
    frame = load_outcomes(path)
    assert list(frame["row"]) == [2, 3, 4, 5, 6, 7]
    assert list(frame["success"].astype("float").fillna(-1)) == [1, 0, 1, 0, 0, -1]
    assert list(frame["valid"]) == [True, True, True, True, False, False]
    assert frame.loc[3, "condition"] == "paraphrase_ood"
    assert frame.loc[3, "failure_mode"] == "no_action"
    assert frame.loc[2, "instruction_variant"] == "original"


def test_ledger_shaped_frame():
    """The ledger's outcomes() view: Python bools/None, float NaN, extra id columns."""
    frame = pd.DataFrame({
        "policy": ["p", "p", "p"], "task": ["counting"] * 3, "condition": ["id", "id", "ood"],
        "evaluation_id": ["E1", "E1", "E2"], "success": [None, True, 0.0],
        "matched_group": [None, None, "g1"], "instruction_variant": ["original"] * 3,
        "failure_mode": [None, None, "grasp_failure"], "valid": [False, True, True],
        "trial_id": [1, 1, 2], "attempt_id": ["a1", "a2", "a3"], "episode_path": ["x", "y", "z"],
    })
    out = outcomes_from_frame(frame, source="ledger.sqlite")
    assert list(out["valid"]) == [False, True, True]
    assert list(out["success"].astype("float").fillna(-1)) == [-1, 1, 0]
    assert list(out["attempt_id"]) == ["a1", "a2", "a3"]
    bad = frame.assign(task=["counting", "stacking", "counting"])
    with pytest.raises(DataError, match=re.escape("ledger.sqlite, row 3, field 'task'")):
        outcomes_from_frame(bad, source="ledger.sqlite")


def test_analysis_imports_neither_lerobot_nor_torch():
    code = (
        "import sys\n"
        "import spabench.analysis, spabench.analysis.commands, spabench.analysis.figures\n"
        "spabench.analysis.analyse, spabench.analysis.wilson_interval  # the package's names load their modules\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('lerobot', 'torch'))\n"
        "print(','.join(heavy))\n"
        "assert 'spabench.analysis.report' in sys.modules\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.slow
def test_full_report_never_imports_statsmodels(tmp_path, synthetic):
    """The whole report (21 figure files included) runs on numpy, pandas, scipy (its tail
    probabilities and root finder) and matplotlib (the figures): statsmodels, which the tests use
    as the reference, is never imported (it cost a share of a second)."""
    from analysis_synthetic import write_csv

    csv_path = write_csv(tmp_path / "o.csv", synthetic.rows)
    code = (
        "import sys\n"
        "from spabench.analysis.commands import report\n"
        "from spabench.analysis.commands import ReportConfig\n"
        f"report(ReportConfig.from_mapping({{'outcomes': {str(csv_path)!r}, 'out': {str(tmp_path / 'r')!r},"
        " 'bootstrap': 200}))\n"
        "print('heavy:' + ','.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'statsmodels'})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "heavy:", result.stdout
    assert sorted(p.suffix for p in (tmp_path / "r").glob("fig*")) == [".svg"] * 7   # figures.formats default
