"""Issue 38: a comparison campaign on the MuJoCo twin stops scheduling its pairs once the sequential
test decides, and its report says so. All real parts: `spabench demo` in a subprocess (plan, the
scripted stand-ins over the openpi protocol, `run` on the twin with the auto operator, report),
SQLite, MuJoCo.

The compositional stand-in (a) against the state-blind one (b), which takes the wrong A/B twin of an
Object State scene about half the time, on 12 planned OOD pairs at alpha 0.45 (threshold 1/0.45:
four discordant pairs all for a decide, 2^4/5 = 3.2 >= 2.22). Timers of 5 s: the compositional stand-in
finishes its pick-and-place well within them (9/9 at 5 s as at 8 s), at two thirds of the twin's time."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from spabench.cli.main import main
from tests.support.campaigns import card_aliases

pytestmark = [pytest.mark.sim, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NONE = ["id", "direct", "paraphrase_ood", "paraphrase_direct", "cross_task", "novel_object", "no_intervention",
        "no_movement", "movement_required"]
CAMPAIGN = [
    "campaign.tasks=[object_state]", "campaign.counts.ood=12", *[f"campaign.counts.{c}=0" for c in NONE],
    "campaign.policies.1.name=scripted_state_blind", "campaign.policies.1.card=scripted_state_blind",
    "campaign.policies.0.timer_s=5", "campaign.policies.1.timer_s=5",
    "campaign.stopping.kind=sequential", "campaign.stopping.a=scripted_compositional",
    "campaign.stopping.b=scripted_state_blind", "campaign.stopping.alpha=0.45",
    # the plan's order: with seed 4 the fourth discordant pair comes at pair 6 (12 rollouts); with the
    # default seed 7 at pair 9 (18 rollouts, 58 s instead of about 40 s unloaded). Seeds 1-9 decided after 6-10 pairs
    "campaign.seed=4",
]


def hand_evalue(b_wins: int, a_wins: int) -> Fraction:
    m = b_wins + a_wins
    return Fraction(2 ** m * _factorial(b_wins) * _factorial(a_wins), _factorial(m + 1))


def _factorial(n: int) -> int:
    out = 1
    for k in range(2, n + 1):
        out *= k
    return out


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    out = tmp_path_factory.mktemp("comparison")
    env = dict(os.environ, MUJOCO_GL="egl", PYOPENGL_PLATFORM="egl")
    proc = subprocess.run([sys.executable, "-m", "spabench.cli.main", "demo", f"out={out}", *CAMPAIGN],
                          capture_output=True, text=True, timeout=1200, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir, proc.stdout


def test_run_stops_scheduling_the_pairs_once_decided(comparison):
    run_dir, stdout = comparison
    db = sqlite3.connect(run_dir / "campaign" / "ledger.sqlite")
    assert db.execute("select count(*) from trials").fetchone()[0] == 24
    rows = db.execute(
        "select t.evaluation_id, t.policy, s.success, a.ended_at from attempts a join trials t using (trial_id) "
        "join scores s using (attempt_id) where a.status = 'complete' order by a.ended_at").fetchall()
    assert db.execute("select count(*) from attempts where status != 'complete'").fetchone()[0] == 0
    # the pairs in the order their second rollout ended, and the hand e-value after each
    outcome: dict[str, dict[str, int]] = {}
    pairs = []
    for evaluation, policy, success, _ in rows:
        outcome.setdefault(evaluation, {})[policy] = success
        if len(outcome[evaluation]) == 2:
            pairs.append((outcome[evaluation]["scripted_compositional"], outcome[evaluation]["scripted_state_blind"]))
    assert len(rows) == 2 * len(pairs)            # no half-run pair: the rule stopped between pairs
    wb = wa = 0
    crossed = None
    for n, (a, b) in enumerate(pairs, 1):
        wb += (a, b) == (0, 1)
        wa += (a, b) == (1, 0)
        if hand_evalue(wb, wa) >= 1 / Fraction("0.45"):
            crossed = n
            break
    assert crossed == len(pairs) < 12, (pairs, crossed)   # decided at the last pair run, before the plan's end
    aliases = card_aliases(run_dir / "campaign")   # blinded: the terminal names aliases only
    winner = aliases["scripted_compositional" if wa > wb else "scripted_state_blind"]
    assert f"decided: {winner} after {crossed} pairs (e-process); their remaining trials are not run" in stdout
    looks = [line for line in stdout.splitlines() if line.startswith("comparison ")]
    assert len(looks) == crossed + 1 and not any("scripted" in line for line in looks)
    assert "every trial has a complete attempt except the decided comparison's" in stdout


def test_the_report_states_the_rule_and_the_pairs_used(comparison):
    run_dir, _ = comparison
    text = (run_dir / "report" / "report.md").read_text()
    section = text[text.index("## Stopping rule"):].split("\n## ", 1)[0]
    db = sqlite3.connect(run_dir / "campaign" / "ledger.sqlite")
    ran = db.execute("select count(*) from attempts").fetchone()[0]
    assert "alpha 0.45 at every look" in section
    assert f"after {ran // 2} of 12 planned pairs" in section
    assert f"the rule left unrun: {24 - ran}" in section


def test_a_later_run_starts_nothing(comparison, capsys):
    run_dir, _ = comparison
    campaign = run_dir / "campaign"
    before = sqlite3.connect(campaign / "ledger.sqlite").execute("select count(*) from attempts").fetchone()[0]
    assert main(["run", f"campaign={campaign}"]) == 0
    out = capsys.readouterr().out
    assert "every trial has a complete attempt or belongs to the decided comparison (stopping rule)" in out
    assert sqlite3.connect(campaign / "ledger.sqlite").execute("select count(*) from attempts").fetchone()[0] == before
