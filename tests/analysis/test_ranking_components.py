"""The ranking never ranks policies that were never compared, and resamples matched scenes.

Measured on main: policies A (75%) and B (70%) on scene set S, C (40%) and D (10%) on a disjoint
set T: ranking.csv put C first with rank range 1-1 (no connectivity check); identical copies of a
policy in 35 disconnected components got narrower intervals than one copy; 100k rows (175
policies) took 183 s and 2.25 GB, almost all in the ranking (O(k^2 B) time and memory).
"""

from __future__ import annotations

import numpy as np
import pytest
from analysis_synthetic import COLUMNS, synthetic_campaign, write_csv

from spabench.analysis.comparisons import shared_outcomes
from spabench.analysis.outcomes import load_outcomes, validate_outcomes
from spabench.analysis.ranking import _clusters, bradley_terry_ranking, comparison_components
from spabench.analysis.report import analyse, render_markdown


def _rows(policy, rate, evaluations, prefix):
    n = len(evaluations)
    wins = set(range(round(rate * n)))
    return [[policy, "counting", "id", f"{prefix}{e}", str(int(i in wins)), "", "original", "", "true"]
            for i, e in enumerate(evaluations)]


def _table(rows):
    return validate_outcomes(list(COLUMNS), rows, list(range(2, len(rows) + 2)), source="mem.csv")


def test_disconnected_policies_are_ranked_only_within_their_component():
    s, t = range(20), range(20)
    rows = (_rows("A", 0.75, s, "S") + _rows("B", 0.70, s, "S")
            + _rows("C", 0.40, t, "T") + _rows("D", 0.10, t, "T"))
    ranking = bradley_terry_ranking(_table(rows), n_resamples=300)
    groups = {c: list(g["policy"]) for c, g in ranking.groupby("component")}
    assert groups == {1: ["A", "B"], 2: ["C", "D"]}
    by = ranking.set_index("policy")
    assert by.loc["A", "rank"] == 1 and by.loc["C", "rank"] == 1  # ranks within the component
    assert by[["rank_low", "rank_high"]].max().max() <= 2           # never a rank across components
    for _, g in ranking.groupby("component"):
        assert g["strength"].sum() == pytest.approx(0, abs=1e-9)   # centred within each component
    analysis = analyse(_table(rows), n_resamples=300)
    text = render_markdown(analysis)
    assert "fall into 2 groups that never ran a common evaluation" in text
    assert "### Group 1: A, B" in text and "### Group 2: C, D" in text


def test_identical_copies_in_separate_components_get_the_same_ranking():
    one = _rows("A", 0.75, range(30), "S") + _rows("B", 0.5, range(30), "S")
    many = []
    for copy in range(5):
        many += [[f"{r[0]}{copy}"] + r[1:3] + [f"c{copy}{r[3]}"] + r[4:] for r in one]
    single = bradley_terry_ranking(_table(one), n_resamples=1000, seed=3)
    copies = bradley_terry_ranking(_table(many), n_resamples=1000, seed=3)
    assert sorted(set(copies["component"])) == [1, 2, 3, 4, 5]
    width = float((single["ci_high"] - single["ci_low"]).iloc[0])
    widths = []
    for _, g in copies.groupby("component"):
        np.testing.assert_allclose(g["strength"], single["strength"], atol=1e-9)
        widths.append(float((g["ci_high"] - g["ci_low"]).iloc[0]))
    # the same data: the same interval up to Monte Carlo error (main: the copies' were narrower)
    assert np.mean(widths) == pytest.approx(width, rel=0.15) and min(widths) > 0.6 * width


def test_components_of_a_chain_are_one_component():
    present = np.array([[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 1, 0, 0]], bool)
    assert list(comparison_components(present)) == [0, 0, 0, 1, 1]


def test_clusters_are_matched_scenes(tmp_path):
    outcomes = load_outcomes(write_csv(tmp_path / "o.csv", synthetic_campaign().rows))
    wide = shared_outcomes(outcomes)
    clusters = _clusters(outcomes, wide.index)
    frame = wide.index.to_frame(index=False).assign(cluster=clusters)
    matched = frame[frame["condition"].isin(["ood", "direct", "paraphrase_ood", "paraphrase_direct"])]
    # one OOD scene, its direct control and paraphrases: one cluster of up to four evaluations
    per_cluster = matched.groupby("cluster").size()
    assert per_cluster.max() == 4 and matched["cluster"].nunique() == 6 * 50
    other = frame[~frame.index.isin(matched.index)]
    assert other["cluster"].is_unique and not set(other["cluster"]) & set(matched["cluster"])


def test_cluster_bootstrap_keeps_a_scene_together():
    """Every matched scene holds four evaluations (OOD, direct, two paraphrases) with the same
    outcomes: resampling scenes sees 30 units, not 120, so the interval is about twice as wide as
    for the same rows without matched groups (each evaluation its own unit)."""
    rows = []
    rng = np.random.default_rng(0)
    for scene in range(30):
        a, b = int(rng.random() < 0.7), int(rng.random() < 0.4)
        for condition, variant in (("ood", "original"), ("direct", "original"), ("paraphrase_ood", "paraphrase"),
                                   ("paraphrase_direct", "paraphrase")):
            for policy, success in (("A", a), ("B", b)):
                rows.append([policy, "counting", condition, f"{condition}{scene}", str(success), f"g{scene}",
                             variant, "", "true"])
    clustered = bradley_terry_ranking(_table(rows), n_resamples=1000, seed=1)
    without = [c for c in COLUMNS if c != "matched_group"]
    loose = validate_outcomes(without, [r[:5] + r[6:] for r in rows], list(range(2, len(rows) + 2)),
                              source="mem.csv")
    unclustered = bradley_terry_ranking(loose, n_resamples=1000, seed=1)
    np.testing.assert_allclose(clustered["strength"], unclustered["strength"], atol=1e-9)
    width = lambda t: float((t["ci_high"] - t["ci_low"]).iloc[0])  # noqa: E731
    assert width(clustered) > 1.6 * width(unclustered)
