"""The bench check on record (issue 37): `run` names the last check of its bench in its pre-flight
(age, result), and the report's "Bench" section lists the checks made for the campaign. A real
session (`run` on the emulated SO-101 with an openpi server on loopback), the real ledger and report.

Failed before: `run` said nothing of any check, and report.md had no "Bench" section."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spabench.bench_record import CHECKS_DIR, last_check
from spabench.cli.main import main
from spabench.commission.commands import BenchCheckConfig, bench_check
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK
from tests.integration.harness import WaveServer, cfg_data, make_campaign, make_cfg
from tests.support.feetech_bus import EmulatedBus


def write_check(lab: Path, name: str, finished: datetime, result: str, failures: list[str],
                robot_id: str = "spabench_follower") -> Path:
    folder = lab / CHECKS_DIR / name
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({
        "kind": "spabench bench check", "finished": finished.isoformat(timespec="seconds"), "result": result,
        "failures": failures, "bench": {"robot_id": robot_id, "type": "so101"}}))
    return folder


def test_the_newest_check_of_this_bench_is_the_last_one(tmp_path):
    now = datetime.now(UTC)
    write_check(tmp_path, "a", now - timedelta(days=2), "pass", [])
    newest = write_check(tmp_path, "b", now - timedelta(hours=3, minutes=5), "fail", ["health: supply: 4.1 V"])
    write_check(tmp_path, "c", now - timedelta(minutes=1), "pass", [], robot_id="another_arm")
    last = last_check(tmp_path, robot_id="spabench_follower", bench_type="so101")
    assert last is not None and last.folder == str(newest)
    assert last.line(now).startswith("last bench check 3 h 5 min ago (")
    assert "FAILED (1 item(s); first: health: supply: 4.1 V)" in last.line(now)
    assert last_check(tmp_path / "empty") is None


@pytest.mark.slow
def test_run_names_the_last_check_and_the_report_lists_the_campaigns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus() as bus, WaveServer() as server:
        out = io.StringIO()
        cfg = make_cfg(campaign, bus.port, server.port, max_trials=1)
        assert run(cfg, out=out) == EXIT_OK, out.getvalue()
        assert "no bench check on record for this bench" in out.getvalue()

        data = cfg_data(campaign, bus.port, server.port)
        check_cfg = BenchCheckConfig.from_mapping(
            {"bench": data["bench"], "policy": data["policy"], "campaign_dir": str(campaign),
             "out": str(tmp_path / "check"), "camera_s": 0.5, "requests": 3})
        said = io.StringIO()
        assert bench_check(check_cfg, out=said) == 0, said.getvalue()

        out = io.StringIO()
        cfg = make_cfg(campaign, bus.port, server.port, max_trials=1)
        assert run(cfg, out=out) == EXIT_OK, out.getvalue()
    line = next((t for t in out.getvalue().splitlines() if t.startswith("last bench check")), "")
    assert re.match(r"last bench check (just now|\d+ min ago) \(\S+\): passed; " + re.escape(str(tmp_path / "check")),
                    line), out.getvalue()

    from spabench.ledger import Ledger

    with Ledger.open(campaign) as ledger:
        for attempt in ledger.attempts():
            ledger.record_score(attempt.attempt_id, "tester", True)
    assert main(["report", f"campaign={campaign}", f"out={tmp_path / 'report'}", "bootstrap=200"]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    section = text[text.index("## Bench\n"):]
    assert "| pass |" in section and f"| {tmp_path / 'check'} |" in section, section
