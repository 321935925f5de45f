"""Campaign health in the report: per policy, the hottest motor, stall trips, clamps by kind (the
workspace envelope's too) and attempts invalid for health reasons, read from a real SQLite ledger
the way `spabench run` writes it (health_summary, rollout_summary.clamps, cool_down)."""

from __future__ import annotations

import pandas as pd
from analysis_synthetic import counting_trials

from spabench.analysis.commands import ReportConfig, report
from spabench.analysis.health import campaign_health
from spabench.ledger import Ledger
from spabench.suite.vocabulary import JOINTS


def _summary(hottest: float, motor: str = "gripper", stalls: int = 0) -> dict:
    temps = {j: 30.0 for j in JOINTS}
    temps[motor] = hottest
    return {"samples": 100, "max_temperature_c": temps, "stall_events": [{"motor": motor}] * stalls,
            "time_over_current_s": {j: 0.0 for j in JOINTS}}


def _campaign(tmp_path):
    rows = counting_trials(6, ("squeezer", "gentle"))
    campaign = tmp_path / "camp"
    ledger = Ledger.create(campaign / "ledger.sqlite", rows, "ab" * 32, {"campaign": "unit"})
    for n, row in enumerate(rows):
        squeezer = row.policy == "squeezer"
        if squeezer and n < 4:   # the squeezer's first two trials stall the gripper, then are re-run
            bad = ledger.begin_attempt(row.trial_id)
            ledger.log_event(bad, "rollout_summary", {"steps": 40, "clamps": {"workspace": 7, "joint_limit": 1}})
            ledger.log_event(bad, "health_summary", _summary(62.0 + n, stalls=1))
            ledger.finish_attempt(bad, "invalid", "fault", invalid_reason="stall")
        attempt = ledger.begin_attempt(row.trial_id)
        clamps = {"workspace": 3, "max_relative_target": 2} if squeezer else {"max_relative_target": 1}
        ledger.log_event(attempt, "rollout_summary", {"steps": 900, "clamps": clamps})
        ledger.log_event(attempt, "health_summary", _summary(50.0 if squeezer else 38.0, "elbow_flex"))
        ledger.finish_attempt(attempt, "complete", "timer")
        ledger.record_score(attempt, "alice", n % 2 == 0, None if n % 2 == 0 else "grasp_failure")
    ledger.log_event(None, "cool_down", {"waited_s": 95.0, "hot": {"gripper": 63.0}})
    ledger.close()
    return campaign


def test_campaign_health_counts_per_policy(tmp_path):
    health = campaign_health(_campaign(tmp_path))
    table = health.table.set_index("policy")
    sq, ge = table.loc["squeezer"], table.loc["gentle"]
    assert (sq["attempts"], sq["with_telemetry"], sq["stall_events"], sq["invalid_stall"]) == (8, 8, 2, 2)
    assert (sq["max_temperature_c"], sq["hottest_motor"]) == (64.0, "gripper")
    assert sq["median_attempt_max_c"] == 50.0
    assert (sq["clamps_workspace"], sq["clamps_joint_limit"], sq["clamps_max_relative_target"]) == (6 * 3 + 14, 2, 12)
    assert (ge["attempts"], ge["stall_events"], ge["invalid_stall"], ge["clamps_workspace"]) == (6, 0, 0, 0)
    assert (ge["max_temperature_c"], ge["hottest_motor"]) == (38.0, "elbow_flex")
    assert (health.cool_downs, health.cool_down_s) == (1, 95.0)
    assert len(health.hottest_by_period) == 10 and max(health.hottest_by_period) == 64.0


def test_report_has_the_health_section_and_csv(tmp_path):
    out = tmp_path / "report"
    cfg = ReportConfig.from_mapping({"campaign_dir": str(_campaign(tmp_path)), "out": str(out), "bootstrap": 200})
    assert report(cfg) == 0
    text = (out / "report.md").read_text()
    assert "## Campaign health (motors, clamps)" in text
    section = text.split("## Campaign health (motors, clamps)")[1]
    line = next(line for line in section.splitlines() if line.startswith("| squeezer"))
    assert "64 C (gripper)" in line and "| 32 |" in line          # 32 workspace clamps
    assert "paused 1 time(s) for hot motors to cool, 95 s" in text
    csv = pd.read_csv(out / "health.csv").set_index("policy")
    assert csv.loc["squeezer", "invalid_stall"] == 2 and csv.loc["gentle", "clamps_total"] == 6

