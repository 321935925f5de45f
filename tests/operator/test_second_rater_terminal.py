"""A second rater from the terminal (issue 36): `spabench score second_rater=true operator.rater=NAME`
scores blind the attempts another rater scored and NAME has not, and the report's rater agreement
reads both ratings.

Measured before: `second_rater=` was refused ("not read by score"), and `score` offered only the
attempts nobody had scored, so a second rater had to use the browser console.
"""

from __future__ import annotations

import dataclasses
import io

import pandas as pd

from spabench.analysis.commands import ReportConfig, report
from spabench.cli.main import main
from spabench.ledger import Ledger
from spabench.operator.commands import ScoreConfig
from spabench.operator.commands import score as score_command
from tests.operator.test_operator import _record, _trial_rows

SECRET = "secret_policy_name"


def _campaign(tmp_path):
    """Six complete attempts of a blinded policy (alias P1): four scored by alice (one with a motion
    pre-fill logged, one stopped by the operator), one scored by alice and bob already, one by nobody;
    and an invalid attempt."""
    rows = [dataclasses.replace(r, policy=SECRET, card=SECRET, task="counting", condition="id", scene_id=f"s{i}",
                                scene_condition="id", cell="goal_2_by_addition|counting")
            for i, r in enumerate(_trial_rows(7))]
    ledger = Ledger.create(tmp_path / "ledger.sqlite", rows, "h")
    ids = []
    for i, row in enumerate(rows):
        attempt = ledger.begin_attempt(row.trial_id)
        if i == 6:
            ledger.finish_attempt(attempt, "invalid", "fault", invalid_reason="server_lost")
            continue
        _record(tmp_path, attempt)
        ledger.finish_attempt(attempt, "complete", "operator_stop" if i == 1 else "timer",
                              episode_path=f"episodes/{attempt}")
        if i == 0:
            ledger.log_event(attempt, "score_prefill", {"success": True, "note": "pre-filled: no motion detected"})
        if i < 5:
            ledger.record_score(attempt, "alice", i % 2 == 0, None if i % 2 == 0 else "grasp_failure",
                                "alice-note-visible-only-to-alice")
        if i == 4:
            ledger.record_score(attempt, "bob", True)
        ids.append(attempt)
    ledger.close()
    return tmp_path, ids


def _cfg(campaign, **keys):
    operator = {"type": "terminal", **({"rater": keys.pop("rater")} if "rater" in keys else {})}
    return ScoreConfig.from_mapping({"campaign_dir": str(campaign), "operator": operator, **keys})


def test_a_second_rater_scores_blind_what_another_rater_scored(tmp_path):
    campaign, ids = _campaign(tmp_path)
    out = io.StringIO()
    # attempts 0..3 (alice only): y | n, failure mode 1, note | y | n, mode 3
    answers = "y\n\nn\n1\nslipped\ny\n\nn\n3\n\n"
    assert score_command(_cfg(campaign, rater="bob", second_rater=True), stdin=io.StringIO(answers), stdout=out) == 0
    text = out.getvalue()
    assert "4 attempt(s) scored by another rater and not by you" in text
    assert "second-rated 4, left 0; 1 complete attempt(s) nobody scored yet" in text
    for hidden in (SECRET, "alice", "Pre-filled", "operator_stop", "grasp_failure"):
        assert hidden not in text, hidden       # blind: no policy, no other rater, no stop or pre-fill
    assert "(alias P1" in text
    with Ledger.open(campaign, readonly=True) as ledger:
        bob = {a: [s for s in ledger.scores_for(a) if s.rater == "bob"] for a in ids}
        assert [len(bob[a]) for a in ids] == [1, 1, 1, 1, 1, 0]   # the attempt nobody scored stays unrated
        assert [bob[a][0].success for a in ids[:4]] == [True, False, True, False]
        assert bob[ids[1]][0].note == "slipped" and bob[ids[1]][0].failure_mode is not None
        assert [s.rater for s in ledger.scores_for(ids[0])] == ["alice", "bob"]   # alice stays the primary
        assert ledger.unscored_attempts() == [ledger.attempt(ids[5])]
    # run again: nothing left for bob
    out = io.StringIO()
    assert score_command(_cfg(campaign, rater="bob", second_rater=True), stdin=io.StringIO(""), stdout=out) == 0
    assert "0 attempt(s) scored by another rater" in out.getvalue()
    # the report's agreement reads both ratings: alice vs bob on the five attempts both scored
    report_dir = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"campaign_dir": str(campaign), "out": str(report_dir),
                                               "bootstrap": 200})) == 0
    agreement = pd.read_csv(report_dir / "agreement.csv")
    success = agreement[agreement["score"] == "success"].iloc[0]
    assert (success["rater_a"], success["rater_b"], success["n"]) == ("alice", "bob", 5)
    assert "## Rater agreement" in (report_dir / "report.md").read_text()


def test_the_rater_name_is_asked_and_the_first_rater_has_nothing_to_second_rate(tmp_path):
    campaign, ids = _campaign(tmp_path)
    out = io.StringIO()
    # asked for the name (not given by operator.rater), then scores the first attempt and stops (end of input)
    assert score_command(_cfg(campaign, second_rater=True), stdin=io.StringIO("Carol\nn\n3\n\n"), stdout=out) == 0
    assert "5 attempt(s) scored by another rater and not by you" in out.getvalue()
    assert "second-rated 1, left 4" in out.getvalue()
    with Ledger.open(campaign, readonly=True) as ledger:
        assert [s.rater for s in ledger.scores_for(ids[0])] == ["alice", "Carol"]
        assert all("Carol" not in [s.rater for s in ledger.scores_for(a)] for a in ids[1:])
    out = io.StringIO()
    assert score_command(_cfg(campaign, rater="alice", second_rater=True), stdin=io.StringIO(""), stdout=out) == 0
    assert "0 attempt(s) scored by another rater and not by you" in out.getvalue()   # bob's only: alice scored it


def test_second_rater_takes_no_correction_keys(tmp_path, capsys):
    campaign, ids = _campaign(tmp_path)
    out = io.StringIO()
    assert score_command(_cfg(campaign, rater="bob", second_rater=True, attempt=ids[0], reason="x"),
                         stdin=io.StringIO("y\n"), stdout=out) == 2
    assert "takes no attempt=, reason= or invalidate=" in out.getvalue()
    with Ledger.open(campaign, readonly=True) as ledger:
        assert [s.rater for s in ledger.scores_for(ids[0])] == ["alice"]
    assert main(["score", f"campaign={campaign}", "second_rater=maybe", "operator.rater=bob"]) == 2
    assert "second_rater" in capsys.readouterr().err
