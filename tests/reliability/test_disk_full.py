"""A full disk never produces a complete attempt (issue 10, part 3): small tmpfs mounts made here."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from spabench.ledger import Ledger
from spabench.rollout.exits import EXIT_STORAGE
from tests.reliability.conftest import REPO, cli
from tests.support.campaigns import by_alias

pytestmark = [pytest.mark.sim,
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")]


@contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _plan(folder: Path) -> None:
    from spabench.plan.commands import PlanConfig, plan

    suite = OmegaConf.load(REPO / "conf/suite/spabench.yaml")
    assert plan(PlanConfig.from_mapping({"campaign": OmegaConf.load(REPO / "conf/campaign/smoke.yaml"), "suite": suite,
                                  "out": str(folder)})) == 0


def _run(folder: Path, timer_s: float = 20.0) -> tuple[int, str, float]:
    """`spabench run` in its own process (a crash shows as a negative return code)."""
    from spabench.standins.serve import ServeScriptedConfig, build_server

    suite = OmegaConf.load(REPO / "conf/suite/spabench.yaml")
    card = OmegaConf.load(REPO / "conf/policy/scripted_compositional.yaml")
    port = _free_port()
    _, server = build_server(ServeScriptedConfig.from_mapping({"policy": card, "mode": "compositional", "port": port,
                                               "host": "127.0.0.1", "seed": 0, "suite": suite}))
    with server:
        started = time.monotonic()
        proc = cli("run", f"campaign={folder}", "bench=sim_demo", "operator=auto", f"operator.timer_s={timer_s}",
                   *by_alias(folder, [f"+cards.scripted_compositional.port={port}"]), timeout=240)
        return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


def _flushed_rows(folder: Path) -> int:
    """Rows the running attempt's episode.h5 holds on disk (0 before its first flush or while unreadable)."""
    from spabench.errors import SpabenchError
    from spabench.record.reader import open_h5

    for h5 in (folder / "episodes").glob("*.partial/episode.h5"):
        try:
            with open_h5(h5) as f:
                return int(f["timestamp"].shape[0]) if "timestamp" in f else 0
        except (SpabenchError, OSError, KeyError):   # not yet in SWMR mode, or mid-write: look again
            return 0
    return 0


def _fill_when_running(folder: Path, target: Path, stop: threading.Event) -> threading.Thread:
    """Fill `target`'s file system once the running attempt has flushed rows to its episode file (read
    back from the file, not guessed from its size or a delay)."""
    def fill():
        while not stop.is_set() and _flushed_rows(folder) == 0:
            time.sleep(0.05)
        if stop.is_set():
            return
        chunk = b"\0" * (1 << 20)
        with open(target / "filler.bin", "wb") as fh:
            try:
                while True:
                    fh.write(chunk)
                    fh.flush()
            except OSError:
                pass
    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    return thread


def test_too_little_space_refuses_to_start_an_attempt(tmp_path):
    folder = tmp_path / "c"
    _plan(folder)
    with tmpfs(folder / "episodes", "8m"):
        code, text, _ = _run(folder)
    assert code == EXIT_STORAGE, text
    assert "MiB free" in text and "the attempt was not started" in text and "Traceback" not in text
    with Ledger.open(folder, readonly=True) as reader:
        assert reader.attempts() == []


def test_disk_fills_during_the_rollout_the_attempt_is_invalid_storage_error(tmp_path):
    folder = tmp_path / "c"
    _plan(folder)
    stop = threading.Event()
    with tmpfs(folder / "episodes", "96m") as episodes:
        filler = _fill_when_running(folder, episodes, stop)
        code, text, elapsed = _run(folder)
        stop.set()
        filler.join(30)
        # One episode folder: still `.partial`, or already finalised by the recorder's recovery (both are
        # fine); the ledger must name the folder that exists, and what was flushed must be readable.
        (episode,) = [p for p in episodes.iterdir() if p.is_dir()] or [None]
        assert episode is not None and episode.name.removesuffix(".partial") == "E0001-P1-a1", \
            (list(episodes.rglob("*")), text[:3000])
        from spabench.record.reader import open_h5

        with open_h5(episode / "episode.h5") as f:   # what was flushed before the disk filled
            assert f["timestamp"].shape[0] > 0
    assert code == EXIT_STORAGE, text
    assert "storage_error" in text and "Traceback" not in text
    # no wait_videos_s (300 s) for videos that will never be written; the bound only tells that
    # wait apart from a slow loaded machine
    assert elapsed < 200, elapsed
    with Ledger.open(folder, readonly=True) as reader:
        (attempt,) = reader.attempts()
        assert (attempt.status, attempt.invalid_reason) == ("invalid", "storage_error")
        assert (folder / attempt.episode_path).resolve() == episode.resolve(), attempt.episode_path
        assert reader.outcomes()["valid"].tolist() == [False]


def test_ledger_on_the_full_disk_stops_cleanly(tmp_path):
    stop = threading.Event()
    with tmpfs(tmp_path / "disk", "112m") as disk:
        folder = disk / "c"
        _plan(folder)
        filler = _fill_when_running(folder, disk, stop)
        code, text, elapsed = _run(folder)
        stop.set()
        filler.join(30)
        assert code == EXIT_STORAGE, text
        assert "Traceback" not in text and ("cannot write the ledger" in text or "storage_error" in text), text
        assert elapsed < 200, (elapsed, text)   # not the 300 s video wait
        print(f"elapsed {elapsed:.1f}\n{text}")
        (disk / "filler.bin").unlink()
        with Ledger.open(folder, lock=True) as led:   # after freeing space: nothing counted as complete
            led.mark_interrupted()
            assert all(a.status == "invalid" for a in led.attempts()) and led.attempts()


def test_the_ledger_reserve_records_the_last_attempt_on_a_full_disk(tmp_path):
    """Measured before the reserve: on a file system filled to the last byte, finishing the running
    attempt failed (LedgerStorageError) and it stayed 'running' until a later run marked it
    interrupted. The ledger keeps 1 MiB beside itself; the session gives it back and retries."""
    from spabench.ledger import LedgerStorageError
    from tests.ledger.conftest import HASH, _rows

    with tmpfs(tmp_path / "disk", "8m") as disk:
        ledger = Ledger.create(disk / "c" / "ledger.sqlite", _rows(), HASH, {"campaign": "full"})
        try:
            reserve = disk / "c" / "ledger.sqlite.reserve"
            assert reserve.stat().st_size == 1 << 20
            attempt = ledger.begin_attempt(ledger.trials()[0].trial_id)
            fd = os.open(disk / "filler.bin", os.O_WRONLY | os.O_CREAT)   # every byte the tmpfs has left
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
            with pytest.raises(LedgerStorageError, match="cannot write the ledger"):
                ledger.finish_attempt(attempt, "invalid", "fault", invalid_reason="storage_error")
            assert ledger.attempt(attempt).status == "running"
            assert ledger.release_reserve() and not reserve.exists()
            ledger.finish_attempt(attempt, "invalid", "fault", invalid_reason="storage_error")
            assert ledger.attempt(attempt).status == "invalid"
            assert not ledger.release_reserve()   # given back once
        finally:
            ledger.close()
