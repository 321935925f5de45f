"""A small hand-written plan (independent of the planner) for ledger tests."""

from __future__ import annotations

import pytest

from spabench.ledger import Ledger, TrialRow

HASH = "c0ffee" * 10 + "abcd"


def _rows() -> list[TrialRow]:
    specs = [  # evaluation, task, condition, scene, matched_group, variant
        ("E0001", "counting", "ood", "counting-ood-000", "counting-mg000", "original"),
        ("E0002", "counting", "direct", "counting-ood-000", "counting-mg000", "original"),
        ("E0003", "counting", "no_intervention", "counting-no_intervention-000", None, "original"),
        ("E0004", "object_state", "paraphrase_ood", "object_state-ood-000", "object_state-mg000", "paraphrase"),
    ]
    rows, order = [], 0
    for eid, task, cond, scene, group, variant in specs:
        for policy, alias in (("pi05", "P2"), ("vla0", "P1")):
            order += 1
            rows.append(TrialRow(
                trial_id=f"{eid}-{alias}", evaluation_id=eid, policy=policy, card=policy, alias=alias,
                task=task, condition=cond, scene_id=scene,
                scene_condition="ood" if cond in ("ood", "direct", "paraphrase_ood") else cond,
                matched_group=group, cell="goal_1_by_removal|counting" if task == "counting" else "closed|white_cup",
                withheld=cond != "no_intervention", instruction=f"instruction {eid}",
                instruction_variant=variant, timer_s=90.0 if policy == "vla0" else 60.0, order=order,
            ))
    return rows


@pytest.fixture
def plan_rows() -> list[TrialRow]:
    return _rows()


@pytest.fixture
def ledger(tmp_path, plan_rows):
    led = Ledger.create(tmp_path / "camp" / "ledger.sqlite", plan_rows, HASH,
                        {"campaign": "unit", "aliases": {"pi05": "P2", "vla0": "P1"}})
    yield led
    led.close()


def make_ledger(request, tmp_path, rows, backend: str, folder: str = "camp") -> Ledger:
    """A fresh ledger of this plan on either back end (PostgreSQL: the session's test server; a test or
    fixture that asks for it names `pg_url` too, so that it is marked `postgres`)."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    return Ledger.create(tmp_path / folder, rows, HASH, {"campaign": "unit", "aliases": {"pi05": "P2", "vla0": "P1"}},
                         url=url)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_ledger(request, tmp_path, plan_rows):
    """The same ledger tests on both back ends."""
    led = make_ledger(request, tmp_path, plan_rows, request.param)
    yield led
    led.close()
