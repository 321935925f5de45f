"""A small campaign planned through the real CLI, for the tests of the commands that read one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
STAND_INS = ("scripted_compositional", "scripted_memorising")
# The console's dead-man (operator.console.deadman_s) for the web sessions of tests that are not about
# it: on a loaded machine (two busy loops beside two test workers) a page's poll was held back over the
# default 1 s and sessions ended "CONSOLE LOST" (test_bench_score_conflict, test_console_reserve). The
# dead-man's own tests (test_deadman, test_bench_deadman, test_console_process) keep the default.
LOADED_DEADMAN_S = 5.0


def planned_timer(timer_s: float, cards: tuple[str, ...] = STAND_INS) -> str:
    """The `plan` override giving each stand-in card `timer_s`: a counted run keeps the planned timer
    (rollout.binding.check_timer_binding), so a test that wants short rollouts plans them."""
    return "campaign.policies=[" + ",".join(f"{{name:{c},card:{c},timer_s:{float(timer_s)}}}" for c in cards) + "]"


def plan_smoke(tmp_path: Path, name: str = "c", **campaign) -> Path:
    """conf/campaign/smoke.yaml with `campaign` fields changed, planned by `spabench plan` into tmp_path/name."""
    from spabench.cli.main import main

    data = yaml.safe_load((REPO / "conf" / "campaign" / "smoke.yaml").read_text())
    data.update(campaign)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / name
    assert main(["plan", f"campaign={path}", f"out={out}"]) == 0
    return out


def ledger_count(campaign: Path, table: str) -> int:
    """Rows of one ledger table (attempts, events): nothing written means these stay the same."""
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def card_aliases(campaign: Path) -> dict[str, str]:
    """card -> alias, as the campaign's plan.csv records them (the card's name when not blinded)."""
    import csv

    with open(campaign / "plan.csv", newline="") as fh:
        return {row["card"]: row["alias"] for row in csv.DictReader(fh)}


def by_alias(campaign: Path, args: list[str]) -> list[str]:
    """`cards.<card>.<field>=v` arguments as `run` takes them: a blinded campaign's cards by alias only."""
    aliases = card_aliases(campaign)
    out = []
    for arg in args:
        prefix, _, rest = arg.partition("cards.")
        card, dot, tail = rest.partition(".")
        out.append(f"{prefix}cards.{aliases.get(card, card)}{dot}{tail}" if rest and not prefix.strip("+~") else arg)
    return out
