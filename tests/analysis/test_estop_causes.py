"""The cause of an e-stop (issue 19): the rule in suite.rules, the ledger that records an unsafe
e-stop as the policy's failure, and the report that shows it apart from the annotated failure modes
and from the e-stops that stay invalid. Real SQLite ledger; real `spabench report` on a CSV."""

from __future__ import annotations

import csv

import pandas as pd
import pytest
from tests.ledger.conftest import HASH, _rows

from spabench.analysis.attempts import estop_table, invalid_attempt_table
from spabench.analysis.commands import ReportConfig, report
from spabench.analysis.outcomes import load_outcomes
from spabench.ledger import Ledger, LedgerError
from spabench.suite.rules import (
    ESTOP_CAUSE_NOT_RECORDED,
    UNSAFE,
    estop_cause_of,
    estop_cause_problem,
    estop_causes_for,
    estop_invalid_reason,
    estop_is_failure,
)


@pytest.fixture
def ledger(tmp_path):
    """The ledger tests' small plan (pi05 and vla0 on a few evaluations)."""
    led = Ledger.create(tmp_path / "camp" / "ledger.sqlite", _rows(), HASH, {"campaign": "unit"})
    yield led
    led.close()


# ---------------------------------------------------------------- the rule
def test_the_rule_is_written_once_in_suite_rules():
    assert estop_causes_for(True) == (UNSAFE, "operator", "other")
    assert estop_causes_for(False) == ("operator", "other")   # no policy moved the arm
    assert estop_is_failure(UNSAFE) and not estop_is_failure("operator") and not estop_is_failure(None)
    assert estop_cause_problem("unsafe", "", ended_rollout=False) is not None
    assert "needs a few words" in estop_cause_problem("other", "  ", ended_rollout=True)
    assert estop_cause_problem("other", "a cup fell off the table", ended_rollout=True) is None
    assert estop_invalid_reason("other", "a  cup\nfell") == "estop: other: a cup fell"
    assert estop_invalid_reason("operator") == "estop: operator"
    assert estop_invalid_reason(None) == "estop"
    assert estop_cause_of("estop: other: a cup fell: twice") == "other"
    assert estop_cause_of("estop") == ESTOP_CAUSE_NOT_RECORDED
    with pytest.raises(ValueError):
        estop_cause_of("server_lost")


# ---------------------------------------------------------------- the ledger
def test_an_unsafe_estop_is_a_scored_failure_in_one_transaction(ledger):
    a = ledger.begin_attempt("E0001-P2")
    with pytest.raises(LedgerError, match="complete with stop_reason 'estop'"):
        ledger.finish_attempt(a, "complete", "timer", unsafe_by="op")
    with pytest.raises(LedgerError, match="unsafe_by must name the rater"):
        ledger.finish_attempt(a, "complete", "estop", unsafe_by=" ")
    assert ledger.attempt(a).status == "running"
    ledger.finish_attempt(a, "complete", "estop", episode_path="episodes/x", unsafe_by="op",
                          unsafe_note="swept the cup off the table")
    assert (ledger.attempt(a).status, ledger.attempt(a).stop_reason) == ("complete", "estop")
    (score,) = ledger.scores_for(a)
    assert (score.rater, score.success, score.failure_mode, score.note) == \
        ("op", False, UNSAFE, "swept the cup off the table")
    assert ledger.next_trial().trial_id != "E0001-P2"       # a failure: its trial is not run again
    row = ledger.outcomes().set_index("attempt_id").loc[a]
    assert (bool(row["valid"]), bool(row["success"]), row["failure_mode"]) == (True, False, UNSAFE)
    scored = [e for e in ledger.events(a) if e["kind"] == "scored"]
    assert scored[0]["payload"]["source"] == "estop_cause"


def test_unsafe_scores_only_an_attempt_the_estop_ended(ledger):
    a = ledger.begin_attempt("E0001-P2")
    ledger.finish_attempt(a, "complete", "timer", episode_path="episodes/x")
    with pytest.raises(LedgerError, match="e-stopped for unsafe policy behaviour only"):
        ledger.record_score(a, "op", False, UNSAFE)
    b = ledger.begin_attempt("E0001-P1")
    ledger.finish_attempt(b, "invalid", "estop", invalid_reason=estop_invalid_reason("operator"))
    assert ledger.attempt(b).invalid_reason == "estop: operator"
    assert ledger.next_trial().trial_id == "E0001-P1"       # invalid: run again


# ---------------------------------------------------------------- the report
COLUMNS = ("policy", "task", "condition", "evaluation_id", "success", "valid", "failure_mode", "invalid_reason")


def _outcomes_csv(path):
    """Two policies on the same 10 ID scenes. pi05: 6 successes, 2 grasp failures, 2 unsafe e-stops;
    vla0: 5 successes, 5 no-action failures, and its e-stops stayed invalid (operator, other, one
    from a ledger that did not ask) before the re-runs that count."""
    rows = []
    for i in range(10):
        e = f"E{i:04d}"
        rows.append(("pi05", "relative_size", "id", e, int(i < 6), "true",
                     "" if i < 6 else ("grasp_failure" if i < 8 else UNSAFE), ""))
        rows.append(("vla0", "relative_size", "id", e, int(i < 5), "true", "" if i < 5 else "no_action", ""))
    for i, reason in enumerate(("estop: operator", "estop: other: the lamp fell over", "estop")):
        rows.append(("vla0", "relative_size", "id", f"E{i:04d}", 0, "false", "", reason))
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return path


def test_the_report_counts_unsafe_estops_as_failures_apart(tmp_path):
    csv_path = _outcomes_csv(tmp_path / "outcomes.csv")
    outcomes = load_outcomes(csv_path, unpaired="error")
    estops = estop_table(outcomes)
    assert estops[["policy", "cause", "counted_as", "attempts"]].values.tolist() == [
        ["pi05", UNSAFE, "failure (unsafe)", 2],
        ["vla0", "operator", "invalid, re-run", 1],
        ["vla0", "other", "invalid, re-run", 1],
        ["vla0", ESTOP_CAUSE_NOT_RECORDED, "invalid, re-run", 1]]
    invalid = invalid_attempt_table(outcomes)
    assert set(invalid["reason"]) == {"estop"}
    assert invalid["kind"].tolist() == ["operator: e-stop, cause: operator", "operator: e-stop, cause: other",
                                        "operator: e-stop, cause: not recorded"]
    assert invalid["attempts"].sum() == 3 and invalid["trials_rerun"].sum() == 3

    out = tmp_path / "report"
    report(ReportConfig.from_mapping({"outcomes": str(csv_path), "out": str(out), "campaign_dir": None}))
    summary = pd.read_csv(out / "summary.csv")
    cell = summary[(summary["policy"] == "pi05") & (summary["task"] == "relative_size")
                   & (summary["condition"] == "id")].iloc[0]
    assert (cell["successes"], cell["trials"]) == (6, 10)     # the unsafe e-stops are failures in the rate
    failures = pd.read_csv(out / "failure_modes.csv")
    mine = failures[(failures["policy"] == "pi05") & (failures["task"] == "relative_size")]
    assert dict(zip(mine["failure_mode"], mine["count"], strict=True)) == {"grasp_failure": 2, UNSAFE: 2}
    assert set(mine.loc[mine["failure_mode"] == UNSAFE, "label"]) == {"Unsafe (e-stopped)"}
    assert pd.read_csv(out / "estops.csv")["attempts"].tolist() == [2, 1, 1, 1]
    text = (out / "report.md").read_text()
    section = text.split("## E-stops by cause")[1].split("\n## ")[0]
    assert "Unsafe e-stops per policy: Pi0.5 2." in section      # display names
    assert "| Pi0.5 | unsafe policy behaviour | failure (unsafe) | 2 |" in section
    assert "| VLA-0 | other | invalid, re-run | 1 |" in section
    assert "does not record why" not in text


def test_a_csv_failure_mode_unsafe_is_for_failures_only(tmp_path):
    path = tmp_path / "bad.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerow(("pi05", "relative_size", "id", "E0001", 1, "true", UNSAFE, ""))
    with pytest.raises(Exception, match="successful rollout has no failure mode"):
        load_outcomes(path, unpaired="error")
