"""`spabench export outcomes` (issue 36): a campaign's outcomes as the CSV `report outcomes=` reads, so
that `report campaign=DIR` and `report outcomes=<its export>` agree on every table computed from the
outcomes, cell by cell.

Measured before: no command wrote that CSV (`spabench export outcomes` was "unknown command").

The campaign is demo_twin planned by the real `spabench plan` (132 trials, both scripted cards, every
task and condition, matched direct and paraphrase trials), its ledger filled through the ledger's own
API as two benches and two raters would: invalid attempts of several kinds re-run, an unsafe e-stop,
corrections, an attempt declared invalid after scoring, a trial left unscored and trials never run.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spabench.cli.main import main
from spabench.ledger import Ledger
from spabench.suite.rules import estop_invalid_reason, failure_modes_for

# The tables a report computes from the outcomes alone. The others need what only a campaign holds:
# completeness.csv (the campaign's plan; a CSV is held against the protocol's counts), agreement.csv
# (every rater's scores), protocol_settings.csv (the plan's settings), health.csv and cameras.csv
# (the rollouts' summaries).
OUTCOME_TABLES = ("summary.csv", "contrasts.csv", "failure_modes.csv", "invalid.csv", "invalid_by_reason.csv",
                  "estops.csv", "comparisons.csv", "ranking.csv", "benches.csv", "bench_heterogeneity.csv")
INVALID_KINDS = ("server_lost", estop_invalid_reason("operator", "cup knocked over"), "operator_abort",
                 estop_invalid_reason("other", "phone rang"), "camera_lost")


def _filled_campaign(tmp_path: Path, name: str = "camp") -> Path:
    campaign = tmp_path / name
    assert main(["plan", "campaign=demo_twin", f"out={campaign}"]) == 0
    rng = np.random.default_rng(36)
    with Ledger.open(campaign) as ledger:
        trials = ledger.trials()
        plain = sorted(t.trial_id for t in trials if t.condition == "id")
        never_run, unscored = set(plain[:3]), set(plain[3:5])
        for n, trial in enumerate(trials):
            if trial.trial_id in never_run:
                continue
            bench = "bench-a" if int(trial.evaluation_id[1:]) % 3 else "bench-b"   # a scene set on one bench
            if n % 17 == 5:   # an invalid first attempt, re-run
                first = ledger.begin_attempt(trial.trial_id, bench_id=bench, bench_kind="sim")
                stop = "estop" if INVALID_KINDS[n % 5].startswith("estop") else "fault"
                ledger.finish_attempt(first, "invalid", stop, invalid_reason=INVALID_KINDS[(n // 17) % 5])
            attempt = ledger.begin_attempt(trial.trial_id, bench_id=bench, bench_kind="sim")
            if n == 40 and trial.trial_id not in unscored:   # e-stopped for unsafe policy behaviour: the policy's failure, scored so at once
                ledger.finish_attempt(attempt, "complete", "estop", unsafe_by="alice")
                continue
            ledger.finish_attempt(attempt, "complete", "timer")
            if trial.trial_id in unscored:
                continue      # complete, not scored yet: not an outcome
            modes = failure_modes_for(trial.task, trial.condition)
            success = bool(rng.random() < 0.55)
            mode = None if success else modes[n % len(modes)]
            ledger.record_score(attempt, "alice", success, mode)
            if n % 4 == 0:    # a second rater, who disagrees now and then
                other = not success if n % 12 == 0 else success
                ledger.record_score(attempt, "bob", other, None if other else mode or modes[0])
            if n % 23 == 7:   # a correction by the first rater
                ledger.record_score(attempt, "alice", not success, None if not success else modes[0],
                                    reason="re-watched the overhead camera")
            if n == 60:       # declared invalid afterwards, then re-run and scored
                ledger.invalidate_attempt(attempt, "scene was staged wrong", "alice")
                again = ledger.begin_attempt(trial.trial_id, bench_id=bench, bench_kind="sim")
                ledger.finish_attempt(again, "complete", "timer")
                ledger.record_score(again, "alice", True)
    return campaign


def _report(tmp_path: Path, name: str, *source: str) -> Path:
    out = tmp_path / name
    assert main(["report", *source, f"out={out}", "bootstrap=400"]) == 0
    return out


def test_report_of_the_export_equals_the_campaigns_report_cell_by_cell(tmp_path, capsys):
    campaign = _filled_campaign(tmp_path)
    exported = tmp_path / "outcomes.csv"
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={exported}"]) == 0
    said = capsys.readouterr().out
    from spabench import api

    outcomes = api.outcomes(campaign=campaign)
    n_valid, n_invalid = int(outcomes["valid"].sum()), int((~outcomes["valid"]).sum())
    assert n_invalid >= 8 and n_valid == 132 - 3 - 2   # planned, never run, left unscored
    assert f"{n_valid} scored rollout(s) and {n_invalid} invalid attempt(s)" in said
    with exported.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == n_valid + n_invalid
    assert {"policy", "task", "condition", "evaluation_id", "success", "valid", "failure_mode", "lab", "bench_id",
            "rater", "invalid_reason"} <= set(rows[0])
    assert {r["bench_id"] for r in rows} == {"bench-a", "bench-b"} and {r["lab"] for r in rows} == {""}

    by_campaign = _report(tmp_path, "r_campaign", f"campaign={campaign}")
    by_csv = _report(tmp_path, "r_csv", f"outcomes={exported}")
    for name in OUTCOME_TABLES:
        a = pd.read_csv(by_campaign / name, keep_default_na=False)
        b = pd.read_csv(by_csv / name, keep_default_na=False)
        if name == "invalid.csv":   # the CSV's own lab column is listed with its invalid rows
            assert set(b.pop("lab")) == {""}
        assert len(a) > 0, name
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=name)
    for name in ("summary.csv", "failure_modes.csv", "estops.csv", "invalid_by_reason.csv"):
        assert (by_campaign / name).read_bytes() == (by_csv / name).read_bytes(), name
    estops = pd.read_csv(by_csv / "estops.csv")
    assert set(estops["cause"]) >= {"unsafe", "operator", "other"}


def test_two_labs_exports_combine_into_the_per_lab_report(tmp_path, capsys):
    north, south = _filled_campaign(tmp_path, "north"), _filled_campaign(tmp_path, "south")
    files = []
    for campaign in (north, south):
        files.append(tmp_path / f"{campaign.name}.csv")
        assert main(["export", "outcomes", f"campaign={campaign}", f"out={files[-1]}", f"lab=lab_{campaign.name}"]) == 0
    combined = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files])
    both = tmp_path / "both.csv"
    combined.to_csv(both, index=False)
    out = _report(tmp_path, "r_labs", f"outcomes={both}")
    labs = pd.read_csv(out / "labs.csv")
    assert set(labs["lab"]) == {"lab_north", "lab_south"}
    ident = labs[(labs["condition"] == "id")].groupby("lab")["trials"].sum()
    single = pd.read_csv(_report(tmp_path, "r_north", f"campaign={north}") / "summary.csv")
    north_id = single[(single["condition"] == "id") & (single["task"] == "all")]["trials"].sum()
    assert ident["lab_north"] == ident["lab_south"] == north_id
    assert (out / "lab_heterogeneity.csv").is_file()


def test_bad_input_is_one_error_and_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty"
    assert main(["plan", "campaign=smoke", f"out={empty}"]) == 0
    capsys.readouterr()
    target = tmp_path / "o.csv"
    assert main(["export", "outcomes", f"campaign={empty}", f"out={target}"]) == 2
    err = capsys.readouterr().err
    assert err.count("spabench: error:") == 1 and "no scored rollout to export" in err
    assert not target.exists() and not list(tmp_path.glob(".o.csv*"))

    campaign = _filled_campaign(tmp_path)
    capsys.readouterr()
    folder = tmp_path / "a_folder"
    folder.mkdir()
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={folder}"]) == 2
    assert "is a folder" in capsys.readouterr().err and not any(folder.iterdir())
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={tmp_path / 'no' / 'o.csv'}"]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "no").exists()
    mine = tmp_path / "notes.csv"
    mine.write_text("my,own\n1,2\n")
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={mine}"]) == 2
    assert "never overwrites" in capsys.readouterr().err and mine.read_text() == "my,own\n1,2\n"
    assert main(["export", "outcomes", f"campaign={tmp_path / 'nowhere'}", f"out={target}"]) == 2
    assert "no such folder" in capsys.readouterr().err
    # an earlier export of the same columns is replaced
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={target}"]) == 0
    first = target.read_bytes()
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={target}", "lab=north"]) == 0
    assert target.read_bytes() != first and "north" in target.read_text()
    assert not list(tmp_path.glob(".o.csv*"))


@pytest.mark.parametrize("pending", ["ood"])
def test_a_direct_row_whose_partner_is_pending_is_left_out_and_said(tmp_path, capsys, pending):
    campaign = tmp_path / "c"
    assert main(["plan", "campaign=demo_twin", f"out={campaign}"]) == 0
    with Ledger.open(campaign) as ledger:
        trials = ledger.trials()
        direct = next(t for t in trials if t.condition == "direct")
        partner = next(t for t in trials if t.condition == pending and t.matched_group == direct.matched_group
                       and t.policy == direct.policy)
        for trial in trials:
            if trial.trial_id == partner.trial_id:
                continue
            attempt = ledger.begin_attempt(trial.trial_id, bench_kind="sim")
            ledger.finish_attempt(attempt, "complete", "timer")
            ledger.record_score(attempt, "alice", True)
    capsys.readouterr()
    out = tmp_path / "o.csv"
    assert main(["export", "outcomes", f"campaign={campaign}", f"out={out}"]) == 0
    assert "left out: 1 direct/paraphrase row(s) whose partner is not scored yet" in capsys.readouterr().out
    assert main(["report", f"outcomes={out}", f"out={tmp_path / 'r'}", "bootstrap=200"]) == 0   # unpaired=error
