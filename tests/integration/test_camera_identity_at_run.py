"""`run` refuses cameras that look swapped against the bench check's references (issue 37).

Measured before: after `bench check` stored a reference picture per camera, exchanging two cameras'
sources (what a reboot does to two USB cameras) was refused by the next `bench check`, but `run`
started the session and recorded the wrist view as the overhead one. Now the session refuses before
the first trial, naming both cameras; accept_cameras=true goes on and the ledger records the override.

Real parts: the emulated SO-101 bus, LeRobot replay cameras (spabench_replay) with a distinct still
scene each, the openpi test server, the real `bench check` storing the references."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from spabench.cli.main import main
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_BENCH, EXIT_OK
from spabench.suite.vocabulary import CAMERAS
from tests.commission.test_bench_check_cameras import H, W, scene_npz
from tests.integration.harness import WaveServer, cfg_data, make_campaign, run_config
from tests.support.feetech_bus import EmulatedBus


def _cameras(sources: dict) -> dict:
    return {c: {"type": "spabench_replay", "index_or_path": str(sources[c]), "width": W, "height": H, "fps": 30}
            for c in CAMERAS}


@contextmanager
def _checked_bench(tmp_path, capsys) -> Iterator[tuple]:
    """A one-trial campaign, an emulated arm with a distinct replay scene per camera, the policy server,
    and the references `bench check` stored of those cameras; yields (campaign, sources, refs, bus, server)."""
    campaign = make_campaign(tmp_path, n=1)
    views = tmp_path / "views"
    views.mkdir()
    sources = {c: scene_npz(views, c, seed=i) for i, c in enumerate(CAMERAS)}
    refs = tmp_path / "refs"
    with EmulatedBus() as bus, WaveServer() as server:
        cams = [f"bench.cameras.{c}={{type: spabench_replay, index_or_path: '{sources[c]}', width: {W}, "
                f"height: {H}, fps: 30}}" for c in CAMERAS]
        assert main(["bench", "check", "bench=so101_emulated", f"bench.port={bus.port}",
                     f"bench.calibration_dir={tmp_path / 'calibration'}", f"out={tmp_path / 'check'}",
                     "camera_s=1", f"camera_references={refs}", *cams]) == 0, capsys.readouterr().out
        assert {p.stem for p in refs.glob("*.png")} == set(CAMERAS)
        yield campaign, sources, refs, bus, server


def _session(campaign, bus, server, sources: dict, refs, **top) -> tuple[int, str]:
    data = cfg_data(campaign, bus.port, server.port, timer_s=1.0, bench={"cameras": _cameras(sources)},
                    camera_references=str(refs), **top)
    out = io.StringIO()
    return run(run_config(data), out=out), out.getvalue()


@pytest.mark.slow
@pytest.mark.bench
def test_run_refuses_swapped_cameras_and_goes_on_with_the_override(tmp_path, capsys):
    with _checked_bench(tmp_path, capsys) as (campaign, sources, refs, bus, server):
        swapped = {**sources, "wrist": sources["overhead"], "overhead": sources["wrist"]}
        code, said = _session(campaign, bus, server, swapped, refs)
        assert code == EXIT_BENCH, said
        assert "wrist and overhead look swapped" in said or "overhead and wrist look swapped" in said, said
        assert "accept_cameras=true" in said
        with sqlite3.connect(campaign / "ledger.sqlite") as db:
            assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 0   # no trial started
        code, said = _session(campaign, bus, server, swapped, refs, accept_cameras=True)
        assert code == EXIT_OK, said
    with sqlite3.connect(campaign / "ledger.sqlite") as db:
        assert db.execute("SELECT status FROM attempts").fetchall() == [("complete",)]
        (payload,) = db.execute("SELECT payload FROM events WHERE kind = 'camera_identity_override'").fetchone()
    assert set(json.loads(payload)["problems"]) == {"wrist", "overhead"}


@pytest.mark.slow
@pytest.mark.bench
def test_run_with_the_cameras_as_checked_starts_without_a_word_on_identity(tmp_path, capsys):
    with _checked_bench(tmp_path, capsys) as (campaign, sources, refs, bus, server):
        code, said = _session(campaign, bus, server, sources, refs)
    assert code == EXIT_OK, said
    assert "camera identity" not in said
