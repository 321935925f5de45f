"""One process per campaign, damaged ledgers refused (issue 10, parts 2 and 4)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spabench.ledger import Ledger, LedgerDamaged, LedgerError, LedgerLocked
from tests.integration.harness import trial_rows
from tests.reliability.conftest import REPO, cli, one_error
from tests.support.campaigns import by_alias, planned_timer


def _ledger(tmp_path: Path, n: int = 3) -> Path:
    folder = tmp_path / "campaign"
    folder.mkdir()
    Ledger.create(folder / "ledger.sqlite", trial_rows(n), "h", {"campaign": "guard"}).close()
    return folder


def test_lock_is_exclusive_and_names_the_holder(tmp_path):
    folder = _ledger(tmp_path)
    first = Ledger.open(folder, lock=True)
    try:
        with pytest.raises(LedgerLocked, match=f"host {socket.gethostname()}, pid {os.getpid()}, since 20"):
            Ledger.open(folder, lock=True)
        with Ledger.open(folder, readonly=True) as reader:    # readers never lock
            assert len(reader.trials()) == 3
        with (
            Ledger.open(folder) as scorer,  # nor does a plain writer (scoring)
            pytest.raises(LedgerError, match="only under the campaign lock"),
        ):
            scorer.mark_interrupted()
        attempt = first.begin_attempt("E0000-P1")
    finally:
        first.close()
    with Ledger.open(folder, lock=True) as second:             # released on close
        assert second.mark_interrupted() == [attempt]


def test_a_killed_holder_frees_the_lock(tmp_path):
    folder = _ledger(tmp_path)
    code = (f"import os, sys; from spabench.ledger import Ledger; led = Ledger.open({str(folder)!r}, lock=True); "
            "print('held', flush=True); sys.stdin.readline(); os._exit(9)")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"})
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(LedgerLocked, match=f"pid {child.pid}"):
            Ledger.open(folder, lock=True)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(30) == 9
    finally:
        child.kill()
    with Ledger.open(folder, lock=True) as led:
        assert led.locked


def _damage(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(os.urandom(8192))


def test_a_damaged_ledger_is_refused_on_open(tmp_path):
    folder = _ledger(tmp_path, n=400)
    ledger_file = folder / "ledger.sqlite"
    assert ledger_file.stat().st_size > 64 * 1024
    _damage(ledger_file)
    for kw in ({}, {"readonly": True}, {"lock": True}):
        with pytest.raises(LedgerDamaged, match="the ledger is damaged"):
            Ledger.open(folder, **kw)


def test_report_and_run_refuse_a_damaged_ledger_before_connecting(tmp_path):
    folder = _ledger(tmp_path, n=400)
    _damage(folder / "ledger.sqlite")
    text = one_error(cli("report", f"campaign={folder}", f"out={tmp_path / 'r'}"))
    assert "the ledger is damaged" in text and not (tmp_path / "r").exists()
    started = time.monotonic()
    # the policy card points at a port nobody serves: a refusal that connected first would say so
    proc = cli("run", f"campaign={folder}", "bench=sim_demo", "operator=auto", "+cards.itest.port=9", timeout=120)
    text = one_error(proc)
    assert "the ledger is damaged" in text and "connect" not in text.lower(), text
    assert time.monotonic() - started < 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.sim
def test_two_real_runs_on_one_campaign_the_second_is_refused(tmp_path):
    """Two `spabench run` processes: the second is refused naming the first; the first's attempt completes."""
    pytest.importorskip("mujoco")
    from omegaconf import OmegaConf

    from spabench.standins.serve import ServeScriptedConfig, build_server

    folder = tmp_path / "c"
    assert cli("plan", "campaign=smoke", planned_timer(3.0, ("scripted_compositional",)), f"out={folder}").returncode == 0
    suite = OmegaConf.load(REPO / "conf/suite/spabench.yaml")
    card = OmegaConf.load(REPO / "conf/policy/scripted_compositional.yaml")
    port = _free_port()
    _, server = build_server(ServeScriptedConfig.from_mapping({"policy": card, "mode": "compositional", "port": port,
                                               "host": "127.0.0.1", "seed": 0, "suite": suite}))
    args = ["run", f"campaign={folder}", "bench=sim_demo", "operator=auto",
            *by_alias(folder, [f"+cards.scripted_compositional.port={port}"])]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SPABENCH_ROOT": str(REPO)}
    with server:
        first = subprocess.Popen([sys.executable, "-m", "spabench.cli.main", *args], cwd=REPO, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            running = None
            while running is None and time.monotonic() < deadline and first.poll() is None:
                with Ledger.open(folder, readonly=True) as reader:
                    running = next((a for a in reader.attempts() if a.status == "running"), None)
                time.sleep(0.2)
            assert running is not None, "the first run never started its attempt"
            second = cli(*args, timeout=120)
            text = one_error(second)
            assert f"pid {first.pid}" in text and "in use by another spabench session" in text, text
            out, _ = first.communicate(timeout=180)
        finally:
            first.kill()
    assert first.returncode == 0, out
    with Ledger.open(folder, readonly=True) as reader:
        attempts = reader.attempts()
    assert [(a.attempt_id, a.status) for a in attempts] == [(running.attempt_id, "complete")]
