"""Faults during a real run: each ends with the arm holding, the attempt invalid with its reason,
and nothing recorded lost. Real LeRobot stack on the emulated bus, real openpi server on loopback."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_BENCH, EXIT_OK, EXIT_SERVER_DOWN, EXIT_SIGINT
from spabench.rollout.session import Session
from spabench.serve.openpi_server import OpenPiServer
from spabench.suite.vocabulary import JOINTS
from tests.integration.harness import WaveServer, after, cfg_data, make_campaign, make_cfg, when
from tests.support.feetech_bus import EmulatedBus


def _arm_at_rest(bus: EmulatedBus) -> None:
    """Goal == present, and no goal is written any more (nothing keeps the arm moving)."""
    n = len(bus.goal_writes())
    time.sleep(0.3)
    assert len(bus.goal_writes()) == n
    goal = np.array([bus.goal_deg(j) for j in JOINTS])
    present = np.array([bus.present_deg(j) for j in JOINTS])
    np.testing.assert_allclose(goal, present, atol=0.2)


def _invalid_attempt(campaign, reason):
    ledger = Ledger.open(campaign / "ledger.sqlite")
    attempts = ledger.attempts_for("E0000-P1")
    ledger.close()
    assert attempts[0].status == "invalid" and attempts[0].invalid_reason == reason, attempts
    return attempts[0]


def _episode_stops_at_fault(campaign, attempt, reason):
    with EpisodeReader(campaign / attempt.episode_path) as ep:
        assert ep.complete and not ep.attrs["valid"] and ep.attrs["invalid_reason"] == reason
        events = ep.events()
        fault = [e for e in events if e["kind"] == "fault"]
        assert fault and fault[0]["invalid_reason"] == reason
        ts = ep.timestamps
        assert len(ts) > 5 and ts[-1] <= fault[0]["t"]  # nothing executed after the fault
        return ep.attrs, events


def test_server_killed_mid_rollout(tmp_path):
    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, WaveServer() as server:
        when(lambda: server.calls >= 4, server.server.stop)
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=30.0, max_trials=1,
                       operator={"go_home_after": False})
        assert run(cfg, out=io.StringIO()) == EXIT_OK
        _arm_at_rest(bus)
    attempt = _invalid_attempt(campaign, "server_lost")
    assert attempt.stop_reason == "fault"
    _episode_stops_at_fault(campaign, attempt, "server_lost")


def _attempts(campaign):
    ledger = Ledger.open(campaign / "ledger.sqlite")
    try:
        return {t.trial_id: [(a.status, a.invalid_reason) for a in ledger.attempts_for(t.trial_id)]
                for t in ledger.trials()}
    finally:
        ledger.close()


def test_dead_server_stops_the_session_before_another_attempt(tmp_path):
    """Measured on main: after the server died, `run` recorded two more (junk) attempts against it."""
    campaign = make_campaign(tmp_path, n=3)
    with EmulatedBus() as bus, WaveServer() as server:
        when(lambda: server.calls >= 4, server.server.stop)
        out = io.StringIO()
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=30.0), out=out) == EXIT_SERVER_DOWN
        _arm_at_rest(bus)
    assert _attempts(campaign) == {"E0000-P1": [("invalid", "server_lost")], "E0001-P1": [], "E0002-P1": []}
    text = out.getvalue()
    assert f"the policy server of P1 (127.0.0.1:{server.port}) does not answer" in text
    assert "session stopped, so that no attempt is recorded against a dead server" in text


def test_run_waits_for_a_restarted_server_and_goes_on(tmp_path):
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus() as bus, WaveServer() as server:
        revived = OpenPiServer(server.infer, server.server.metadata, port=server.port)
        out = io.StringIO()
        when(lambda: server.calls >= 4, server.server.stop)
        # the server comes back only once run has found it down and said that it waits
        when(lambda: "waiting up to" in out.getvalue(), after, 0.5, revived.start)
        try:
            code = run(make_cfg(campaign, bus.port, server.port, timer_s=1.5,
                                operator={"server_wait_s": 30}), out=out)
        finally:
            revived.stop()
    assert code == EXIT_OK, out.getvalue()
    attempts = sorted(_attempts(campaign).values())  # the fault may come in either trial
    assert attempts == [[("complete", None)], [("invalid", "server_lost"), ("complete", None)]]
    text = out.getvalue()
    assert "waiting up to 30 s for it to come back" in text and "answers again; continuing" in text, text


@pytest.mark.parametrize("fault", ["nan", "shape"])
def test_bad_reply_is_a_protocol_error(tmp_path, fault):
    campaign = make_campaign(tmp_path)
    kw = {"nan_after": 2} if fault == "nan" else {"bad_shape_after": 2}
    with EmulatedBus() as bus, WaveServer(**kw) as server:
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=30.0, max_trials=1)
        assert run(cfg, out=io.StringIO()) == EXIT_OK
        _arm_at_rest(bus)
    attempt = _invalid_attempt(campaign, "protocol_error")
    attrs, events = _episode_stops_at_fault(campaign, attempt, "protocol_error")
    assert any(e["kind"] == "went_home" for e in events)  # a server fault: home at bounded speed


def test_bus_goes_silent(tmp_path):
    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, WaveServer() as server:
        when(lambda: server.calls >= 4, bus.go_silent)
        out = io.StringIO()
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=30.0), out=out) == EXIT_BENCH
        assert "bus_error" in out.getvalue()
        _arm_at_rest(bus)
    attempt = _invalid_attempt(campaign, "bus_error")
    attrs, events = _episode_stops_at_fault(campaign, attempt, "bus_error")
    assert not any(e["kind"] == "went_home" for e in events)  # no motion attempted on a dead bus


def test_camera_stops(tmp_path):
    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, WaveServer() as server:
        session = Session(make_cfg(campaign, bus.port, server.port, timer_s=30.0), out=io.StringIO())
        try:
            assert session.open()
            when(lambda: server.calls >= 4, session.bench.robot.cameras["left"].stop)
            assert session.loop() == EXIT_BENCH
        finally:
            session.close()
        _arm_at_rest(bus)
    attempt = _invalid_attempt(campaign, "camera_lost")
    attrs, events = _episode_stops_at_fault(campaign, attempt, "camera_lost")
    fault = next(e for e in events if e["kind"] == "fault")
    assert "left" in fault["error"]


_RUNNER = """
import sys
import yaml
from spabench.rollout.commands import run
from tests.integration.harness import run_config
sys.exit(run(run_config(yaml.safe_load(open(sys.argv[1])))))
"""


def _start_runner(tmp_path, cfg, new_group: bool = False):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # a file, not a pipe: a full pipe would block the harness (the runner keeps its own descriptor).
    # new_group: the runner leads its own process group, so a test can send Ctrl-C the way a
    # terminal does, to every process of the group (encoder workers included)
    with open(tmp_path / "runner.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", _RUNNER, str(path)], stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=os.getcwd(), start_new_session=new_group)
    proc.log_path = tmp_path / "runner.log"
    return proc


def _output(proc) -> str:
    return proc.log_path.read_text(errors="replace")


def _wait_for_steps(folder, n, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the harness exited early ({proc.returncode}): {_output(proc)}")
        try:
            with EpisodeReader(folder) as ep:
                if len(ep) >= n:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    last = ""
    try:
        with EpisodeReader(folder) as ep:
            last = f"{len(ep)} steps"
    except Exception as exc:
        last = repr(exc)
    raise AssertionError(f"{folder}: fewer than {n} steps recorded in {timeout} s ({last}); "
                         f"harness output: {_output(proc)[-3000:]}")


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (Linux /proc), e.g. a runner's video encoder workers."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = {int(k) for k in f.read().split()}
            except OSError:
                continue
            todo += sorted(kids - found)
            found |= kids
    return found


def _wait_gone(pids: set[int], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(os.path.exists(f"/proc/{p}") and "zombie" not in _state(p) for p in pids):
            return
        time.sleep(0.05)
    raise AssertionError(f"processes still running after {timeout} s: {sorted(pids)}")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((line for line in f if line.startswith("State:")), "").lower()
    except OSError:
        return "zombie"


def test_sigkill_mid_episode_then_resume(tmp_path):
    """Issue 9 (measured on main): after kill -9 the ledger named episodes/X while the folder was
    X.partial, plain h5py could not open episode.h5, it had no events, 70 rows against 92 video
    frames, and ended_at was the resume time. Resume now finishes the folder."""
    from datetime import datetime

    import h5py

    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, WaveServer() as server:
        proc = _start_runner(tmp_path, cfg_data(campaign, bus.port, server.port, timer_s=30.0))
        partial = campaign / "episodes" / "E0000-P1-a1.partial"
        try:
            _wait_for_steps(partial, 40, proc)
        finally:
            workers = _descendants(proc.pid)
            killed_at = time.time()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        _wait_gone(workers)  # the orphaned encoders notice and close their files
        # resume in this process: the killed attempt becomes invalid, its folder is finished
        out = io.StringIO()
        resumed_at = time.time()
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0), out=out) == EXIT_OK
        assert "E0000-P1-a1 was interrupted" in out.getvalue()
        assert "recording finished from E0000-P1-a1.partial" in out.getvalue()
        _arm_at_rest(bus)
    ledger = Ledger.open(campaign / "ledger.sqlite")
    a1, a2 = ledger.attempts_for("E0000-P1")
    recovered = ledger.events(a1.attempt_id, kind="episode_recovered")
    ledger.close()
    assert (a1.status, a1.invalid_reason, a1.episode_path) == ("invalid", "interrupted", "episodes/E0000-P1-a1")
    assert a2.status == "complete" and a2.stop_reason == "timer"
    final = campaign / a1.episode_path
    assert final.is_dir() and not partial.exists() and recovered
    ended = datetime.fromisoformat(a1.ended_at).timestamp()
    assert ended <= killed_at + 0.1 < resumed_at  # before the kill, not the resume time
    with h5py.File(final / "episode.h5", "r") as f:  # plain h5py, no SWMR flags
        n = f["timestamp"].shape[0]
        assert n >= 40 and f.attrs["complete"] and f.attrs["recovered"] and "events" in f
    with EpisodeReader(final) as ep:
        assert not ep.partial and ep.complete and len(ep) == n
        assert np.all(np.isfinite(ep.states))
        kinds = [e["kind"] for e in ep.events()]
        assert "timer_started" in kinds and "ema_reset" in kinds
        assert ep.attrs["invalid_reason"] == "interrupted"
        # ended_at is the last recorded row's time (the timer's wall clock start + its timestamp, one
        # tick's length at most later), however long a loaded machine took to flush it before the kill
        start = next(e for e in ep.events() if e["kind"] == "timer_started")
        assert abs(ended - (start["wall_time"] + ep.timestamps[-1])) <= 2 / 30 + 1e-3, (ended, start)
        for cam in ep.cameras:  # rows and frames reconciled
            kept = int((ep.frame_index(cam) >= 0).sum())
            assert ep.count_frames(cam) == kept == ep.video_info()[cam]["frames"]
            assert kept > 0  # (frames still in the dead parent's queue buffer are lost)
            np.testing.assert_allclose(ep.frame_times(cam), ep.timestamps[ep.frame_index(cam) >= 0], atol=1e-4)
    with EpisodeReader(campaign / a2.episode_path) as ep:
        assert ep.complete and ep.attrs["valid"]


def test_ctrl_c_aborts_the_attempt_and_the_session(tmp_path):
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus() as bus, WaveServer() as server:
        proc = _start_runner(tmp_path, cfg_data(campaign, bus.port, server.port, timer_s=30.0), new_group=True)
        _wait_for_steps(campaign / "episodes" / "E0000-P1-a1.partial", 20, proc)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        proc.wait(60)
        assert proc.returncode == EXIT_SIGINT, _output(proc)
        # Issue 9 (measured on main): five encoder tracebacks, the videos lost ("encoder process died")
        assert "Traceback" not in _output(proc) and "KeyboardInterrupt" not in _output(proc), _output(proc)
        _arm_at_rest(bus)
    attempt = _invalid_attempt(campaign, "operator_abort")
    assert attempt.stop_reason == "abort"
    ledger = Ledger.open(campaign / "ledger.sqlite")
    assert ledger.attempts_for("E0001-P1") == []  # the session ended; the next trial did not start
    assert ledger.next_trial().trial_id == "E0000-P1"
    ledger.close()
    with EpisodeReader(campaign / attempt.episode_path) as ep:
        assert ep.complete and ep.attrs["invalid_reason"] == "operator_abort"
        assert not ep.partial
        videos = ep.video_info()
        assert sorted(videos) == sorted(ep.cameras) and len(videos) == 5
        for cam, info in videos.items():  # the aborted attempt keeps all five videos, every frame
            assert info["error"] is None and info["frames"] > 0, (cam, info)
            assert ep.count_frames(cam) == info["frames"] == int((ep.frame_index(cam) >= 0).sum())


def test_second_ctrl_c_during_shutdown_is_an_estop_and_the_cleanup_goes_on(tmp_path):
    """Measured before: a second Ctrl-C while the session shut down (waiting for the videos) raised
    KeyboardInterrupt inside the cleanup: a traceback, exit -2, the ledger and the bus left as they
    were. Now it latches an e-stop (logged in the ledger, 'during shutdown'), the cleanup finishes,
    the motors stay on, and the aborted attempt keeps its five videos."""
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus() as bus, WaveServer() as server:
        proc = _start_runner(tmp_path, cfg_data(campaign, bus.port, server.port, timer_s=30.0), new_group=True)
        _wait_for_steps(campaign / "episodes" / "E0000-P1-a1.partial", 20, proc)
        os.killpg(proc.pid, signal.SIGINT)                   # abort the attempt
        deadline = time.monotonic() + 30
        while "Ctrl-C: attempt aborted" not in _output(proc) and time.monotonic() < deadline:
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGINT)                   # the second one, while shutting down
        proc.wait(60)
        assert proc.returncode == EXIT_SIGINT, _output(proc)
        assert "Traceback" not in _output(proc) and "KeyboardInterrupt" not in _output(proc), _output(proc)
        _arm_at_rest(bus)
        assert all(bus.torque_enabled(j) for j in JOINTS), _output(proc)   # an e-stop: held
    ledger = Ledger.open(campaign / "ledger.sqlite")
    events = ledger.events(kind="estop")
    (attempt,) = ledger.attempts_for("E0000-P1")
    ledger.close()
    assert (attempt.status, attempt.invalid_reason) == ("invalid", "operator_abort"), attempt
    assert len(events) == 1 and events[0]["payload"]["source"] == "ctrl-c", events
    assert events[0]["payload"]["during"] == "shutdown"
    with EpisodeReader(campaign / attempt.episode_path) as ep:
        assert ep.complete and len(ep.video_info()) == 5
        assert all(info["error"] is None and info["frames"] > 0 for info in ep.video_info().values())
