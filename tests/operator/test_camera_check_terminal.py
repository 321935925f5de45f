"""The terminal operator runs the browser's session-start camera check (issue 34).

Measured on main at b9aa984: with a frozen camera `spabench run operator=terminal` went straight to
the first trial's "Scene ready?" gate, while the browser refused the same camera by name. Now the
terminal runs the same check (spabench.operator.camera_check, shared with the browser) before the
first trial, with the browser's rule: nothing overrides a failing camera; Enter measures again, q
ends the session. A real `run` with the terminal operator, the real LeRobot SO101Follower on the
emulated Feetech bus, a real openpi server on loopback, a real SQLite ledger and the harness's real
replay cameras (a one-frame .npz looped is a frozen camera).
"""

from __future__ import annotations

import io

import pytest

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.suite.vocabulary import CAMERAS
from tests.console.test_camera_check import frozen_npz
from tests.integration.harness import WaveServer, cfg_data, make_campaign, run_config
from tests.support.feetech_bus import EmulatedBus

pytest.importorskip("lerobot")
pytestmark = [pytest.mark.slow, pytest.mark.bench]   # sessions on the emulated bus with LeRobot cameras


def _run(tmp_path, answers: str, cameras: dict | None = None) -> tuple[int, str, list, list]:
    """One terminal session reading `answers`; returns (exit code, its output, attempts, camera_check events)."""
    campaign = make_campaign(tmp_path)
    out = io.StringIO()
    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        data = cfg_data(campaign, bus.port, server.port, timer_s=1.0,
                        operator={"type": "terminal", "keys": False, "status_line": False, "rater": "ana"},
                        bench={"cameras": cameras} if cameras else None)
        code = run(run_config(data), out=out, stdin=io.StringIO(answers))
    with Ledger.open(campaign, readonly=True) as ledger:
        attempts = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        checks = ledger.events(kind="camera_check")
    return code, out.getvalue(), attempts, checks


def test_a_frozen_camera_is_refused_by_name_before_the_first_trial(tmp_path):
    cams = {c: {"type": "spabench_replay", "index_or_path": "pattern", "width": 32, "height": 24, "fps": 30}
            for c in CAMERAS}
    cams["overhead"] = {**cams["overhead"], "index_or_path": str(frozen_npz(tmp_path, 32, 24))}
    # Enter: measure again (the camera is still frozen: refused again, no way past it); q: end the session
    code, text, attempts, checks = _run(tmp_path, "\nq\n", cams)
    assert text.count("CAMERA CHECK FAILED") == 2, text[-3000:]
    assert text.count("overhead: frozen") == 2, text[-3000:]
    assert not any(f"{c}: frozen" in text or f"{c}: slow" in text for c in CAMERAS if c != "overhead"), text[-3000:]
    assert "Session ended at the camera check" in text
    assert "Scene ready?" not in text and attempts == [] and checks == []
    assert "session ended by the operator before the first trial" in text
    assert code == 0, text[-3000:]


def test_a_healthy_bench_passes_the_check_without_a_question(tmp_path):
    code, text, attempts, checks = _run(tmp_path, "q\n")   # q at the first "Scene ready?" gate
    assert "CAMERA CHECK FAILED" not in text and "measure again" not in text, text[-3000:]
    assert "Camera check: " + "; ".join(f"{c} live" for c in CAMERAS[:1]) in text, text[-3000:]
    assert all(f"{c} live (32x24" in text for c in CAMERAS), text[-3000:]
    assert text.index("Camera check: ") < text.index("Scene ready?")
    (check,) = checks
    assert [r["name"] for r in check["payload"]["cameras"]] == list(CAMERAS)
    assert all(r["ok"] for r in check["payload"]["cameras"]) and check["payload"]["rater"] == "ana"
    assert attempts == [] and code == 0, text[-3000:]
