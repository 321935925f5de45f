"""The shipped campaigns plan the published design, with card timers/rates and a carryover-balanced order.

Measured on main: spabench_full planned groot_fft instead of GR00T-N1.7 F-LLM; VLA-0 was planned at
60 s when the campaign left timer_s out (its card says 90); the scene-major order was a cyclic Latin
square, so with three policies only 3 of the 6 sequences occurred and one policy followed another 600
times while the reverse never happened.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise, permutations
from pathlib import Path

import pytest
import yaml

from spabench.ledger import Ledger
from spabench.plan.aliases import seeded_rng
from spabench.plan.commands import PlanConfig, plan
from spabench.plan.config import campaign_from_mapping
from spabench.plan.orders import williams_rows

REPO = Path(__file__).resolve().parents[2]


def _plan(tmp_path, name, **over):
    data = yaml.safe_load((REPO / "conf" / "campaign" / f"{name}.yaml").read_text()) | over
    out = tmp_path / name
    assert plan(PlanConfig.from_mapping({"campaign": data, "suite": {"root": "tasks", "hardware": "hardware",
                                                                     "seed": 0}, "out": str(out)})) == 0
    with Ledger.open(out / "ledger.sqlite") as led:
        return led.trials(), out


def neighbour_pairs(trials):
    """Ordered (earlier, later) policy pairs inside each evaluation's block of adjacent trials."""
    by_eval: dict[str, list] = {}
    for t in sorted(trials, key=lambda t: t.order):
        by_eval.setdefault(t.evaluation_id, []).append(t.policy)
    return Counter((a, b) for row in by_eval.values() for a, b in pairwise(row))


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return _plan(tmp_path_factory.mktemp("paper"), "spabench_paper")


def test_spabench_full_plans_the_three_full_policies(tmp_path):
    trials, _ = _plan(tmp_path, "spabench_full")
    assert Counter(t.policy for t in trials) == {"molmoact2": 900, "pi05": 900, "groot_fllm": 900}
    assert {(t.timer_s, t.control_hz) for t in trials} == {(60.0, 30.0)}
    pairs = neighbour_pairs(trials)
    # Williams design, 3 policies: the square and its mirror; every ordered pair equally often
    assert set(pairs) == set(permutations(["molmoact2", "pi05", "groot_fllm"], 2))
    assert len(set(pairs.values())) == 1, pairs
    sequences = Counter(tuple(p for p in row) for row in _blocks(trials))
    assert len(sequences) == 6 and len(set(sequences.values())) == 1


def _blocks(trials):
    by_eval: dict[str, list] = {}
    for t in sorted(trials, key=lambda t: t.order):
        by_eval.setdefault(t.evaluation_id, []).append(t.policy)
    return list(by_eval.values())


def test_spabench_paper_plans_the_published_split(paper):
    trials, out = paper
    assert len(trials) == 2892
    per = Counter(t.policy for t in trials)
    assert per == {"molmoact2": 900, "pi05": 900, "groot_fllm": 900, "groot_fft": 120, "vla0": 72}
    assert {t.condition for t in trials if t.policy in ("groot_fft", "vla0")} == {"id"}
    vla0_tasks = Counter(t.task for t in trials if t.policy == "vla0")
    assert len(vla0_tasks) == 6 and min(vla0_tasks.values()) >= 10
    assert {(t.timer_s, t.control_hz) for t in trials if t.policy == "vla0"} == {(90.0, 10.0)}
    assert {(t.timer_s, t.control_hz) for t in trials if t.policy != "vla0"} == {(60.0, 30.0)}
    # baselines run the full policies' own ID evaluations (the same scene specifications)
    full_id = {t.evaluation_id for t in trials if t.policy == "pi05" and t.condition == "id"}
    assert {t.evaluation_id for t in trials if t.policy in ("groot_fft", "vla0")} <= full_id
    plan_csv = (out / "plan.csv").read_text().splitlines()[0].split(",")
    assert "timer_s" in plan_csv and "control_hz" in plan_csv


def test_paper_order_balances_carryover_within_each_policy_set(paper):
    trials, _ = paper
    by_set: dict[tuple, list] = {}
    for row in _blocks(trials):
        by_set.setdefault(tuple(sorted(row)), []).append(row)
    assert len(by_set) == 3   # 5 policies (ID with VLA-0), 4 (ID without), 3 (everything else)
    for members, rows in by_set.items():
        pairs = Counter((a, b) for row in rows for a, b in pairwise(row))
        assert set(pairs) == set(permutations(members, 2)), members
        spread = max(pairs.values()) - min(pairs.values())
        cycle = len(members) * (2 if len(members) % 2 else 1)
        assert spread <= 2 * max(1, len(rows) % cycle), (members, pairs)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_williams_rows_balance_neighbours(n):
    names = [f"p{i}" for i in range(n)]
    rows = williams_rows(names, seeded_rng(1, "x"))
    assert len(rows) == (2 * n if n % 2 else n)
    pairs = Counter((a, b) for row in rows for a, b in pairwise(row))
    assert set(pairs) == set(permutations(names, 2)) and len(set(pairs.values())) == 1
    for k in range(n):  # every policy in every position equally often
        assert len(set(Counter(row[k] for row in rows).values())) == 1


def test_card_timer_is_used_unless_the_campaign_overrides(tmp_path):
    trials, _ = _plan(tmp_path, "spabench_all5", counts={"ood": 0, "direct": 0, "paraphrase_ood": 0,
                                                           "paraphrase_direct": 0, "cross_task": 0,
                                                           "novel_object": 0, "no_intervention": 0,
                                                           "no_movement": 0, "movement_required": 0, "id": 1})
    assert {t.timer_s for t in trials if t.policy == "vla0"} == {90.0}
    over = yaml.safe_load((REPO / "conf" / "campaign" / "spabench_all5.yaml").read_text())
    over["policies"][-1] |= {"timer_s": 75.0, "control_hz": 15}
    c = campaign_from_mapping(over)
    from spabench.plan.planner import policy_rates
    assert policy_rates(c)["vla0"] == (75.0, 15.0) and policy_rates(c)["pi05"] == (60.0, 30.0)


def test_policy_counts_beyond_the_campaign_are_refused():
    data = yaml.safe_load((REPO / "conf" / "campaign" / "spabench_paper.yaml").read_text())
    data["policies"][-1]["counts"] = {"id": 25}
    from spabench.errors import ConfigError
    with pytest.raises(ConfigError, match=r"policies\[4\]\.counts\.id.*25"):
        campaign_from_mapping(data)
