"""The video encoders start when the bench connects, not in the first trial.

Each encoder worker is a spawned process: a fork of the session's process and an interpreter that
imports PyAV. Five of them started in the first trial's pre-roll, where the console's dead-man is
armed; on a loaded 2-core machine that starved the session's threads, the console's among them, and
`test_console_flood` failed in a full run with `console_lost` (silent 1.005 s, one tick executed, a
pre-roll of 1.57 s against 0.54 s idle). The property: the workers exist before the first trial, and
that trial's videos are written by those same processes (no spawn while the arm moves).
"""

from __future__ import annotations

import io

from spabench.record.reader import EpisodeReader
from spabench.rollout.exits import EXIT_OK
from spabench.rollout.session import Session
from tests.integration.harness import WaveServer, make_campaign, make_cfg
from tests.support.feetech_bus import EmulatedBus


def test_the_encoders_start_before_the_first_trial_and_record_it(tmp_path):
    campaign = make_campaign(tmp_path, n=1)
    with EmulatedBus() as bus, WaveServer() as server:
        session = Session(make_cfg(campaign, bus.port, server.port, timer_s=1.0), out=io.StringIO())
        try:
            assert session.open()
            before = session.recorder.pool.worker_pids
            assert set(before) == set(session.bench.camera_names)
            assert all(pid is not None for pid in before.values())
            assert session.loop() == EXIT_OK
            after = session.recorder.pool.worker_pids
        finally:
            session.close()
    assert after == before
    episodes = sorted((campaign / "episodes").iterdir())
    assert len(episodes) == 1
    with EpisodeReader(episodes[0]) as ep:
        for camera in before:
            assert len(ep.frame_times(camera)) > 0, camera
