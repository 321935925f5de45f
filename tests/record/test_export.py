"""Export of recorded episodes to a LeRobotDataset v3 (real LeRobot writer, decoded back)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from spabench.ledger import Ledger, TrialRow
from spabench.record.commands import ExportLerobotConfig, export_lerobot
from spabench.record.recorder import Recorder
from spabench.rollout.types import EpisodeMeta, EpisodeResult, StepRecord

CAMS = ("wrist", "middle", "left", "right", "overhead")
SHAPE = (24, 32, 3)


def _rows(n):
    return [TrialRow(trial_id=f"E{i}-P1", evaluation_id=f"E{i}", policy="p", card="p", alias="P1", task="counting",
                     condition="id", scene_id=f"s{i}", scene_condition="id", matched_group=None, cell="c|a",
                     withheld=False, instruction=f"Leave exactly {i} objects in the bowl.",
                     instruction_variant="original", timer_s=60.0, order=i) for i in range(n)]


@pytest.mark.slow
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
    assert export_lerobot(ExportLerobotConfig.from_mapping({"campaign_dir": str(campaign), "out": str(out)}), msg) == 0, msg.getvalue()

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
    assert export_lerobot(ExportLerobotConfig.from_mapping({"campaign_dir": str(campaign), "out": str(out)}), msg) == 2
    assert "my_notes.txt" in msg.getvalue() and (out / "my_notes.txt").read_text() == "mine"
    assert (out / "meta" / "info.json").is_file()


def _two_policy_campaign(tmp_path, drop_frame_in=None):
    """Two policies, two evaluations each; the pattern's frame counter stamped in every frame; the
    second half of every episode runs after a 0.2 s stall (real tick times, not index / fps)."""
    from spabench.bench.cameras import pattern

    rows = [TrialRow(trial_id=f"E{i}-{alias}", evaluation_id=f"E{i}", policy=policy, card=policy, alias=alias,
                     task="counting", condition=("id", "ood")[i % 2], scene_id=f"s{i}", scene_condition="id",
                     matched_group=None, cell="c|a", withheld=False, instruction=f"Leave exactly {i} objects.",
                     instruction_variant="original", timer_s=60.0, order=2 * i + k)
            for i in range(2) for k, (policy, alias) in enumerate((("pi05", "P1"), ("smolvla", "P2")))]
    campaign = tmp_path / "c2"
    campaign.mkdir()
    ledger = Ledger.create(campaign / "ledger.sqlite", rows, "h")
    shape = (48, 96, 3)
    times = {}
    with Recorder(campaign) as rec:
        for row in rows:
            a = ledger.begin_attempt(row.trial_id)
            rec.on_episode_start(EpisodeMeta(attempt_id=a, cameras=CAMS, camera_shapes={c: shape for c in CAMS}))
            ticks = [t / 30 + (0.2 if t >= 6 else 0.0) for t in range(12)]
            for t, when in enumerate(ticks):
                state = np.full(6, float(t))
                images = {c: pattern.render(96, 48, 100 * len(times) + t) for c in CAMS}
                if drop_frame_in == row.trial_id and t == 4:
                    images["left"] = None  # the encoder never got this one
                rec.on_step(StepRecord(t, when, state, {c: i for c, i in images.items() if i is not None},
                                       state, state))
            rec.on_episode_end(EpisodeResult("timer", True, None, 12, ticks[-1] + 1 / 30))
            assert rec.wait_idle(60)  # (a scene reset between trials; an unpaced loop would fill the ring)
            ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
            if row.alias == "P1":
                ledger.record_score(a, "operator", row.evaluation_id == "E0",
                                    None if row.evaluation_id == "E0" else "grasp_failure")
            times[a] = np.asarray(ticks)
        assert rec.wait_idle(60)
    ledger.close()
    return campaign, times


@pytest.mark.slow
def test_export_copies_streams_real_timestamps_split_by_policy(tmp_path, capfd):
    """Issue 9 (measured on main): export decoded and re-encoded (3 s of CPU per recorded second),
    timestamps were index / fps (frame 150 read 5.00 s where the h5 said 6.77 s), there was no
    policy, alias or attempt id, empty images/ folders were left and encoders flooded the terminal."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from spabench.bench.cameras import pattern
    from spabench.record.export import export_lerobot_dataset

    campaign, times = _two_policy_campaign(tmp_path)
    capfd.readouterr()
    report = export_lerobot_dataset(campaign, tmp_path / "ds2", progress=False)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == "", captured  # nothing from LeRobot, datasets or FFmpeg
    assert (report.episodes, report.copied, report.reencoded) == (4, 4 * len(CAMS), 0)
    assert not (tmp_path / "ds2" / "images").exists()

    ds = LeRobotDataset("spabench/c2", root=tmp_path / "ds2")
    assert ds.meta.total_episodes == 4 and ds.meta.total_frames == 48
    columns = ds.hf_dataset.select_columns(["episode_index", "policy", "alias", "attempt_id", "evaluation_id",
                                            "condition", "success", "failure_mode", "timestamp"]).to_pandas()
    per_episode = columns.groupby("episode_index").first()
    assert list(per_episode["policy"]) == ["pi05", "smolvla", "pi05", "smolvla"]
    assert list(per_episode["alias"]) == ["P1", "P2", "P1", "P2"]
    assert list(per_episode["condition"]) == ["id", "id", "ood", "ood"]
    assert list(per_episode["success"]) == [1, -1, 0, -1]  # P2 was never scored
    assert list(per_episode["failure_mode"]) == ["", "", "grasp_failure", ""]
    assert list(per_episode["attempt_id"]) == list(times)
    # real timestamps, as in episode.h5
    for (ep_index, attempt_id) in enumerate(times):
        got = columns[columns.episode_index == ep_index]["timestamp"].to_numpy()
        np.testing.assert_allclose(got, times[attempt_id], atol=1e-6)
    # split by policy: LeRobot loads just one policy's episodes, frames decoded by their real time
    pi05 = sorted(per_episode.index[per_episode["policy"] == "pi05"])
    sub = LeRobotDataset("spabench/c2", root=tmp_path / "ds2", episodes=pi05)
    assert sub.num_episodes == 2 and set(sub.hf_dataset.unique("policy")) == {"pi05"}
    for i in (0, 7, 20):  # before and after the stall, second episode
        item = sub[i]
        ep, t = int(item["episode_index"]), int(item["frame_index"])
        frame = (item["observation.images.wrist"].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
        assert pattern.decode_index(frame) == 100 * ep + t  # the frame recorded at that tick
        assert float(item["timestamp"]) == pytest.approx(times[list(times)[ep]][t], abs=1e-6)


@pytest.mark.slow
def test_export_reencodes_only_a_camera_with_a_missing_frame_or_when_asked(tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from spabench.bench.cameras import pattern
    from spabench.record.export import export_lerobot_dataset

    campaign, times = _two_policy_campaign(tmp_path, drop_frame_in="E0-P1")
    report = export_lerobot_dataset(campaign, tmp_path / "ds3", progress=False)
    assert (report.copied, report.reencoded) == (4 * len(CAMS) - 1, 1)
    ds = LeRobotDataset("spabench/c2", root=tmp_path / "ds3")
    held = (ds[4]["observation.images.left"].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    assert pattern.decode_index(held) == 3  # the frame before the missing one is held
    report = export_lerobot_dataset(campaign, tmp_path / "ds4", progress=False, reencode=True)
    assert (report.copied, report.reencoded) == (0, 4 * len(CAMS))
    ds = LeRobotDataset("spabench/c2", root=tmp_path / "ds4")
    item = ds[30]
    frame = (item["observation.images.middle"].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    assert pattern.decode_index(frame) == 200 + 6 and float(item["timestamp"]) == pytest.approx(0.4, abs=1e-6)


@pytest.mark.slow
def test_each_exported_episode_carries_its_outcome_for_lerobots_own_tools(tmp_path):
    """Issue 36 (measured before: the episode table held LeRobot's columns only, and no episode said
    who scored it or whether it was valid). Each episode's success, failure mode, rater and validity
    are columns of LeRobot's episode table, read back with LeRobotDatasetMetadata, and per frame."""
    from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
    from lerobot.datasets.dataset_tools import delete_episodes
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from spabench.record.export import export_lerobot_dataset

    campaign, times = _two_policy_campaign(tmp_path)
    attempts = list(times)   # E0-P1, E0-P2, E1-P1, E1-P2 (P1 scored by 'operator': E0 success, E1 grasp_failure)
    with Ledger.open(campaign) as ledger:
        ledger.record_score(attempts[1], "bob", False, "no_action")
        ledger.record_score(attempts[3], "bob", True)
        ledger.invalidate_attempt(attempts[3], "scene staged wrong", "bob")
    export_lerobot_dataset(campaign, tmp_path / "ds", include_invalid=True, progress=False)

    meta = LeRobotDatasetMetadata("spabench/c2", root=tmp_path / "ds")
    episodes = meta.episodes.select_columns(["episode_index", "attempt_id", "success", "failure_mode", "rater",
                                             "valid", "invalid_reason", "policy", "length"]).to_pandas()
    assert list(episodes["attempt_id"]) == attempts
    assert list(episodes["success"]) == [1, 0, 0, -1]
    assert list(episodes["failure_mode"]) == ["", "no_action", "grasp_failure", ""]
    assert list(episodes["rater"]) == ["operator", "bob", "operator", ""]
    assert list(episodes["valid"]) == [True, True, True, False]
    assert list(episodes["invalid_reason"]) == ["", "", "", "operator_invalidated: scene staged wrong"]
    assert list(episodes["length"]) == [12] * 4
    # LeRobot's own filter: the valid, successful episodes' indices, loaded by LeRobotDataset
    good = meta.episodes.filter(lambda e: e["valid"] and e["success"] == 1)["episode_index"]
    ds = LeRobotDataset("spabench/c2", root=tmp_path / "ds", episodes=good)
    assert ds.num_episodes == 1 and set(ds.hf_dataset.unique("attempt_id")) == {attempts[0]}
    # per frame too, and kept by LeRobot's dataset tools: the invalid episode deleted, the outcome stays
    full = LeRobotDataset("spabench/c2", root=tmp_path / "ds")
    frames = full.hf_dataset.select_columns(["episode_index", "success", "valid", "rater"]).to_pandas()
    per = frames.groupby("episode_index").first()
    assert list(per["valid"]) == [1, 1, 1, 0] and list(per["rater"]) == ["operator", "bob", "operator", ""]
    invalid = [int(i) for i in episodes.loc[~episodes["valid"], "episode_index"]]
    kept = delete_episodes(full, invalid, output_dir=tmp_path / "kept", repo_id="spabench/kept")
    kept_frames = kept.hf_dataset.select_columns(["attempt_id", "success", "valid", "rater"]).to_pandas()
    assert set(kept_frames["attempt_id"]) == set(attempts[:3]) and set(kept_frames["valid"]) == {1}
    assert kept_frames.groupby("attempt_id")["success"].first().to_dict() == {attempts[0]: 1, attempts[1]: 0,
                                                                               attempts[2]: 0}
