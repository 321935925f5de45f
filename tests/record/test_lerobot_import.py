"""`spabench import lerobot`: LeRobotDataset v3 folders made with LeRobot's own writer become campaigns
of complete, unscored attempts; videos linked byte for byte, each episode a span of a shared MP4."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spabench.ledger import Ledger
from spabench.record.lerobot_import import ImportError_, import_lerobot
from spabench.record.reader import EpisodeReader
from spabench.suite.vocabulary import JOINTS
from tests.support.lerobot_datasets import level, make_dataset

pytestmark = pytest.mark.bench   # LeRobot writes the datasets

REPO = Path(__file__).resolve().parents[2]
LENGTHS = (5, 7, 4)


@pytest.fixture(scope="module")
def one_camera(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ds") / "one", cameras=("front",), lengths=LENGTHS)


@pytest.fixture(scope="module")
def five_cameras(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ds") / "five", lengths=LENGTHS, state=False,
                        cameras=("front", "wrist", "left", "right", "top"))


def _episodes(out: Path) -> list[tuple]:
    with Ledger.open(out, readonly=True) as ledger:
        return [(t, a) for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]


def _grey(frame: np.ndarray) -> float:
    return float(frame.mean())


def test_one_camera_with_state(one_camera, tmp_path):
    out = tmp_path / "review"
    result = import_lerobot(one_camera, out)
    assert (result.episodes, result.frames, result.review) == (3, sum(LENGTHS), True)
    rows = _episodes(out)
    assert [t.instruction for t, _ in rows] == ["put the cube in the bowl", "stack the blocks", "put the cube in the bowl"]
    assert [t.task for t, _ in rows] == [t.instruction for t, _ in rows]     # per-task: the dataset's own tasks
    assert all(a.status == "complete" for _, a in rows)
    with Ledger.open(out, readonly=True) as ledger:
        assert len(ledger.unscored_attempts()) == 3 and ledger.meta()["kind"] == "review"
    source_mp4 = one_camera / "videos/observation.images.front/chunk-000/file-000.mp4"
    for e, (_, attempt) in enumerate(rows):
        with EpisodeReader(out / attempt.episode_path) as ep:
            assert ep.imported and ep.cameras == ["front"] and len(ep) == LENGTHS[e]
            # the shared MP4 itself, bytes unchanged (linked or copied, never re-encoded)
            assert ep.video_path("front").read_bytes() == source_mp4.read_bytes()
            start, end = ep.video_span("front")
            assert (start, end) == pytest.approx((sum(LENGTHS[:e]) / 10, sum(LENGTHS[:e + 1]) / 10))
            # the episode's own frames, not its neighbours': first and last grey levels, frame count
            assert len(ep.frame_times("front")) == LENGTHS[e]
            assert _grey(ep.first_frame("front")) == pytest.approx(level(e, 0), abs=6)
            assert ep.count_frames("front") == LENGTHS[e]
            assert ep.timestamps[0] == 0 and ep.timestamps[-1] == pytest.approx((LENGTHS[e] - 1) / 10)
            expect = np.linspace(-10, 10, 6) + e + 0.5 * np.arange(LENGTHS[e])[:, None]
            np.testing.assert_allclose(ep.states, expect, rtol=1e-6)
            np.testing.assert_allclose(ep.raw_actions, expect + 1, rtol=1e-6)


def test_five_cameras_without_state(five_cameras, tmp_path):
    out = tmp_path / "review5"
    import_lerobot(five_cameras, out)
    rows = _episodes(out)
    with EpisodeReader(out / rows[1][1].episode_path) as ep:
        assert ep.cameras == ["front", "wrist", "left", "right", "top"]
        assert np.isnan(ep.states).all() and ep.states.shape == (LENGTHS[1], len(JOINTS))   # no state: none shown
        assert np.isfinite(ep.raw_actions).all()
        for cam in ep.cameras:
            assert _grey(ep.first_frame(cam)) == pytest.approx(level(1, 0), abs=6)
            assert ep.video_span(cam)[0] == pytest.approx(0.5)


def _broken(kind: str, tmp_path: Path) -> tuple[Path, str]:
    if kind == "not a dataset":
        root = tmp_path / "notes"
        root.mkdir()
        (root / "readme.txt").write_text("hello")
        return root, "not a LeRobotDataset folder (no meta/info.json"
    root = make_dataset(tmp_path / kind.replace(" ", "_"), lengths=LENGTHS)
    if kind == "v2.1":
        info = json.loads((root / "meta/info.json").read_text())
        info["codebase_version"] = "v2.1"
        (root / "meta/info.json").write_text(json.dumps(info))
        return root, "python -m lerobot.scripts.convert_dataset_v21_to_v30 --repo-id=<org/name> --root="
    if kind == "missing video":
        os.unlink(root / "videos/observation.images.front/chunk-000/file-000.mp4")
        return root, "episode 0: camera observation.images.front: its video file"
    if kind == "no frames":
        path = next((root / "meta/episodes").rglob("*.parquet"))
        episodes = pd.read_parquet(path)
        episodes.loc[episodes["episode_index"] == 1, "length"] = 0
        episodes.to_parquet(path)
        return root, "episode 1 has no frames"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["not a dataset", "v2.1", "missing video", "no frames"])
def test_bad_input_is_one_clear_error_and_nothing_written(kind, tmp_path):
    root, says = _broken(kind, tmp_path)
    out = tmp_path / "out" / "campaign"
    with pytest.raises(ImportError_) as err:
        import_lerobot(root, out)
    assert says in str(err.value)
    assert not out.exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())   # no staging left either


def _cells(path: Path, rows: list[tuple]) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["episode_index", "task", "condition", "evaluation_id", "policy"])
        w.writerows(rows)
    return path


def test_cells_place_episodes_in_spabench_cells(one_camera, tmp_path):
    cells = _cells(tmp_path / "cells.csv", [(0, "object_state", "id", "E1", "act_a"), (1, "object_state", "id", "E1", "act_b"),
                                           (2, "object_state", "id", "E2", "act_a")])
    out = tmp_path / "protocol"
    assert import_lerobot(one_camera, out, cells).review is False
    rows = _episodes(out)
    assert [(t.task, t.condition, t.evaluation_id, t.policy) for t, _ in rows] == [
        ("object_state", "id", "E1", "act_a"), ("object_state", "id", "E1", "act_b"), ("object_state", "id", "E2", "act_a")]
    assert {t.alias for t, _ in rows} == {"P1", "P2"} and rows[0][0].instruction == "put the cube in the bowl"
    # a cells file that leaves an episode out, or names a word the suite does not have: refused, nothing written
    for bad, says in (([(0, "object_state", "id", "E1", "a"), (1, "object_state", "id", "E2", "a")], "no row for episode(s) 2"),
                      ([(0, "stacking", "id", "E1", "a"), (1, "object_state", "id", "E2", "a"),
                        (2, "object_state", "id", "E3", "a")], "unknown value 'stacking'")):
        with pytest.raises(ImportError_, match=says.replace("(", r"\(").replace(")", r"\)")):
            import_lerobot(one_camera, tmp_path / "bad", _cells(tmp_path / "bad.csv", bad))
        assert not (tmp_path / "bad").exists()


def _spabench(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "spabench.cli.main", *args], cwd=REPO, env=env, input=stdin,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_import_score_blind_second_rate_and_report(one_camera, tmp_path):
    out, report = tmp_path / "review", tmp_path / "report"
    proc = _spabench("import", "lerobot", f"dataset={one_camera}", f"out={out}")
    assert proc.returncode == 0 and "imported 3 episode(s)" in proc.stdout, proc.stdout + proc.stderr
    # the first rater: success, failure (3: no action), success
    proc = _spabench("score", f"campaign={out}", "operator.rater=Alice", stdin="y\n\nn\n3\n\ny\n\n")
    assert proc.returncode == 0 and "scored 3" in proc.stdout, proc.stdout + proc.stderr
    assert "from 0.500 s to 1.200 s" in proc.stdout      # where episode 1 lies in its camera's MP4
    # the second rater, blind: the policy and the first scores are not shown; disagrees on episode 2
    proc = _spabench("score", f"campaign={out}", "operator.rater=Bob", "second_rater=true", stdin="y\n\nn\n3\n\nn\n5\n\n")
    assert proc.returncode == 0 and "second-rated 3" in proc.stdout, proc.stdout + proc.stderr
    assert "local/one" not in proc.stdout and "Alice" not in proc.stdout
    with Ledger.open(out, readonly=True) as ledger:
        raters = sorted(s.rater for _, a in _episodes(out) for s in ledger.scores_for(a.attempt_id))
    assert raters == ["Alice"] * 3 + ["Bob"] * 3
    proc = _spabench("report", f"campaign={out}", f"out={report}")
    assert proc.returncode == 0 and "review campaign" in proc.stdout, proc.stdout + proc.stderr
    text = (report / "report.md").read_text()
    assert "not a Spa-Bench grid" in text
    assert "| local/one | put the cube in the bowl | 2 | 2 | 2 | 100.0% [34.2%, 100.0%] |" in text   # Wilson
    assert "| local/one | stack the blocks | 1 | 1 | 0 | 0.0% [0.0%, 79.3%] |" in text
    assert "| local/one | stack the blocks | No action | 1 |" in text
    agreement = pd.read_csv(report / "rater_agreement.csv")
    row = agreement[agreement["score"] == "success"].iloc[0]
    assert (row["rater_a"], row["rater_b"], row["n"]) == ("Alice", "Bob", 3)
    assert row["kappa"] == pytest.approx(0.4)   # 2 of 3 agree; p_e = (2/3)(1/3) + (1/3)(2/3) = 4/9
    # a review campaign has no protocol outcomes table: said so, not a vocabulary error about its task words
    proc = _spabench("export", "outcomes", f"campaign={out}", f"out={tmp_path / 'outcomes.csv'}")
    assert proc.returncode != 0 and "is a review campaign" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "outcomes.csv").exists()


@pytest.mark.slow
def test_cells_give_the_full_protocol_report(one_camera, tmp_path):
    cells = _cells(tmp_path / "cells.csv", [(0, "object_state", "id", "E1", "act_a"), (1, "object_state", "id", "E1", "act_b"),
                                           (2, "object_state", "id", "E2", "act_a")])
    out = tmp_path / "protocol"
    proc = _spabench("import", "lerobot", f"dataset={one_camera}", f"out={out}", f"cells={cells}")
    assert proc.returncode == 0 and "protocol campaign" in proc.stdout, proc.stdout + proc.stderr
    proc = _spabench("score", f"campaign={out}", "operator.rater=Alice", stdin="y\n\nn\n3\n\ny\n\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _spabench("report", f"campaign={out}", f"out={tmp_path / 'report'}", "bootstrap=200")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    got = summary[(summary["task"] == "object_state") & (summary["condition"] == "id")].set_index("policy")
    assert (got.loc["act_a", "successes"], got.loc["act_a", "trials"]) == (2, 2)
    assert (got.loc["act_b", "successes"], got.loc["act_b", "trials"]) == (0, 1)


def test_a_hub_id_is_read_from_lerobots_local_cache_only(one_camera, tmp_path, monkeypatch):
    from lerobot.utils import constants

    home = tmp_path / "lerobot_home"
    (home / "lab").mkdir(parents=True)
    os.symlink(one_camera, home / "lab" / "tiny")
    monkeypatch.setattr(constants, "HF_LEROBOT_HOME", home)
    monkeypatch.setattr(constants, "HF_LEROBOT_HUB_CACHE", home / "hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = import_lerobot("lab/tiny", tmp_path / "from_cache")
    assert result.episodes == 3
    with Ledger.open(tmp_path / "from_cache", readonly=True) as ledger:
        assert {t.policy for t in ledger.trials()} == {"lab/tiny"}
    with pytest.raises(ImportError_, match="not in LeRobot's local cache"):
        import_lerobot("lab/elsewhere", tmp_path / "not_cached")
    assert not (tmp_path / "not_cached").exists()
