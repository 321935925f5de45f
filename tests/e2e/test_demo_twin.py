"""End to end on the embedded default: `spabench demo` plans, serves the scripted stand-ins over the
openpi protocol, runs every trial on the MuJoCo twin with the auto operator, records, scores and
reports. All real parts: the CLI in a subprocess, SQLite, HDF5, MP4, MuJoCo, websockets."""

from __future__ import annotations

import csv
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from spabench.suite.vocabulary import CAMERAS

pytestmark = [pytest.mark.sim, pytest.mark.slow]

SMALL = [
    "campaign.tasks=[relational_placement]",
    "campaign.counts.id=1", "campaign.counts.ood=1", "campaign.counts.direct=1",
    "campaign.counts.paraphrase_ood=0", "campaign.counts.paraphrase_direct=0",
    "campaign.counts.cross_task=0", "campaign.counts.no_movement=1", "campaign.counts.movement_required=0",
    "campaign.policies.0.timer_s=6", "campaign.policies.1.timer_s=6",
]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, MUJOCO_GL="egl", PYOPENGL_PLATFORM="egl")
    proc = subprocess.run([sys.executable, "-m", "spabench.cli.main", "demo", f"out={out}", *SMALL],
                          capture_output=True, text=True, timeout=900, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir, proc.stdout


def test_every_planned_trial_ran_and_was_scored_by_the_twin(demo_run):
    run_dir, _ = demo_run
    db = sqlite3.connect(run_dir / "campaign" / "ledger.sqlite")
    trials = db.execute("select count(*) from trials").fetchone()[0]
    assert trials == 8  # 4 per policy: id, ood, direct, no_movement
    attempts = db.execute("select attempt_id, status, episode_path from attempts").fetchall()
    assert len(attempts) == trials and {a[1] for a in attempts} == {"complete"}
    raters = {r[0] for r in db.execute("select rater from scores")}
    assert raters == {"sim_evaluator"}
    assert db.execute("select count(*) from scores").fetchone()[0] == trials
    for _, _, episode_path in attempts:
        folder = run_dir / "campaign" / episode_path
        assert folder.is_dir(), folder
        with h5py.File(folder / "episode.h5", "r") as h5:
            steps = len(h5["timestamp"])
            # 6 s at 30 Hz, lockstep on the twin's clock (one more tick when the float sum of
            # physics substeps lands a hair under 6 s)
            assert steps in (180, 181)
            assert h5["observation/state"].shape == (steps, 6)
            assert h5["action/executed"].shape == (steps, 6)
            assert h5.attrs["bench_type"] == "sim"
        for cam in CAMERAS:
            assert (folder / f"cam_{cam}.mp4").stat().st_size > 0


def test_report_counts_match_the_ledger(demo_run):
    run_dir, stdout = demo_run
    report = run_dir / "report"
    for name in ("summary.csv", "contrasts.csv", "failure_modes.csv", "report.md"):
        assert (report / name).is_file(), name
    assert list(report.glob("*.svg"))   # the figures, SVG by default (figures.formats)
    db = sqlite3.connect(run_dir / "campaign" / "ledger.sqlite")
    successes = dict(db.execute(
        "select t.condition, sum(s.success) from scores s join attempts a using (attempt_id) "
        "join trials t using (trial_id) group by t.condition"))
    with open(report / "summary.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["task"] == "relational_placement"]
    by_condition: dict[str, int] = {}
    for r in rows:
        by_condition[r["condition"]] = by_condition.get(r["condition"], 0) + int(r["successes"])
    for condition in ("id", "ood", "direct", "no_movement"):
        assert by_condition[condition] == successes[condition]
    assert "not VLAs" in stdout and "twin results are not robot results" in stdout
