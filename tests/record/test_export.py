"""Export of recorded episodes to a LeRobotDataset v3 (real LeRobot writer, decoded back)."""

from __future__ import annotations

import io

import numpy as np
from omegaconf import OmegaConf

from spabench.ledger import Ledger, TrialRow
from spabench.record.commands import export_lerobot
from spabench.record.recorder import Recorder
from spabench.rollout.types import EpisodeMeta, EpisodeResult, StepRecord

CAMS = ("wrist", "middle", "left", "right", "overhead")
SHAPE = (24, 32, 3)


def _rows(n):
    return [TrialRow(trial_id=f"E{i}-P1", evaluation_id=f"E{i}", policy="p", card="p", alias="P1", task="counting",
                     condition="id", scene_id=f"s{i}", scene_condition="id", matched_group=None, cell="c|a",
                     withheld=False, instruction=f"Leave exactly {i} objects in the bowl.",
                     instruction_variant="original", timer_s=60.0, order=i) for i in range(n)]


def test_export_two_episodes(tmp_path):
    campaign = tmp_path / "c"
    campaign.mkdir()
    ledger = Ledger.create(campaign / "ledger.sqlite", _rows(3), "h")
    lengths = [12, 9]
    with Recorder(campaign) as rec:
        for e, n in enumerate(lengths):
            a = ledger.begin_attempt(f"E{e}-P1")
            rec.on_episode_start(EpisodeMeta(attempt_id=a, cameras=CAMS, camera_shapes={c: SHAPE for c in CAMS}))
            for t in range(n):
                state = np.full(6, 10.0 * e + t)
                act = state + 0.5 if t > 0 else np.full(6, np.nan)  # first tick: no action yet
                img = {c: np.full(SHAPE, 20 * t % 256, np.uint8) for c in CAMS}
                rec.on_step(StepRecord(t, t / 30, state, img, act, act))
            rec.on_episode_end(EpisodeResult("timer", True, None, n, n / 30))
            ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
        a = ledger.begin_attempt("E2-P1")  # an invalid attempt is not exported
        ledger.finish_attempt(a, "invalid", "fault", invalid_reason="server_lost")
        assert rec.wait_idle(60)
    ledger.close()

    out = tmp_path / "ds"
    msg = io.StringIO()
    assert export_lerobot(OmegaConf.create({"campaign_dir": str(campaign), "out": str(out)}), msg) == 0, msg.getvalue()

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("spabench/c", root=out)
    assert ds.meta.total_episodes == 2 and ds.meta.total_frames == sum(lengths)
    assert set(ds.meta.video_keys) == {f"observation.images.{c}" for c in CAMS}
    assert ds.meta.robot_type == "so101_follower"
    item = ds[lengths[0] + 3]  # episode 1, t = 3
    np.testing.assert_allclose(item["observation.state"].numpy(), np.full(6, 13.0))
    np.testing.assert_allclose(item["action"].numpy(), np.full(6, 13.5))
    assert item["task"] == "Leave exactly 1 objects in the bowl."
    img = item["observation.images.middle"]  # CHW float in [0, 1]
    assert tuple(img.shape) == (3, 24, 32) and abs(float(img.mean()) * 255 - 60) < 6
    first = ds[0]
    np.testing.assert_allclose(first["action"].numpy(), first["observation.state"].numpy())  # hold on tick 0
    # a folder holding a file the export did not write is refused and kept as it is (spabench.outputs)
    (out / "my_notes.txt").write_text("mine")
    msg = io.StringIO()
    assert export_lerobot(OmegaConf.create({"campaign_dir": str(campaign), "out": str(out)}), msg) == 2
    assert "my_notes.txt" in msg.getvalue() and (out / "my_notes.txt").read_text() == "mine"
    assert (out / "meta" / "info.json").is_file()
