"""A session whose operator places scenes has their rendered references drawn ahead (issue 34).

Real parts: `spabench run` with the terminal operator (stdin a pipe the test writes to, as a person
types), the LeRobot SO101Follower on the emulated Feetech bus, spabench's openpi server on loopback,
the suite's own scenes, the MuJoCo twin rendering in the background worker, the SQLite ledger."""

from __future__ import annotations

import io
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from tests.integration.harness import WaveServer, make_campaign, make_cfg
from tests.support.feetech_bus import EmulatedBus

pytestmark = [pytest.mark.sim, pytest.mark.slow]
SCENES = ("object_state-id-001", "object_state-id-002")   # the harness's two trials, in run order


def _cached(campaign: Path, scene_id: str) -> dict[str, Path]:
    folder = campaign / "references" / "rendered"
    return {p.name.rsplit(".", 2)[1]: p for p in folder.glob(f"{scene_id}-*.png")}


def test_session_start_draws_the_references_before_the_operator_reaches_the_scenes(tmp_path):
    pytest.importorskip("mujoco")
    from spabench.rollout.commands import run
    from spabench.rollout.exits import EXIT_OK

    campaign = make_campaign(tmp_path, n=2)
    read_fd, write_fd = os.pipe()
    person = os.fdopen(write_fd, "w")
    out = io.StringIO()
    done: dict[str, int] = {}
    with EmulatedBus() as bus, WaveServer() as server, os.fdopen(read_fd) as stdin:
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=0.5,
                       operator={"type": "terminal", "keys": False, "status_line": False, "rater": "Ada"})
        session = threading.Thread(target=lambda: done.update(code=run(cfg, out=out, stdin=stdin)), daemon=True)
        session.start()
        try:
            # nobody has typed anything: the session waits at the first scene gate, and the worker draws
            deadline = time.monotonic() + 300
            while not all("sheet" in _cached(campaign, s) for s in SCENES):
                assert session.is_alive(), out.getvalue()
                assert time.monotonic() < deadline, "references not drawn ahead within 300 s:\n" + out.getvalue()
                time.sleep(0.05)
            stamps = {p: p.stat().st_mtime_ns for s in SCENES for p in _cached(campaign, s).values()}
            while any(p.name == "spabench-render-ahead" for p in multiprocessing.active_children()):
                assert time.monotonic() < deadline, "the worker did not end after its last scene"
                time.sleep(0.05)   # it ends by itself once its scenes are drawn
            person.write("\ny\n\n\ny\n\n")   # ready, success, no note; twice
            person.flush()
            session.join(180)
        finally:
            person.close()
            session.join(60)
    text = out.getvalue()
    assert done.get("code") == EXIT_OK, text
    for scene_id in SCENES:   # each gate showed the reference the worker drew; nothing was drawn again
        files = _cached(campaign, scene_id)
        assert sorted(files) == ["middle", "overhead", "placement", "sheet"]
        assert f"Rendered reference (twin, from the specification): {files['sheet']}" in text, text
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert text.count("Success? [y/n") == 2, text
