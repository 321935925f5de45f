"""Statistics beyond the paper: between-policy pairs, Holm, completeness, Bradley-Terry, kappa."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import FULL_POLICIES, ID_ONLY_TRIALS, counting_trials, write_csv
from paired_reference import tango_brute_force

from spabench.analysis.agreement import cohen_kappa, rater_agreement
from spabench.analysis.commands import ReportConfig, report
from spabench.analysis.comparisons import between_policy_table, completeness_table, protocol_plan
from spabench.analysis.outcomes import load_outcomes, validate_outcomes
from spabench.analysis.ranking import _counts, bradley_terry_ranking, fit_davidson
from spabench.ledger import Ledger
from spabench.suite.vocabulary import TASKS

COLUMNS = ["policy", "task", "condition", "evaluation_id", "success", "valid"]


def table(records) -> pd.DataFrame:
    return validate_outcomes(COLUMNS, records, list(range(2, len(records) + 2)), source="mem.csv")


def paired(task, condition, outcomes_ab, start=0):
    """Records of policies a and b on shared evaluations with the given (a, b) outcomes."""
    rows = []
    for j, (a, b) in enumerate(outcomes_ab, start=start):
        rows.append(["a", task, condition, f"E{j}", str(a), "true"])
        rows.append(["b", task, condition, f"E{j}", str(b), "true"])
    return rows


def test_between_policy_hand_computed():
    # counting/id: a only 6, b only 1, both 3, neither 2 ; relative_size/id: a only 0, b only 2, both 2
    counting = [(1, 0)] * 6 + [(0, 1)] + [(1, 1)] * 3 + [(0, 0)] * 2
    size = [(0, 1)] * 2 + [(1, 1)] * 2
    records = paired("counting", "id", counting) + paired("relative_size", "id", size, start=100)
    records.append(["c", "counting", "id", "E999", "1", "true"])  # no shared evaluation with a or b
    got = between_policy_table(table(records))
    assert set(zip(got["policy_a"], got["policy_b"], strict=True)) == {("a", "b")}
    by = got.set_index("condition")
    row = by.loc["id"]
    assert row["n_pairs"] == 16 and row["a_only"] == 6 and row["b_only"] == 3
    assert row["estimate"] == pytest.approx(3 / 16)  # the pooled pairs' mean difference
    assert row["p_value"] == pytest.approx(math.erfc(math.sqrt((6 - 3) ** 2 / 9 / 2)))  # McNemar score test
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tango_brute_force(6, 3, 16), abs=2e-6)
    overall = by.loc["overall"]
    assert overall["estimate"] == pytest.approx(3 / 16) and overall["n_pairs"] == 16
    assert (got["p_holm"] >= got["p_value"] - 1e-15).all()


def test_between_policy_on_the_campaign(synthetic, tmp_path):
    outcomes = load_outcomes(write_csv(tmp_path / "o.csv", synthetic.rows))
    got = between_policy_table(outcomes).set_index(["policy_a", "policy_b", "condition"])
    a, b = FULL_POLICIES[:2]
    expected = np.mean([
        np.mean([s for s in synthetic.by_group[(a, t)]["ood"].values()])
        - np.mean([s for s in synthetic.by_group[(b, t)]["ood"].values()]) for t in TASKS])
    assert got.loc[(a, b, "ood"), "n_pairs"] == 300
    assert got.loc[(a, b, "ood"), "estimate"] == pytest.approx(expected)
    assert got.loc[(a, b, "overall"), "n_pairs"] == 900
    # the ID-only baselines share their ID evaluations with everyone (evaluation N = same scene)
    assert got.loc[("groot_fft", "vla0", "id"), "n_pairs"] == 6 * ID_ONLY_TRIALS["vla0"]
    assert got.loc[(a, "groot_fft", "overall"), "n_pairs"] == 120
    families = got.groupby("family").size().to_dict()
    assert families == {"between_policy_by_condition": 3 * 10 + 7, "between_policy_overall": 10}


def test_completeness_counts_trials_and_never_exceeds_the_plan(synthetic, tmp_path):
    """Measured on main: the bounds counted a re-run trial twice (its invalid attempt and its valid
    rollout: 68 of 138 cells reached past the planned count) and ignored planned trials never run."""
    outcomes = load_outcomes(write_csv(tmp_path / "o.csv", synthetic.rows))
    got = completeness_table(outcomes, protocol_plan(outcomes)).set_index(["policy", "task", "condition"])
    vla = got.loc[("vla0", "counting", "id")]  # 12 of the protocol's 20 ID trials run
    assert (vla["planned"], vla["valid"], vla["missing"], vla["never_run"]) == (20, 12, 8, 8)
    k = vla["successes"]
    assert vla["rate_if_missing_failed"] == pytest.approx(k / 20)
    assert vla["rate_if_missing_succeeded"] == pytest.approx((k + 8) / 20)
    assert got["invalid_attempts"].sum() == 72
    assert (got["invalid_only"] == 0).all()  # every invalid attempt of the campaign was re-run
    assert (got["valid"] + got["missing"] == got["planned"]).all()  # never past the plan
    full = got.loc[[key for key in got.index if key[0] in FULL_POLICIES]]
    assert (full["rate_if_missing_failed"] == full["rate"]).all()  # complete cells: no spread
    assert got.loc[got["valid"] > 0, "valid"].sum() == 2892


def test_completeness_counts_invalid_only_and_never_run_trials():
    rows = [["a", "counting", "id", "E1", "1", "true"], ["a", "counting", "id", "E2", "0", "true"],
            ["a", "counting", "id", "E3", "", "false"], ["a", "counting", "id", "E3", "", "false"],
            ["a", "counting", "id", "E2", "", "false"]]
    plan = pd.DataFrame([("a", "counting", "id", 5)], columns=["policy", "task", "condition", "planned"])
    cell = completeness_table(table(rows), plan).iloc[0]
    # E1, E2 valid (E2 re-run once); E3 two invalid attempts and no valid one; two trials never run
    assert (cell["valid"], cell["invalid_only"], cell["never_run"], cell["missing"]) == (2, 1, 2, 3)
    assert cell["invalid_attempts"] == 3
    assert (cell["rate_if_missing_failed"], cell["rate_if_missing_succeeded"]) == (pytest.approx(1 / 5),
                                                                                 pytest.approx(4 / 5))


def test_davidson_two_players_closed_form():
    # with two players the MLE is pi1/pi2 = W12/W21 and nu = T/sqrt(W12 W21); the fit adds half a tie
    wins = np.array([[[0, 30], [10, 0]]], dtype=float)
    ties = np.array([[[0, 20], [20, 0]]], dtype=float)
    strength, nu = fit_davidson(wins, ties)
    assert strength[0, 0] - strength[0, 1] == pytest.approx(math.log(3), abs=1e-6)
    assert nu[0] == pytest.approx(20.5 / math.sqrt(300), abs=1e-6)


def test_davidson_three_players_maximises_the_likelihood():
    wins = np.array([[[0, 12, 20], [5, 0, 9], [2, 4, 0]]], dtype=float)
    ties = np.array([[[0, 8, 6], [8, 0, 10], [6, 10, 0]]], dtype=float)
    strength, nu = fit_davidson(wins, ties)
    t = ties[0] + 0.5

    def loglik(theta, log_nu):
        p, v, value = np.exp(theta), math.exp(log_nu), 0.0
        for i in range(3):
            for j in range(i + 1, 3):
                d = p[i] + p[j] + v * math.sqrt(p[i] * p[j])
                value += wins[0, i, j] * math.log(p[i] / d) + wins[0, j, i] * math.log(p[j] / d)
                value += t[i, j] * math.log(v * math.sqrt(p[i] * p[j]) / d)
        return value

    best = loglik(strength[0], math.log(nu[0]))
    rng = np.random.default_rng(0)
    for _ in range(200):  # no nearby point does better
        step = rng.normal(scale=0.05, size=4)
        assert loglik(strength[0] + step[:3], math.log(nu[0]) + step[3]) <= best + 1e-9
    assert list(np.argsort(-strength[0])) == [0, 1, 2]


def test_davidson_fits_each_replicate_of_a_batch_as_if_alone():
    """The batched iteration (replicates on the last axis) keeps replicates apart: each row of a
    batch fit equals that table fitted on its own, and the two-player row its closed form."""
    rng = np.random.default_rng(8)
    wins = rng.integers(0, 30, size=(6, 4, 4)).astype(float)
    ties = rng.integers(0, 20, size=(6, 4, 4)).astype(float)
    ties = ties + np.swapaxes(ties, -1, -2)
    wins[0, 2:, :] = wins[0, :, 2:] = ties[0, 2:, :] = ties[0, :, 2:] = 0  # players 3, 4 absent in row 0
    wins[0, 0, 1], wins[0, 1, 0], ties[0, 0, 1], ties[0, 1, 0] = 30, 10, 20, 20
    strength, nu = fit_davidson(wins, ties)
    for b in range(len(wins)):
        alone, nu_alone = fit_davidson(wins[b:b + 1], ties[b:b + 1])
        np.testing.assert_allclose(strength[b], alone[0], rtol=0, atol=1e-8)
        assert nu[b] == pytest.approx(nu_alone[0], rel=1e-8)
    assert strength[0, 0] - strength[0, 1] == pytest.approx(math.log(3), abs=1e-6)
    assert nu[0] == pytest.approx(20.5 / math.sqrt(300), abs=1e-6)


def test_pair_counts_are_the_weighted_sums_over_scenes():
    """_counts (one integer matrix product) against the definition: for every weight row, wins,
    ties and comparisons summed scene pattern by scene pattern (NaN: the policy did not run it)."""
    rng = np.random.default_rng(4)
    patterns = rng.integers(0, 2, size=(40, 4)).astype(float)
    patterns[rng.random(patterns.shape) < 0.2] = np.nan
    weights = rng.integers(0, 6, size=(9, 40))
    wins, ties, compared = _counts(patterns, weights)
    for b in range(len(weights)):
        w = np.zeros((4, 4)), np.zeros((4, 4)), np.zeros((4, 4))
        for pattern, weight in zip(patterns, weights[b], strict=True):
            for i in range(4):
                for j in range(4):
                    x, y = pattern[i], pattern[j]
                    if not (np.isnan(x) or np.isnan(y)):
                        w[0][i, j] += weight * (x == 1 and y == 0)
                        w[1][i, j] += weight * (x == y)
                        w[2][i, j] += weight
        np.testing.assert_array_equal(wins[b], w[0])
        np.testing.assert_array_equal(ties[b], w[1])
        np.testing.assert_array_equal(compared[b], w[2])


def test_ranking_orders_a_dominant_policy_first():
    records = []
    for j in range(40):
        records += [["strong", "counting", "id", f"E{j}", "1" if j % 5 else "0", "true"],
                    ["middle", "counting", "id", f"E{j}", "1" if j % 2 else "0", "true"],
                    ["weak", "counting", "id", f"E{j}", "1" if j % 10 == 0 else "0", "true"]]
    ranking = bradley_terry_ranking(table(records), n_resamples=300)
    assert list(ranking["policy"]) == ["strong", "middle", "weak"] and set(ranking["component"]) == {1}
    assert (ranking["ci_low"] <= ranking["strength"]).all() and (ranking["strength"] <= ranking["ci_high"]).all()
    assert ranking["strength"].sum() == pytest.approx(0, abs=1e-9) and (ranking["tie_parameter"] > 0).all()
    assert ranking.loc[0, "comparisons"] == 80


def test_cohen_kappa_hand_computed():
    # 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no: p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.4
    first = [1] * 25 + [0] * 25
    second = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    observed, kappa, low, high = cohen_kappa(first, second, rng=np.random.default_rng(2))
    assert observed == pytest.approx(0.7) and kappa == pytest.approx(0.4)
    assert low < 0.4 < high and high - low < 0.6
    assert cohen_kappa(first, first)[1] == pytest.approx(1.0)


def _ledger_campaign(tmp_path):
    rows = counting_trials(12, ("pi05", "molmoact2"))
    campaign = tmp_path / "camp"
    ledger = Ledger.create(campaign / "ledger.sqlite", rows, "ab" * 32, {"campaign": "unit"})
    second = [1, 1, 0, 0, 1, 0, 1, 1, 0, 0]
    for n, row in enumerate(rows[:20]):  # 4 trials stay unrun: planned 12, valid 10 per policy
        attempt = ledger.begin_attempt(row.trial_id)
        ledger.finish_attempt(attempt, "complete", "timer")
        success = n % 3 != 0
        ledger.record_score(attempt, "alice", success, None if success else "grasp_failure")
        if n < 10:  # a second rater scores the first ten
            ledger.record_score(attempt, "bob", bool(second[n]), None if second[n] else "wrong_target")
    ledger.close()
    return campaign


def test_campaign_report_plan_and_rater_agreement(tmp_path):
    campaign = _ledger_campaign(tmp_path)
    out = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"campaign_dir": str(campaign), "out": str(out), "bootstrap": 200})) == 0
    completeness = pd.read_csv(out / "completeness.csv").set_index("policy")
    assert completeness.loc["pi05", "planned"] == 12 and completeness.loc["pi05", "valid"] == 10
    agreement = pd.read_csv(out / "agreement.csv")
    success = agreement[agreement["score"] == "success"].iloc[0]
    alice = [n % 3 != 0 for n in range(10)]
    second = [1, 1, 0, 0, 1, 0, 1, 1, 0, 0]
    assert (success["rater_a"], success["rater_b"], success["n"]) == ("alice", "bob", 10)
    assert success["kappa"] == pytest.approx(cohen_kappa(np.array(alice, int), second)[1])
    text = (out / "report.md").read_text()
    assert "## Rater agreement" in text and "the campaign's plan" in text


def test_rater_agreement_needs_shared_attempts():
    ratings = pd.DataFrame({"attempt_id": ["a1", "a2"], "rater": ["x", "y"], "success": [1, 0],
                            "failure_mode": ["", "no_action"]})
    assert rater_agreement(ratings).empty
