"""Labs and benches as a factor (issue 36): a `lab` column, pairing within a lab, per-lab tables with a
heterogeneity test checked against scipy/statsmodels on hand-computed cases, a two-bench campaign's
report naming its benches, and the data API (`spabench.api.outcomes` / `attempts`) on a real ledger.

Measured before: the two-lab example file was refused ("duplicate valid rollout: same policy, task,
condition, evaluation_id and instruction_variant as row 2"), and a campaign run on two benches said
"One bench" in its limitations with no per-bench table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import counting_trials

from spabench import api
from spabench.analysis.commands import ReportConfig, report
from spabench.analysis.comparisons import between_policy_table
from spabench.analysis.contrasts import contrast_table
from spabench.analysis.labs import CHI_SQUARE, FISHER, factor_table, heterogeneity, heterogeneity_table
from spabench.analysis.outcomes import load_outcomes
from spabench.errors import DataError
from spabench.ledger import Ledger

TWO_LABS = Path(__file__).parent / "data" / "two_labs_outcomes.csv"


def _fisher_by_hand(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher p of [[a, b], [c, d]]: the hypergeometric tables with the same margins that are
    no more probable than the observed one."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(col, x) * math.comb(n - col, row - x) / math.comb(n, row)

    observed = prob(a)
    support = range(max(0, row + col - n), min(row, col) + 1)
    return sum(prob(x) for x in support if prob(x) <= observed * (1 + 1e-7))


def test_two_labs_give_a_per_lab_table_and_fishers_test_as_computed_by_hand():
    outcomes = load_outcomes(TWO_LABS)   # failed before: duplicate evaluation ids across the labs
    table = factor_table(outcomes, "lab")
    ident = table[table["condition"] == "id"].set_index("lab")
    assert (ident.loc["lab_north", "successes"], ident.loc["lab_north", "trials"]) == (9, 10)
    assert (ident.loc["lab_south", "successes"], ident.loc["lab_south", "trials"]) == (2, 10)
    # Wilson 95% for 9/10, from the closed form by hand
    z, p, n = 1.959963984540054, 0.9, 10
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert ident.loc["lab_north", "wilson_low"] == pytest.approx(centre - half)
    assert ident.loc["lab_north", "wilson_high"] == pytest.approx(centre + half)
    tests = heterogeneity_table(table, "lab").set_index("condition")
    assert tests.loc["id", "test"] == FISHER
    assert tests.loc["id", "p_value"] == pytest.approx(_fisher_by_hand(9, 1, 2, 8))   # 0.00547
    assert tests.loc["id", "p_value"] == pytest.approx(0.005477, abs=1e-6)
    assert tests.loc["id", "flagged"] == "lab_north, lab_south"
    assert tests.loc["ood", "p_value"] == pytest.approx(_fisher_by_hand(3, 3, 2, 4)) and tests.loc["ood", "flagged"] == ""


def test_three_labs_use_the_chi_square_test_as_statsmodels_computes_it():
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    successes, trials = np.array([18, 9, 12]), np.array([20, 20, 20])
    test, statistic, p, residual = heterogeneity(successes, trials)
    reference = contingency.Table(np.column_stack([successes, trials - successes])).test_nominal_association()
    assert test == CHI_SQUARE
    assert statistic == pytest.approx(reference.statistic) and p == pytest.approx(reference.pvalue)
    # the adjusted residuals are statsmodels' standardized residuals of the success column
    standardized = contingency.Table(np.column_stack([successes, trials - successes])).standardized_resids
    np.testing.assert_allclose(residual, np.asarray(standardized)[:, 0])
    # a cell where every rollout failed differs nowhere
    assert heterogeneity(np.array([0, 0, 0]), np.array([5, 6, 7]))[2] == 1.0


def test_two_labs_with_the_same_evaluation_ids_pair_within_their_lab():
    outcomes = load_outcomes(TWO_LABS)
    direct = contrast_table(outcomes, n_resamples=200)
    row = direct[(direct["contrast"] == "direct_minus_ood") & (direct["task"] == "counting")].iloc[0]
    assert row["n_pairs"] == 12   # 6 matched scenes in each lab (pairs across labs would make 24)
    assert row["estimate"] == pytest.approx(4 / 12)
    # policy_b ran lab_south's ID scenes only: it shares 10 evaluations with policy_a, not 20
    frame = pd.read_csv(TWO_LABS, dtype=str, keep_default_na=False)
    extra = frame[(frame["lab"] == "lab_south") & (frame["condition"] == "id")].assign(
        policy="policy_b", success="1", failure_mode="")
    both = TWO_LABS.parent / "_two_labs_b.csv"
    try:
        pd.concat([frame, extra]).to_csv(both, index=False)
        comparisons = between_policy_table(load_outcomes(both))
    finally:
        both.unlink(missing_ok=True)
    ident = comparisons[comparisons["condition"] == "id"].iloc[0]
    assert (ident["n_pairs"], ident["a_only"], ident["b_only"]) == (10, 0, 8)


def test_a_direct_rollout_is_never_paired_with_another_labs_ood(tmp_path):
    frame = pd.read_csv(TWO_LABS, dtype=str, keep_default_na=False)
    south_ood = (frame["lab"] == "lab_south") & (frame["condition"] == "ood") & (frame["matched_group"] == "counting/m00")
    path = tmp_path / "unpaired.csv"
    frame[~south_ood].to_csv(path, index=False)
    row = int(frame.index[(frame["lab"] == "lab_south") & (frame["condition"] == "direct")
                          & (frame["matched_group"] == "counting/m00")][0]) + 1   # header row 1, one row removed
    with pytest.raises(DataError, match="unpaired") as info:
        load_outcomes(path)
    assert info.value.row == row
    # the same rows without the lab column are one lab: duplicates, refused
    frame.drop(columns=["lab"]).to_csv(path, index=False)
    with pytest.raises(DataError, match="duplicate valid rollout"):
        load_outcomes(path)


def _two_bench_campaign(tmp_path: Path) -> Path:
    rows = counting_trials(8, ("pi05",))
    campaign = tmp_path / "camp"
    ledger = Ledger.create(campaign / "ledger.sqlite", rows, "ab" * 32, {"campaign": "unit"})
    for n, row in enumerate(rows):
        bench = "bench-left" if n < 4 else "bench-right"
        attempt = ledger.begin_attempt(row.trial_id, bench_id=bench, bench_kind="so101")
        ledger.finish_attempt(attempt, "complete", "timer")
        success = n < 4 or n == 7
        ledger.record_score(attempt, "alice", success, None if success else "grasp_failure")
    ledger.close()
    return campaign


def test_a_two_bench_campaigns_report_names_its_benches(tmp_path):
    campaign = _two_bench_campaign(tmp_path)
    out = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"campaign_dir": str(campaign), "out": str(out), "bootstrap": 200})) == 0
    text = (out / "report.md").read_text()
    assert "One bench" not in text
    assert "2 benches (bench-left, bench-right)" in text and "## Success per bench" in text
    benches = pd.read_csv(out / "benches.csv").set_index("bench_id")
    assert benches.loc["bench-left", "successes"] == 4 and benches.loc["bench-right", "successes"] == 1
    tests = pd.read_csv(out / "bench_heterogeneity.csv")
    assert tests.loc[0, "p_value"] == pytest.approx(_fisher_by_hand(4, 0, 1, 3))


def test_the_data_api_returns_the_ledgers_outcomes_and_attempts(tmp_path):
    campaign = _two_bench_campaign(tmp_path)
    with Ledger.open(campaign, readonly=True) as ledger:
        row = ledger.trials()[0]
        (first,) = ledger.attempts_for(row.trial_id)
    outcomes = api.outcomes(campaign=campaign)
    assert len(outcomes) == 8 and outcomes["valid"].all()
    assert outcomes["success"].sum() == 5 and set(outcomes["bench_id"]) == {"bench-left", "bench-right"}
    assert outcomes.loc[outcomes["attempt_id"] == first.attempt_id, "rater"].item() == "alice"
    attempts = api.attempts(campaign=str(campaign))
    assert len(attempts) == 8 and set(attempts["status"]) == {"complete"}
    assert list(attempts.columns[:3]) == ["attempt_id", "trial_id", "status"]
    assert attempts.set_index("attempt_id").loc[first.attempt_id, "policy"] == "pi05"
    assert (attempts["bench_id"] == "bench-left").sum() == 4
