"""`run(cfg)` end to end: real LeRobot SO101Follower on the emulated Feetech bus, five replay
cameras, an openpi websocket server on loopback, SQLite ledger, HDF5 + MP4 episodes."""

from __future__ import annotations

import io

import numpy as np
import pytest

from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK
from spabench.suite.vocabulary import CAMERAS, JOINTS
from tests.integration.harness import WaveServer, make_campaign, make_cfg
from tests.support.feetech_bus import EmulatedBus


def test_one_trial_campaign_end_to_end(tmp_path):
    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, WaveServer() as server:
        out = io.StringIO()
        code = run(make_cfg(campaign, bus.port, server.port, timer_s=2.0), out=out)
        assert code == EXIT_OK, out.getvalue()
        goal = np.array([bus.goal_deg(j) for j in JOINTS])
        present = np.array([bus.present_deg(j) for j in JOINTS])
    np.testing.assert_allclose(goal, present, atol=0.2)  # the arm is at rest at the end
    assert {"observation/image", "observation/wrist_image", "observation/state", "prompt"} <= server.seen_keys

    ledger = Ledger.open(campaign / "ledger.sqlite")
    (attempt,) = ledger.attempts_for("E0000-P1")
    assert (attempt.status, attempt.stop_reason, attempt.episode_path) == ("complete", "timer", "episodes/E0000-P1-a1")
    assert ledger.next_trial() is None and ledger.unscored_attempts()[0].attempt_id == attempt.attempt_id
    ledger.close()

    folder = campaign / "episodes" / "E0000-P1-a1"
    assert folder.is_dir() and not (campaign / "episodes" / "E0000-P1-a1.partial").exists()
    with EpisodeReader(folder) as ep:
        assert ep.complete
        # provenance: the absolute calibration file, the bench kind and id, not a dry run
        assert ep.attrs["extra.calibration_file"] == str((tmp_path / "calibration" / "spabench_follower.json").resolve())
        assert ep.attrs["extra.bench_kind"] == "so101" and not ep.attrs["extra.dry_run"]
        n = len(ep)
        # the timer (2 s) ended the rollout: the ticks span it, however many a loaded machine managed
        ts = ep.timestamps
        assert n >= 2 and np.all(np.diff(ts) > 0)
        # no tick after the 2 s timer, and the hold came when the timer had run (not earlier): measured
        # on the loop's own clock, so a stalled last tick under load does not shorten the span
        hold = next(e for e in ep.events() if e["kind"] == "hold")
        assert ts[-1] < 2.0 <= hold["t"] < 2.0 + 10.0, (ts[0], ts[-1], hold)
        assert ep.states.shape == (n, 6) and ep.raw_actions.shape == (n, 6)
        attrs = ep.attrs
        assert attrs["attempt_id"] == "E0000-P1-a1" and attrs["evaluation_id"] == "E0000"
        assert attrs["campaign"] == "itest" and attrs["config_hash"] == "itest-hash"
        assert attrs["bench_type"] == "so101" and attrs["calibration_id"].startswith("spabench_follower@")
        assert "protocol: openpi" in attrs["policy_card_yaml"]
        assert attrs["server_metadata"]["policy"] == "wave"
        assert attrs["software_versions"]["lerobot"] == "0.6.1"
        assert attrs["stop_reason"] == "timer" and attrs["valid"]
        # the episode keeps its motion-onset frame (on main the recorder closed before the detector ran)
        from spabench.suite.motion import motion_onset

        assert "motion_onset" in attrs and attrs["motion_onset"] == motion_onset(ep.states) is not None
        chunk = ep.array("action/chunk_id")
        acted = chunk >= 0
        assert acted.sum() > 20 and len(set(chunk[acted])) >= 2
        lat = ep.array("policy/request_latency_s")[acted]
        server_ms = ep.array("policy/server_ms")[acted]
        assert np.all(lat > 0) and np.all(np.isfinite(server_ms)) and np.all(server_ms > 0)
        # EMA (alpha 0.25) on non-gripper joints: executed lags raw; the gripper passes through
        raw, exe = ep.raw_actions[acted], ep.executed_actions[acted]
        first = np.argmax(acted)
        ema_event = next(e for e in ep.events() if e["kind"] == "ema_reset")
        expected0 = 0.25 * raw[0, 0] + 0.75 * ema_event["state"][0]
        assert exe[0, 0] == pytest.approx(expected0, abs=1e-6)
        np.testing.assert_allclose(exe[1:, :5], 0.25 * raw[1:, :5] + 0.75 * exe[:-1, :5], atol=1e-4)
        assert np.abs(exe[:, 0] - raw[:, 0]).max() > 0.5
        np.testing.assert_allclose(exe[:, 5], raw[:, 5], atol=1e-6)
        assert first >= 0
        kinds = [e["kind"] for e in ep.events()]
        assert kinds.index("timer_started") < kinds.index("hold") < kinds.index("episode_end")
        for cam in CAMERAS:
            idx = ep.frame_index(cam)
            kept = int((idx >= 0).sum())
            assert kept == n - ep.attrs["dropped_frames"][cam]
            assert ep.count_frames(cam) == kept
            assert ep.first_frame(cam).shape == (24, 32, 3)
        assert ep.video_info()["wrist"]["error"] is None


def test_no_ema_card_executes_raw_actions(tmp_path):
    campaign = make_campaign(tmp_path)
    out = io.StringIO()
    with EmulatedBus() as bus, WaveServer() as server:
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0, ema_alpha=None), out=out) == 0, out.getvalue()
    with EpisodeReader(campaign / "episodes" / "E0000-P1-a1") as ep:
        acted = ep.array("action/chunk_id") >= 0
        times = ep.timestamps
        # a tick whose target the safety layer cut (a step limit after a late tick) logs a clamp event:
        # without EMA, every other executed action is the policy's raw one
        for e in ep.events():
            if e["kind"] == "clamp":
                acted[int(np.searchsorted(times, e["t"], side="right")) - 1] = False
        assert acted.sum() > 5, (acted.sum(), out.getvalue())
        np.testing.assert_allclose(ep.executed_actions[acted], ep.raw_actions[acted], atol=0.1)


def test_campaign_against_served_tiny_act(tmp_path):
    """`spabench serve lerobot` (its server factory) with a tiny offline ACT checkpoint."""

    from spabench.serve.commands import ServeLerobotConfig, make_lerobot_server
    from tests.support.tiny_act import CHUNK_SIZE, build_tiny_act

    checkpoint = build_tiny_act(tmp_path / "act")
    server = make_lerobot_server(ServeLerobotConfig.from_mapping({"checkpoint": str(checkpoint), "port": 0}))
    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, server:
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=3.0, width=64, height=48, ema_alpha=None,
                       policy={"horizon": CHUNK_SIZE, "execute_steps": CHUNK_SIZE})
        out = io.StringIO()
        assert run(cfg, out=out) == EXIT_OK, out.getvalue()
        assert server.requests >= 2 and server.resets >= 1, out.getvalue()
    with EpisodeReader(campaign / "episodes" / "E0000-P1-a1") as ep:
        chunks = ep.array("action/chunk_id")
        acted = chunks >= 0
        # the served ACT's actions reached the arm, finite, from more than one chunk (the next chunk was
        # asked for and used); counted in chunks, not ticks: on a loaded machine torch took most of a
        # 1.5 s rollout for the second chunk (10 ticks acted, one chunk of CHUNK_SIZE)
        assert len(set(chunks[acted].tolist())) >= 2 and np.all(np.isfinite(ep.raw_actions[acted]))
        assert ep.attrs["server_metadata"]["policy_type"] == "act"
