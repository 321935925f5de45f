"""`report` and `export lerobot` on a full disk: one clear error naming the disk, no traceback, and no
hidden `.partial` staging folder left behind; a staging folder left by a killed run is removed by the
next run (measured before: raw tracebacks, and a `.partial` folder that a later export kept)."""

from __future__ import annotations

import os

import pytest

from tests.reliability.conftest import REPO, cli
from tests.reliability.test_disk_full import tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

OUTCOMES = REPO / "tests" / "analysis" / "data" / "example_outcomes.csv"


@pytest.mark.slow
def test_report_on_a_full_disk_is_one_clear_error_and_leaves_nothing(tmp_path):
    with tmpfs(tmp_path / "small", "128k") as mnt:
        stale = mnt / ".report.999999999-0123abcd.partial"      # a killed run's staging folder (no such pid)
        stale.mkdir()
        (stale / "summary.csv").write_text("x")
        proc = cli("report", f"outcomes={OUTCOMES}", f"out={mnt / 'report'}", "bootstrap=200")
        text = proc.stdout + proc.stderr
        assert proc.returncode == 2, text
        assert "Traceback" not in text
        assert "report: the disk holding" in text and "is full" in text and "nothing was written" in text
        assert sorted(p.name for p in mnt.iterdir()) == []                # no report, no .partial, stale gone


@pytest.mark.slow
@pytest.mark.bench
def test_export_on_a_full_disk_is_one_clear_error_and_leaves_nothing(tmp_path):
    import io

    from spabench.config import SpabenchConfig
    from spabench.record.commands import export_lerobot
    from tests.record.test_export import _two_policy_campaign

    campaign, _ = _two_policy_campaign(tmp_path)
    with tmpfs(tmp_path / "small", "64k") as mnt:
        msg = io.StringIO()
        code = export_lerobot(SpabenchConfig.from_mapping({"campaign_dir": str(campaign), "out": str(mnt / "ds")}), msg)
        text = msg.getvalue()
        assert code == 2, text
        assert "export lerobot: the disk holding" in text and "is full" in text and "nothing was written" in text
        assert sorted(p.name for p in mnt.iterdir()) == []                # no dataset, no .partial
