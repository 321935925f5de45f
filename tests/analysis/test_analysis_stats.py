"""Rates, intervals and contrasts on hand-computable tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats  # reference implementation for Fisher's exact test (installed with statsmodels)

from spabench.analysis import (
    fisher_exact,
    format_rate,
    matched_contrast,
    mcnemar_exact,
    paired_bootstrap,
    proportion_difference,
    success_table,
    unpaired_contrast,
    wilson_interval,
)
from spabench.analysis.bootstrap import contrast_rng
from spabench.analysis.outcomes import validate_outcomes

COLUMNS = ["policy", "task", "condition", "evaluation_id", "success", "matched_group"]


def outcomes(records: list[list[str]]) -> pd.DataFrame:
    return validate_outcomes(COLUMNS, records, list(range(2, len(records) + 2)), source="mem.csv")


def pairs(task: str, both: int, first_only: int, second_only: int, neither: int,
          first="direct", second="ood", policy="p") -> list[list[str]]:
    """Matched groups of one task with a known 2x2 table of (first, second) outcomes."""
    records = []
    outcomes_ = [(1, 1)] * both + [(1, 0)] * first_only + [(0, 1)] * second_only + [(0, 0)] * neither
    for j, (a, b) in enumerate(outcomes_):
        group = f"{task}/g{j}"
        records.append([policy, task, first, f"{task}-{first}-{j}", str(a), group])
        records.append([policy, task, second, f"{task}-{second}-{j}", str(b), group])
    return records


def test_worked_check():
    assert format_rate(88 / 120, *wilson_interval(88, 120)) == "73.3% [64.8, 80.4]"
    assert format_rate(0 / 50, *wilson_interval(0, 50)) == "0.0% [0.0, 7.1]"


def test_wilson_against_closed_form():
    k, n, z = 13, 37, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(centre - half, abs=1e-9)
    assert high == pytest.approx(centre + half, abs=1e-9)
    lows, highs = wilson_interval([0, 5], [0, 10])
    assert math.isnan(lows[0]) and math.isnan(highs[0]) and lows[1] < 0.5 < highs[1]


def test_mcnemar_exact_on_known_discordant_table():
    # b = 6 (first only), c = 1 (second only): p = 2 * P(X <= 1 | n=7, 1/2) = 2 * 8/128
    first = [1] * 5 + [1] * 6 + [0] * 1 + [0] * 8
    second = [1] * 5 + [0] * 6 + [1] * 1 + [0] * 8
    assert mcnemar_exact(first, second) == pytest.approx(16 / 128)
    assert mcnemar_exact([1, 0], [1, 0]) == pytest.approx(1.0)


def test_matched_contrast_hand_computed():
    records = pairs("object_state", 5, 6, 1, 8) + pairs("counting", 0, 5, 0, 5)
    table = matched_contrast(outcomes(records), "direct_minus_ood", n_resamples=400, seed=3)
    rows = table.set_index("task")
    assert rows.loc["object_state", "estimate"] == pytest.approx(0.25)
    assert rows.loc["object_state", "p_value"] == pytest.approx(math.erfc(math.sqrt(25 / 7 / 2)))  # b=6, c=1
    assert rows.loc["object_state", "n_pairs"] == 20
    assert rows.loc["counting", "estimate"] == pytest.approx(0.5)
    assert rows.loc["counting", "p_value"] == pytest.approx(math.erfc(math.sqrt(5 / 2)))  # b=5, c=0
    # all (10 pairs in counting: the pooled pairs, b=11, c=1 of 30, like a task)
    assert rows.loc["all", "estimate"] == pytest.approx(10 / 30)
    assert rows.loc["all", "n_pairs"] == 30
    assert rows.loc["all", "p_value"] == pytest.approx(math.erfc(math.sqrt(100 / 12 / 2)))
    for task in ("object_state", "counting", "all"):
        assert rows.loc[task, "ci_low"] <= rows.loc[task, "estimate"] <= rows.loc[task, "ci_high"]
    again = matched_contrast(outcomes(records), "direct_minus_ood", n_resamples=400, seed=4)
    pd.testing.assert_frame_equal(table.drop(columns="bootstrap_seed"), again.drop(columns="bootstrap_seed"))


def test_paired_bootstrap_weights_tasks_equally():
    rng = contrast_rng(0, "x")
    low, high = paired_bootstrap({"a": np.zeros(20), "b": np.ones(5)}, 300, rng)
    assert low == pytest.approx(0.5) and high == pytest.approx(0.5)
    low, high = paired_bootstrap({"a": np.array([1.0, 0.0] * 10)}, 2000, contrast_rng(0, "y"))
    assert 0.25 < low < 0.5 < high < 0.75


def test_paraphrase_contrast_pairs_paraphrase_with_its_original():
    records = pairs("counting", 2, 0, 3, 5, first="paraphrase_ood", second="ood")
    table = matched_contrast(outcomes(records), "paraphrase_minus_original_ood", n_resamples=100)
    assert table.set_index("task").loc["counting", "estimate"] == pytest.approx(-0.3)
    assert matched_contrast(outcomes(records), "direct_minus_ood").empty


def test_fisher_exact_matches_scipy():
    for table in ([[15, 5], [20, 30]], [[0, 20], [0, 50]], [[20, 0], [0, 50]], [[3, 1], [1, 3]],
                  [[1, 9], [11, 3]], [[0, 0], [4, 6]], [[7, 13], [7, 43]]):
        expected = scipy.stats.fisher_exact(table, alternative="two-sided").pvalue
        assert fisher_exact(table) == pytest.approx(expected, rel=1e-9), table


def test_newcombe_interval_against_hand_formula():
    estimate, low, high, p = proportion_difference(15, 20, 20, 50)
    l1, u1 = wilson_interval(15, 20)
    l2, u2 = wilson_interval(20, 50)
    p1, p2 = 0.75, 0.4
    assert estimate == pytest.approx(0.35)
    assert low == pytest.approx(p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2))
    assert high == pytest.approx(p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))
    assert p == pytest.approx(scipy.stats.fisher_exact([[15, 5], [20, 30]]).pvalue)


def test_unpaired_contrast_all_is_equal_weight():
    records = []
    for task, (k_id, n_id, k_ood, n_ood) in {"counting": (10, 20, 0, 50), "relative_size": (4, 4, 2, 4)}.items():
        for j in range(n_id):
            records.append(["p", task, "id", f"{task}-id-{j}", str(int(j < k_id)), ""])
        for j in range(n_ood):
            records.append(["p", task, "ood", f"{task}-ood-{j}", str(int(j < k_ood)), f"{task}/g{j}"])
    rows = unpaired_contrast(outcomes(records), n_resamples=500).set_index("task")
    assert rows.loc["counting", "estimate"] == pytest.approx(0.5)
    assert rows.loc["relative_size", "estimate"] == pytest.approx(0.5)
    assert rows.loc["all", "estimate"] == pytest.approx(0.5)  # pooled would be 14/24 - 2/54
    assert rows.loc["all", "p_value"] == pytest.approx(
        scipy.stats.fisher_exact([[14, 10], [2, 52]]).pvalue)
    assert rows.loc["all", "ci_low"] <= 0.5 <= rows.loc["all", "ci_high"]


def test_success_table_derived_subsets():
    # 4 OOD scenes; direct on g0..g2; paraphrases on g0 only
    records = [["p", "counting", "ood", f"o{j}", s, f"g{j}"] for j, s in enumerate("1001")]
    records += [["p", "counting", "direct", f"d{j}", s, f"g{j}"] for j, s in enumerate("110")]
    records += [["p", "counting", "paraphrase_direct", "pd0", "0", "g0"]]
    table = success_table(outcomes(records)).set_index(["task", "condition"])
    assert tuple(table.loc[("counting", "ood_matched"), ["successes", "trials"]]) == (1, 3)
    assert tuple(table.loc[("counting", "ood_paraphrase_subset"), ["successes", "trials"]]) == (1, 1)
    assert tuple(table.loc[("counting", "direct_paraphrase_subset"), ["successes", "trials"]]) == (1, 1)
    assert tuple(table.loc[("all", "ood"), ["successes", "trials"]]) == (2, 4)
    assert ("non_relational", "no_intervention") not in table.index
