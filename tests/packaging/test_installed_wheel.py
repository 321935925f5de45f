"""Issue 40 acceptance: the built wheel, installed into a fresh virtual environment outside the
checkout, works from an empty folder: `spabench init lab`, `suite validate`, `plan` of the lab's pilot
campaign, one rollout on the MuJoCo twin with the scripted stand-in (served by `serve scripted`), and
`report`, all through the installed `spabench` script.

Installing LeRobot, torch and MuJoCo from scratch takes far longer than the suite may, and needs the
network. So the fresh environment gets the wheel with `--no-deps`, and its third-party packages are
this environment's: a .pth file in the new site-packages lists this interpreter's site-packages
directories as plain paths (not processed as site dirs, so the checkout's editable-install .pth is
never read) and PYTHONPATH is dropped. The test asserts that `spabench` imports from the new
environment and that its data root is the wheel's spabench/_data/, not the checkout.

Measured before: the wheel held no data; its first command stopped with "cannot find the spabench
root (a folder with conf/config.yaml, tasks/ and hardware/)".
"""

from __future__ import annotations

import csv
import json
import os
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import yaml

from tests.packaging.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.sim]   # subprocess sessions; the twin

HANG_S = 300   # a hang bound per command on a loaded machine, never a speed assertion


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory) -> Path:
    """A fresh environment with the wheel alone installed (no dependencies; see the module docstring)."""
    pytest.importorskip("mujoco")
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=HANG_S)
    python = root / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(built.wheel)], check=True, timeout=HANG_S, env=_env())
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True, env=_env()).stdout.strip())
    ours = dict.fromkeys(sysconfig.get_path(k) for k in ("purelib", "platlib"))
    (site / "_spabench_test_third_party.pth").write_text("".join(f"{p}\n" for p in ours))
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPABENCH_ROOT", "VIRTUAL_ENV")}
    return {**env, "MUJOCO_GL": env.get("MUJOCO_GL", "egl"), "HF_HUB_OFFLINE": "1"}


def _spabench(venv: Path, cwd: Path, *args: str) -> str:
    proc = subprocess.run([str(venv / "bin" / "spabench"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_S, env=_env())
    assert proc.returncode == 0, f"spabench {' '.join(args)}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        assert server.poll() is None, f"serve scripted exited: {server.communicate()[0][-3000:]}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)   # polling a condition with a deadline, not a fixed wait
    pytest.fail(f"serve scripted did not listen on {port} within {HANG_S} s")


def test_the_installed_wheel_runs_a_lab_from_an_empty_folder(venv, built, tmp_path):
    import spabench

    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import spabench, spabench.paths as p; print(spabench.__file__); print(p.repo_root())"],
                           capture_output=True, text=True, check=True, cwd=tmp_path, env=_env()).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and not Path(where[0]).is_relative_to(REPO), where
    assert Path(where[1]) == Path(where[0]).parent / "_data", where

    work = tmp_path / "empty"
    work.mkdir()
    assert _spabench(venv, work, "--version").strip() == f"spabench {spabench.__version__}"
    said = _spabench(venv, work, "init", "lab")
    assert "wrote bench/so101.yaml" in said and "wrote campaign/pilot.yaml" in said
    assert (work / "lab" / "README.md").is_file() and (work / "lab" / "policy" / "scripted_compositional.yaml").is_file()
    _spabench(venv, work, "suite", "validate")
    # the lab's pilot, made tiny: one trial of 2 s (planned, so `run` keeps it)
    _spabench(venv, work, "plan", "campaign=pilot", "config_dir=lab", "out=pilot", "campaign.tasks=[object_state]",
              "campaign.counts.id=1", "campaign.counts.ood=0", "campaign.policies.0.timer_s=2.0")
    planned = yaml.safe_load((work / "pilot" / "config.yaml").read_text())
    assert json.loads((work / "pilot" / ".spabench-output.json").read_text())["version"] == spabench.__version__
    assert planned["config_dir"] == str((work / "lab").resolve())
    with open(work / "pilot" / "plan.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))

    port = _free_port()
    server = subprocess.Popen([str(venv / "bin" / "spabench"), "serve", "scripted", "mode=compositional",
                               f"port={port}"], cwd=work, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        _wait_listening(port, server)
        _spabench(venv, work, "run", "campaign=pilot", f"cards.{row['alias']}.port={port}")
    finally:
        server.terminate()
        server.communicate(timeout=HANG_S)
    with sqlite3.connect(work / "pilot" / "ledger.sqlite") as db:
        assert db.execute("select status from attempts").fetchall() == [("complete",)]
        assert db.execute("select rater from scores").fetchall() == [("sim_evaluator",)]
        (episode,) = db.execute("select episode_path from attempts").fetchone()
    from spabench.record.reader import EpisodeReader

    with EpisodeReader(work / "pilot" / episode) as recorded:   # the episode's provenance
        assert recorded.attrs["software_versions"]["spabench"] == spabench.__version__

    _spabench(venv, work, "report", "campaign=pilot", "out=report")
    assert (work / "report" / "summary.csv").is_file() and (work / "report" / "report.md").is_file()
    marker = json.loads((work / "report" / ".spabench-output.json").read_text())
    assert marker["version"] == spabench.__version__
    assert not list(work.glob("**/conf")), "nothing of the package's data is copied beyond the lab's files"
