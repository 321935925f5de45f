"""Per-frame truth, end to end: `run(cfg)` on the emulated arm with replay cameras that stall on purpose.

Issue 9 (measured on main): frames were written one per tick at a nominal 30 fps, so a 10 s rollout
with 0.65 s stalls became an 8.23 s MP4, repeated and skipped camera frames were invisible
(`dropped_frames` 0 while the pattern jumped 23 frames), steps counted time slots, and only every
30th overrun became an event. Ground truth here is the frame counter the replay pattern stamps into
every camera frame, decoded back from the MP4s.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from spabench.bench.cameras import pattern
from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK
from tests.integration.harness import WaveServer, make_campaign, make_cfg
from tests.support.feetech_bus import EmulatedBus

FPS = 30.0
STALL_S = 0.2           # a frozen camera: about 6 frames never delivered (well inside read_latest's 500 ms)
BLOCK_S = 0.3           # a camera whose driver blocks the caller: the loop stalls too


def _truth(ep: EpisodeReader, camera: str) -> tuple[np.ndarray, np.ndarray]:
    """(camera frame index stamped in each MP4 frame, its presentation time)."""
    times, index = [], []
    for t, frame in ep.iter_timed_frames(camera):
        times.append(t)
        index.append(pattern.decode_index(frame))
    return np.asarray(index), np.asarray(times)


@pytest.fixture(scope="module")
def stalled_episode(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("truth")
    campaign = make_campaign(tmp_path)
    with EmulatedBus() as bus, WaveServer() as server:
        # a ring as long as the rollout: on a loaded machine the encoders may lag, never drop
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=3.0, width=96, height=72,
                       operator={"recorder": {"queue_frames": 120}})
        cfg.bench.connect_retries = 3  # the emulated bus shares two cores with the suite
        cams = cfg.bench.cameras
        cams["wrist"].extra = {"stall_every_s": 1.0, "stall_s": STALL_S}
        cams["overhead"].extra = {"stall_every_s": 1.3, "stall_s": BLOCK_S, "stall_blocks": True}
        out = io.StringIO()
        assert run(cfg, out=out) == EXIT_OK, out.getvalue()
    ledger = Ledger.open(campaign / "ledger.sqlite")
    (attempt,) = ledger.attempts_for("E0000-P1")
    (summary,) = ledger.events(attempt.attempt_id, kind="rollout_summary")
    ledger.close()
    return campaign / attempt.episode_path, summary["payload"]


def test_repeats_and_skips_match_the_injected_stalls(stalled_episode):
    folder, _ = stalled_episode
    with EpisodeReader(folder) as ep:
        counts = ep.attrs["camera_frames"]
        videos = ep.video_info()
        for camera in ("wrist", "overhead", "middle"):
            index, _ = _truth(ep, camera)
            assert ep.attrs["dropped_frames"][camera] == 0
            assert len(index) == len(ep)  # one frame per executed tick
            steps = np.diff(index)
            assert np.all(steps >= 0), f"{camera}: the stamped counter went backwards"
            true_repeated = int((steps == 0).sum())
            true_skipped = int(np.clip(steps - 1, 0, None).sum())
            got = counts[camera]
            assert got["repeated"] == true_repeated, (camera, got, true_repeated)
            assert abs(got["skipped"] - true_skipped) <= 1, (camera, got, true_skipped)
            assert videos[camera]["repeated"] == got["repeated"] and videos[camera]["skipped"] == got["skipped"]
            # capture times: taken before the tick's observation returned; a repeat shares its capture time
            capture = ep.capture_times(camera)
            assert np.all(capture <= ep.timestamps + ep.array("timing/work_s") + 1e-6)
            assert np.array_equal(np.diff(capture) == 0, steps == 0)
        # the frozen wrist camera: at least two stalls of ~6 frames inside the 3 s rollout. Skips are
        # camera frames never delivered (a slower loop only adds to them); repeats are ticks that ran
        # during a freeze, fewer when a loaded machine runs fewer ticks: one per stall is asked for
        wrist = counts["wrist"]
        assert wrist["skipped"] >= 2 * 4 and wrist["repeated"] >= 2
        assert wrist["longest_gap_s"] >= STALL_S - 0.05
        gaps = [e for e in ep.events() if e["kind"] == "camera_gap" and e["camera"] == "wrist"]
        assert len(gaps) >= 2 and all(g["gap_s"] > 2 / FPS for g in gaps)
        # the blocking camera stalls the loop: slots skipped, but the frames it missed are not repeats
        assert counts["overhead"]["skipped"] >= 6


def test_stalls_are_events_and_steps_count_executed_ticks(stalled_episode):
    folder, summary = stalled_episode
    with EpisodeReader(folder) as ep:
        n = len(ep)
        stalls = [e for e in ep.events() if e["kind"] == "stall"]
        assert stalls and all(e["gap_s"] > 2 / FPS for e in stalls)
        assert any(e["gap_s"] >= BLOCK_S - 0.05 for e in stalls)
        slots = ep.array("timing/slot")
        assert slots[-1] + 1 > n  # time slots were skipped: rows are executed ticks only
        assert np.all(np.diff(slots) >= 1)
        timing = ep.attrs["timing"]
        assert timing["executed_ticks"] == n and timing["stalls"] == len(stalls)
        assert timing["slots_skipped"] >= int(slots[-1] + 1 - n)  # (and any after the last tick)
        assert timing["time_lost_s"] == pytest.approx(timing["slots_skipped"] / FPS, abs=1e-3)
        assert timing["worst_overrun_s"] >= BLOCK_S - 0.1
    assert summary["steps"] == n  # the ledger's rollout summary
    assert summary["timing"]["stalls"] == len(stalls)
    assert summary["camera_frames"]["wrist"]["skipped"] >= 8


def test_mp4s_carry_real_times_and_last_as_long_as_the_rollout(stalled_episode):
    folder, _ = stalled_episode
    with EpisodeReader(folder) as ep:
        duration = float(ep.attrs["duration_s"])
        ticks = ep.timestamps
        for camera in ep.cameras:
            np.testing.assert_allclose(ep.frame_times(camera), ticks, atol=1e-4)
            assert abs(ep.video_duration(camera) - duration) <= 1 / FPS + 1e-3, camera
        # frames by real time: the frame on screen just after the blocking stall is a fresh one
        t_after = float(ticks[np.argmax(np.diff(ticks)) + 1])
        frame = ep.frame_at("overhead", t_after)
        index, times = _truth(ep, "overhead")
        assert pattern.decode_index(frame) == index[np.searchsorted(times, t_after - 1e-4)]


def test_the_reports_camera_section_counts_the_recorded_stalls(stalled_episode):
    """Issue 36: the campaign report's camera section (frames dropped and gaps per camera and policy),
    read from the ledger, agrees with what the episode recorded (its frame accounting and camera_gap
    events). Failed before: the ledger's accounting had no gap count and the report no camera section."""
    from spabench.analysis.cameras import campaign_cameras

    folder, _ = stalled_episode
    campaign = next(p for p in folder.parents if (p / "ledger.sqlite").is_file())
    cameras = campaign_cameras(campaign)
    table = cameras.table.set_index("camera")
    with EpisodeReader(folder) as ep:
        counts = ep.attrs["camera_frames"]
        events = ep.events()
        for camera in ep.cameras:
            row = table.loc[camera]
            gaps = [e for e in events if e["kind"] == "camera_gap" and e["camera"] == camera]
            assert (row["attempts"], row["frames"], row["repeated"], row["skipped"]) == (
                1, counts[camera]["frames"], counts[camera]["repeated"], counts[camera]["skipped"])
            assert row["gaps"] == len(gaps) and row["encoder_dropped"] == ep.attrs["dropped_frames"][camera] == 0
            assert row["longest_gap_s"] == pytest.approx(counts[camera]["longest_gap_s"])
    assert table.loc["wrist", "gaps"] >= 2 and table.loc["wrist", "attempts_with_gaps"] == 1
    lines = "\n".join(cameras.markdown())
    assert "## Cameras (frames dropped, gaps)" in lines and "| wrist |" in lines
    assert sum(cameras.lost_by_period) == int(table["skipped"].sum())
