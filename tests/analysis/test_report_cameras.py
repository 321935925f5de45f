"""The campaign report's camera section (issue 36): frames dropped and gaps per camera and policy,
from each attempt's rollout summary in a real SQLite ledger, as `spabench run` writes it. Failed
before: report.md had no camera section and no cameras.csv was written."""

from __future__ import annotations

import pandas as pd
from analysis_synthetic import counting_trials

from spabench.analysis.commands import ReportConfig, report
from spabench.ledger import Ledger


def _frames(skipped: int, gaps: int, dropped: int = 0, longest: float = 0.034) -> dict:
    return {"frames": 900 - skipped, "repeated": 2, "skipped": skipped, "gaps": gaps, "longest_gap_s": longest,
            "fps": 30.0, "dropped": dropped}


def test_the_report_counts_dropped_frames_and_gaps_per_camera_and_policy(tmp_path):
    rows = counting_trials(4, ("steady", "jittery"))
    campaign = tmp_path / "camp"
    ledger = Ledger.create(campaign / "ledger.sqlite", rows, "ab" * 32, {"campaign": "unit"})
    for n, row in enumerate(rows):
        attempt = ledger.begin_attempt(row.trial_id)
        jittery = row.policy == "jittery"
        wrist = _frames(12, 3, dropped=1, longest=0.41) if jittery and n == 1 else _frames(0, 0)
        ledger.log_event(attempt, "rollout_summary", {"steps": 900, "camera_frames": {
            "wrist": wrist, "overhead": _frames(1 if jittery else 0, 0)}})
        ledger.finish_attempt(attempt, "complete", "timer")
        ledger.record_score(attempt, "alice", n % 2 == 0, None if n % 2 == 0 else "grasp_failure")
    ledger.close()
    out = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"campaign_dir": str(campaign), "out": str(out), "bootstrap": 200})) == 0
    table = pd.read_csv(out / "cameras.csv").set_index(["camera", "policy"])
    wrist = table.loc[("wrist", "jittery")]
    assert (wrist["attempts"], wrist["skipped"], wrist["encoder_dropped"], wrist["gaps"]) == (4, 12, 1, 3)
    assert (wrist["longest_gap_s"], wrist["attempts_with_gaps"]) == (0.41, 1)
    assert table.loc[("overhead", "jittery"), "skipped"] == 4 and table.loc[("wrist", "steady"), "gaps"] == 0
    text = (out / "report.md").read_text()
    section = text.split("## Cameras (frames dropped, gaps)")[1]
    assert "| wrist | jittery | 4 | 3588 | 8 | 12 | 1 | 3 | 410 ms | 1 |" in section
    assert "per tenth of the attempts in run order: " in section
