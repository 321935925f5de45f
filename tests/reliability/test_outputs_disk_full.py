"""`report` and `export lerobot` on a full disk: one clear error naming the disk, no traceback, and no
hidden `.partial` staging folder left behind; a staging folder left by a killed run is removed by the
next run (measured before: raw tracebacks, and a `.partial` folder that a later export kept)."""

from __future__ import annotations

import io
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

    from spabench.record.commands import ExportLerobotConfig, export_lerobot
    from tests.record.test_export import _two_policy_campaign

    campaign, _ = _two_policy_campaign(tmp_path)
    with tmpfs(tmp_path / "small", "64k") as mnt:
        msg = io.StringIO()
        code = export_lerobot(ExportLerobotConfig.from_mapping({"campaign_dir": str(campaign), "out": str(mnt / "ds")}), msg)
        text = msg.getvalue()
        assert code == 2, text
        assert "export lerobot: the disk holding" in text and "is full" in text and "nothing was written" in text
        assert sorted(p.name for p in mnt.iterdir()) == []                # no dataset, no .partial


def _entries(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
@pytest.mark.bench
def test_export_that_fails_anywhere_on_a_full_disk_leaves_nothing_even_once_collected(tmp_path):
    """Measured before: with the disk filling while LeRobot closed its parquet files, the staging
    folder was removed and the error said so; then, when the caller dropped the error and the
    garbage collector freed the dataset, LeRobot's `__del__` re-ran `finalize()` and recreated
    `.ds.<pid>-<hex>.partial/meta/episodes/chunk-000` (every disk from 64k to 128k here). Each
    size below fails at another point of the export (video copy, data or metadata parquet,
    marker); none may leave anything, while the error is held or after it is gone."""
    import gc

    from spabench.outputs import OutputNotWritten
    from spabench.record.export import export_lerobot_dataset
    from tests.record.test_export import _two_policy_campaign

    campaign, _ = _two_policy_campaign(tmp_path)
    failed = 0
    for size in range(64, 232, 16):
        with tmpfs(tmp_path / f"small{size}", f"{size}k") as mnt:
            written = True
            try:
                export_lerobot_dataset(campaign, mnt / "ds", progress=False)
            except OutputNotWritten as exc:
                written = False
                assert "is full" in str(exc) and "partial output was removed" in str(exc)
                assert _entries(mnt) == [], (size, "while the error is held")
            gc.collect()   # out of the except block: the error and its frames are gone
            assert sorted(p.name for p in mnt.iterdir()) == (["ds"] if written else []), size
            failed += not written
    assert failed >= 5


def _staging_of(parent, name: str, pid: int) -> list:
    return [p for p in parent.iterdir() if p.name.startswith(f".{name}.{pid}-") and p.name.endswith(".partial")]


@pytest.mark.slow
@pytest.mark.bench
def test_next_export_removes_what_a_kill_9_left_and_says_so(tmp_path):
    """A real `spabench export lerobot` killed with SIGKILL while it writes leaves its staging folder;
    the next run removes it and says so. So it does with a previous output retired but not yet
    deleted when the kill came (`.ds.old-<staging>`, made here: the window is two renames wide)
    and with a staging folder named with the next run's own pid (a container gives every command
    the same pid; before, such a folder was taken for a live one and kept)."""
    import signal
    import subprocess
    import sys
    import time

    from tests.record.test_export import _two_policy_campaign

    campaign, _ = _two_policy_campaign(tmp_path)
    parent = tmp_path / "out"
    parent.mkdir()
    out = parent / "ds"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SPABENCH_ROOT": str(REPO)}
    left = []
    for _ in range(5):   # the kill has to land while it writes (not before, not after): try again
        proc = subprocess.Popen([sys.executable, "-m", "spabench.cli.main", "export", "lerobot",
                                 f"campaign={campaign}", f"out={out}", "reencode=true"], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and not _staging_of(parent, "ds", proc.pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        left = _staging_of(parent, "ds", proc.pid)
        if left and proc.returncode == -signal.SIGKILL:
            break
        subprocess.run(["rm", "-rf", str(out)], check=True)
    assert left, "no kill landed while the export wrote"
    retired = parent / ".ds.old-.ds.999999999-0123abcd.partial"   # no such pid
    (retired / "meta").mkdir(parents=True)
    own = parent / f".ds.{os.getpid()}-89abcdef.partial"
    own.mkdir()

    from spabench.record.commands import ExportLerobotConfig, export_lerobot

    msg = io.StringIO()
    assert export_lerobot(ExportLerobotConfig.from_mapping({"campaign_dir": str(campaign), "out": str(out)}), msg) == 0
    text = msg.getvalue()
    assert sorted(p.name for p in parent.iterdir()) == ["ds"], text
    for stale in (*left, retired, own):
        assert f"removed {stale.name}, a partial output left by an interrupted export" in text, text
