"""Paired intervals that always exist and agree with the paired test; exact tests at any size.

Measured on main (the 2,892-row campaign): 18 of 54 per-task contrast rows printed "no interval",
among them the strongest effect (+100 pp, McNemar p = 1.9e-6); 21 bounds sat at exactly 0 from the
bootstrap's lattice; 5 rows excluded 0 with a McNemar p >= 0.0625 in the same row; comparisons.csv
printed "+0.0 pp [0.0, 0.0]" with no discordant pair. The exact McNemar summed binomial
coefficients over 2 ** n and overflowed at 1,024 discordant pairs, so the report on the table
replicated 7x (20,244 rows) ended in an OverflowError.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import COLUMNS, synthetic_campaign, write_csv
from paired_reference import tango_brute_force
from statsmodels.stats.contingency_tables import mcnemar

from spabench.analysis import exact
from spabench.analysis.comparisons import between_policy_table
from spabench.analysis.contrasts import matched_contrast
from spabench.analysis.outcomes import load_outcomes, validate_outcomes
from spabench.analysis.report import analyse, render_markdown, write_report


@pytest.mark.parametrize("b, c, n", [(20, 0, 20), (2, 0, 20), (4, 0, 20), (3, 1, 20), (0, 0, 20), (0, 0, 10),
                                     (7, 2, 10), (0, 9, 10), (5, 5, 20), (13, 4, 120), (1, 0, 1)])
def test_tango_interval_equals_the_brute_force_score_inversion(b, c, n):
    low, high = exact.tango_interval(b, c, n)
    ref_low, ref_high = tango_brute_force(b, c, n)
    assert low == pytest.approx(ref_low, abs=2e-6) and high == pytest.approx(ref_high, abs=2e-6)
    assert low <= (b - c) / n <= high


def test_the_strongest_per_task_effect_has_an_interval():
    # 20 of 20 pairs favour the first condition: main printed "no interval" (a one-point bootstrap)
    low, high = exact.tango_interval(20, 0, 20)
    assert (round(100 * low), round(100 * high)) == (68, 100)


def test_score_p_equals_statsmodels_and_the_interval_excludes_zero_exactly_when_it_rejects():
    disagreements = 0
    for n in (10, 20):
        for b, c in itertools.product(range(n + 1), repeat=2):
            if b + c > n:
                continue
            p = exact.mcnemar_score_counts(b, c)
            if b + c:
                ref = mcnemar([[n - b - c, b], [c, 0]], exact=False, correction=False).pvalue
                assert p == pytest.approx(ref, rel=1e-10)
            low, high = exact.tango_interval(b, c, n)
            disagreements += (p < 0.05) != (low > 0 or high < 0)
    assert disagreements == 0


def test_vectorised_tango_equals_the_scalar_calls():
    b, c, n = np.array([0, 3, 20, 5]), np.array([0, 1, 0, 9]), np.array([10, 20, 20, 50])
    low, high = exact.tango_interval(b, c, n)
    for i in range(4):
        assert (low[i], high[i]) == pytest.approx(exact.tango_interval(int(b[i]), int(c[i]), int(n[i])), abs=1e-12)


@pytest.mark.parametrize("b, c", [(510, 514), (0, 2000), (1023, 1), (40_000, 39_000), (7, 3)])
def test_exact_mcnemar_is_stable_at_any_size(b, c):
    ref = mcnemar([[0, b], [c, 0]], exact=True).pvalue
    assert exact.mcnemar_exact_counts(b, c) == pytest.approx(ref, rel=1e-10, abs=1e-300)
    if (b, c) == (510, 514):
        assert round(exact.mcnemar_exact_counts(b, c), 3) == 0.925


def _records(pairs_by_task):
    rows = []
    for task, pairs in pairs_by_task.items():
        for j, (first, second) in enumerate(pairs):
            group = f"{task}/g{j}"
            rows.append(["p", task, "ood", f"{task}-o{j}", str(second), group, "original", "", "true"])
            rows.append(["p", task, "direct", f"{task}-d{j}", str(first), group, "original", "", "true"])
    return validate_outcomes(list(COLUMNS), rows, list(range(2, len(rows) + 2)), source="mem.csv")


@pytest.mark.slow
def test_per_task_rows_use_tango_with_the_score_test():
    # object_state: b=6, c=1 of 20; counting: all 10 pairs (1, 0); size: no discordant pair
    table = _records({
        "object_state": [(1, 0)] * 6 + [(0, 1)] + [(1, 1)] * 5 + [(0, 0)] * 8,
        "counting": [(1, 0)] * 10,
        "relative_size": [(1, 1)] * 4 + [(0, 0)] * 6,
    })
    rows = matched_contrast(table, "direct_minus_ood").set_index("task")
    for task, (b, c, n) in {"object_state": (6, 1, 20), "counting": (10, 0, 10), "relative_size": (0, 0, 10)}.items():
        row = rows.loc[task]
        assert row["ci_method"] == "tango_score" and not row["degenerate"]
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(tango_brute_force(b, c, n), abs=2e-6)
        ref = mcnemar([[n - b - c, b], [c, 0]], exact=False, correction=False).pvalue if b + c else 1.0
        assert row["p_value"] == pytest.approx(ref)
        assert math.isnan(row["ci_low_mc_se"]) and row["n_resamples"] == 0
    assert rows.loc["relative_size", "ci_low"] < 0 < rows.loc["relative_size", "ci_high"]
    # task=all with 10 pairs in a task: the pooled pairs (b=16, c=1 of 40), like a task
    overall = rows.loc["all"]
    assert overall["ci_method"] == "tango_score" and overall["estimate"] == pytest.approx(15 / 40)
    assert (overall["ci_low"], overall["ci_high"]) == pytest.approx(tango_brute_force(16, 1, 40), abs=2e-6)


def test_task_all_with_twenty_pairs_per_task_is_the_exact_bootstrap():
    table = _records({"object_state": [(1, 0)] * 6 + [(0, 1)] + [(1, 1)] * 5 + [(0, 0)] * 8,
                      "counting": [(1, 0)] * 9 + [(0, 0)] * 11})
    overall = matched_contrast(table, "direct_minus_ood").set_index("task").loc["all"]
    # the exact law's quantiles, no Monte Carlo error; the exact McNemar on the pooled pairs (b=15, c=1)
    assert overall["ci_method"] == "bootstrap_exact_percentile" and math.isnan(overall["ci_high_mc_se"])
    assert overall["estimate"] == pytest.approx((5 / 20 + 9 / 20) / 2)
    assert overall["p_value"] == pytest.approx(mcnemar([[0, 15], [1, 0]], exact=True).pvalue)
    rng = np.random.default_rng(0)  # brute force: 200,000 index resamples within task
    first = np.array([1] * 6 + [-1] + [0] * 13, float)
    second = np.array([1] * 9 + [0] * 11, float)
    means = (first[rng.integers(0, 20, (200_000, 20))].mean(1) + second[rng.integers(0, 20, (200_000, 20))].mean(1)) / 2
    low, high = np.quantile(means, [0.025, 0.975])
    assert overall["ci_low"] == pytest.approx(low, abs=1 / 40 + 1e-9)
    assert overall["ci_high"] == pytest.approx(high, abs=1 / 40 + 1e-9)


def test_campaign_rows_always_have_an_interval_that_agrees_with_the_test(tmp_path):
    analysis = analyse(load_outcomes(write_csv(tmp_path / "o.csv", synthetic_campaign().rows)), n_resamples=2000)
    contrasts = analysis.contrasts
    tango = contrasts[contrasts["ci_method"] == "tango_score"]
    per_task = tango[tango["task"] != "all"]
    assert len(per_task) == 4 * 3 * 6  # every per-task paired row (4 contrasts x 3 policies x 6 tasks)
    assert set(tango.loc[tango["task"] == "all", "contrast"]) == {"paraphrase_minus_original_ood",
                                                                  "paraphrase_minus_original_direct",
                                                                  "paraphrased_direct_minus_ood"}
    excludes = (tango["ci_low"] > 0) | (tango["ci_high"] < 0)
    assert (excludes == (tango["p_value"] < 0.05)).all()
    assert not contrasts["degenerate"].any()
    bounds = contrasts[["ci_low", "ci_high"]].to_numpy()
    assert np.isfinite(bounds).all()
    pinned = (bounds == 0) & (contrasts["estimate"].to_numpy()[:, None] != 0)
    assert not pinned.any()  # no bound pinned at 0 by the bootstrap lattice
    comparisons = analysis.comparisons
    for r in comparisons.itertuples():
        assert r.ci_low < r.estimate < r.ci_high or r.estimate in (-1.0, 1.0)
        assert ((r.ci_low > 0) or (r.ci_high < 0)) == (r.p_value < 0.05)
    md_rows = [line for line in render_markdown(analysis).splitlines() if " pp " in line]
    assert md_rows and not any("no interval" in line or "MC error" in line for line in md_rows)


def test_between_policy_with_no_discordant_pair_has_a_real_interval():
    rows = []
    for j in range(20):
        for policy in ("a", "b"):
            rows.append([policy, "counting", "id", f"E{j}", str(j % 2), "", "original", "", "true"])
    got = between_policy_table(validate_outcomes(list(COLUMNS), rows, list(range(2, len(rows) + 2)),
                                                 source="mem.csv")).set_index("condition").loc["id"]
    assert got["estimate"] == 0 and got["a_only"] == got["b_only"] == 0 and got["p_value"] == 1.0
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(tango_brute_force(0, 0, 20), abs=2e-6)
    assert got["ci_low"] < -0.1 and got["ci_high"] > 0.1  # main printed "+0.0 pp [0.0, 0.0]"


@pytest.mark.slow
def test_the_campaign_replicated_seven_times_reports(tmp_path):
    """20,244 rows: the same five policies, seven copies of every trial (disjoint evaluation ids and
    matched groups), so the pooled McNemar tables reach thousands of discordant pairs."""
    base = synthetic_campaign()
    rows = []
    for copy in range(7):
        for row in base.rows:
            rows.append(dict(row, evaluation_id=f"c{copy}-{row['evaluation_id']}",
                             matched_group=f"c{copy}-{row['matched_group']}" if row["matched_group"] else ""))
    path = write_csv(tmp_path / "x7.csv", rows)
    outcomes = load_outcomes(path)
    assert int(outcomes["valid"].sum()) == 7 * 2892 == 20_244
    analysis = analyse(outcomes, n_resamples=2000)
    overall = analysis.comparisons[analysis.comparisons["condition"] == "overall"]
    assert overall["n_pairs"].max() == 7 * 900
    assert np.isfinite(analysis.contrasts["p_value"]).all() and np.isfinite(overall["p_value"]).all()
    written = write_report(analysis, tmp_path / "out")
    assert all(p.exists() for p in written)
    assert pd.read_csv(tmp_path / "out" / "summary.csv")["trials"].max() >= 7 * 300
