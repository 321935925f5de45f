"""The ranking does not depend on the order of the outcomes' rows.

Measured on main: policies A and B on 60 shared evaluations, A succeeding alone on 3 and the other
57 tied. Listed A first, ranking.csv gave rank ranges "1-1 / 2-2"; listed B first, "1-2 / 1-2". The
columns (and so the seeded bootstrap's stream) followed the CSV's first appearances, and a
resample with every comparison tied (equal strengths) broke the tie by column: the policy listed
first always took rank 1.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from analysis_synthetic import COLUMNS, synthetic_campaign

from spabench.analysis.outcomes import validate_outcomes
from spabench.analysis.ranking import bradley_terry_ranking
from spabench.analysis.report import csv_safe_frame


def _table(rows: list[list[str]]) -> pd.DataFrame:
    return validate_outcomes(list(COLUMNS), rows, list(range(2, len(rows) + 2)), source="mem.csv")


def _ranking_csv(rows: list[list[str]], n_resamples: int = 1000) -> bytes:
    """ranking.csv as the report writes it."""
    out = io.StringIO()
    csv_safe_frame(bradley_terry_ranking(_table(rows), n_resamples=n_resamples)).to_csv(out, index=False)
    return out.getvalue().encode()


def _hand_case() -> list[list[str]]:
    """3 wins for A, 0 losses, 57 ties (both succeed on 30, both fail on 27)."""
    rows = []
    for e in range(60):
        a, b = (1, 0) if e < 3 else (1, 1) if e < 33 else (0, 0)
        for policy, success in (("A", a), ("B", b)):
            rows.append([policy, "counting", "id", f"e{e}", str(success), "", "original", "", "true"])
    return rows


def test_hand_case_gives_the_same_ranking_csv_in_either_order():
    rows = _hand_case()
    a_first = _ranking_csv(rows)
    b_first = _ranking_csv(sorted(rows, key=lambda r: r[0] != "B"))
    assert _table(sorted(rows, key=lambda r: r[0] != "B"))["policy"].iloc[0] == "B"
    assert a_first == b_first, (a_first.decode(), b_first.decode())


def test_tied_resamples_share_a_rank():
    """A resample with no win either way ties A and B: both take rank 1 there, so B's range
    reaches 1 and A's stays 1 (A never loses); no policy takes a tie for itself by its place."""
    ranking = bradley_terry_ranking(_table(_hand_case()), n_resamples=1000).set_index("policy")
    assert (ranking.loc["A", "rank_low"], ranking.loc["A", "rank_high"]) == (1, 1)
    assert (ranking.loc["B", "rank_low"], ranking.loc["B", "rank_high"]) == (1, 2)


def test_all_ties_give_symmetric_ranks():
    rows = [[p, "counting", "id", f"e{e}", str(e % 2), "", "original", "", "true"]
            for e in range(40) for p in ("B", "A")]
    ranking = bradley_terry_ranking(_table(rows), n_resamples=500).set_index("policy")
    assert list(ranking["rank"]) == [1, 1]
    assert list(ranking["rank_low"]) == [1, 1] and list(ranking["rank_high"]) == [1, 1]
    assert ranking.loc["A", "strength"] == ranking.loc["B", "strength"]


def test_any_permutation_of_a_reports_outcomes_gives_the_same_ranking_csv():
    synthetic = synthetic_campaign()
    rows = [[str(r.get(c, "")) for c in COLUMNS] for r in synthetic.rows]
    reference = _ranking_csv(rows, n_resamples=200)
    assert reference.count(b"\n") > 3
    rng = np.random.default_rng(34)
    for _ in range(4):
        shuffled = [rows[i] for i in rng.permutation(len(rows))]
        assert _ranking_csv(shuffled, n_resamples=200) == reference
