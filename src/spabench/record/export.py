"""Export recorded episodes to a LeRobotDataset v3 (the analyst's copy, for training or LeRobot's tools).

One dataset episode per recorded attempt (plan order; complete ones, invalid ones on request), task =
the instruction the policy got. Features: `observation.state` and `action` (the EXECUTED action, after
the EMA filter and the safety envelope: what the arm was told to do), both 6-D in vocabulary.JOINTS
order; one video feature `observation.images.<camera>` per recorded camera; and per-episode columns
repeated on every row so a dataset can be split with a plain filter: `policy`, `alias`, `attempt_id`,
`evaluation_id`, `condition`, `failure_mode`, `rater`, `invalid_reason` (strings), `success` (int8: 1,
0, -1 unscored or invalid), `valid` (int8: 1 complete, 0 invalid). `timestamp` is the real tick time
(s since the rollout timer started), not index / fps.

The outcome is the episode's metadata too: the same columns (`success`, `failure_mode`, `rater`,
`valid` as a bool, `invalid_reason`, `policy`, ...) are columns of LeRobot's episode table
(`meta/episodes/*.parquet`, beside `tasks` and `length`), which `LeRobotDatasetMetadata(...).episodes`
reads without touching the frames, e.g. to pick the successful episodes for
`LeRobotDataset(..., episodes=[...])`. The per-frame copies are the ones LeRobot's dataset tools
(`delete_episodes`, `split_dataset`) carry into the datasets they write (their episode tables keep
LeRobot's own columns only).

Videos are not re-encoded. Each recorded MP4 already presents frame i at its tick's time, which is
what LeRobot's decoder looks up (row timestamp + the episode's from_timestamp, 1e-4 s tolerance), so
the file is copied into the v3 layout, one file per episode and camera. An episode whose camera
lost frames to the encoder (a tick without a frame), recorded before schema 2 (frames at index /
fps), or in a codec LeRobot cannot decode, is re-encoded for that camera (the previous frame held
where one is missing); `reencode=True` re-encodes everything (e.g. another codec or crf).

The episodes go through LeRobot 0.6.1's own writer (parquet data, episode metadata, stats, info.json)
minus its image-to-video step: the writer's `_save_episode_data` / `_save_episode_video(temp_path=)`
are exactly what `save_episode` calls once it has a video file. Video statistics come from the
key frames (decoded without the rest), per channel, as LeRobot computes them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spabench.errors import DataError
from spabench.record.reader import EpisodeReader
from spabench.suite.vocabulary import JOINTS

log = logging.getLogger(__name__)

ROBOT_TYPE = "so101_follower"
SCHEMA_WITH_REAL_PTS = 2
DECODABLE_CODECS = frozenset({"h264", "hevc", "av1", "vp9", "mpeg4"})  # what LeRobot's decoders read
EPISODE_STRING_COLUMNS: tuple[str, ...] = ("policy", "alias", "attempt_id", "evaluation_id", "condition",
                                           "failure_mode", "rater", "invalid_reason", "server_identity")
# the identity of the policy server that answered (policy/identity.py), as the episode recorded it
SERVER_IDENTITY_ATTR = "extra.server_identity"
UNSCORED = -1


@dataclass
class ExportEpisode:
    attempt_id: str
    folder: Path
    instruction: str
    columns: dict[str, str]
    success: int        # 1, 0; UNSCORED (-1) when not scored or invalid
    valid: bool = True  # False: an invalid attempt (include_invalid=True), re-run in the campaign


@dataclass
class ExportReport:
    root: Path
    episodes: int
    frames: int
    copied: int        # camera streams copied as recorded
    reencoded: int     # camera streams re-encoded
    skipped: list[str]
    cleaned: list[Path] = field(default_factory=list)   # partial outputs a killed run had left, removed


def episode_folders(campaign_dir: Path, include_invalid: bool = False) -> list[ExportEpisode]:
    """The campaign's recorded attempts in plan order, with their per-episode columns."""
    from spabench.ledger import Ledger

    ledger = Ledger.open(campaign_dir, readonly=True)
    try:
        scored = {}
        try:
            for row in ledger.outcomes().to_dict("records"):
                scored[row["attempt_id"]] = row
        except Exception:  # noqa: BLE001 - a ledger without scores still exports (success = -1)
            scored = {}
        out = []
        for trial in ledger.trials():
            for attempt in ledger.attempts_for(trial.trial_id):
                if attempt.status != "complete" and not (include_invalid and attempt.status == "invalid"):
                    continue
                if not attempt.episode_path:
                    continue
                valid = attempt.status == "complete"
                outcome = scored.get(attempt.attempt_id) if valid else None   # an invalid attempt has none
                success = UNSCORED if outcome is None else int(bool(outcome["success"]))
                columns = {"policy": trial.policy, "alias": trial.alias, "attempt_id": attempt.attempt_id,
                           "evaluation_id": trial.evaluation_id, "condition": trial.condition,
                           "failure_mode": (outcome or {}).get("failure_mode"), "rater": (outcome or {}).get("rater"),
                           "invalid_reason": attempt.invalid_reason}
                out.append(ExportEpisode(attempt.attempt_id, campaign_dir / attempt.episode_path,
                                         trial.instruction, {k: str(v or "") for k, v in columns.items()}, success,
                                         valid))
        return out
    finally:
        ledger.close()


def features_for(cameras: dict[str, tuple[int, int, int]], episode_columns: bool = False) -> dict:
    """LeRobot features: state, action, one video per camera (and the per-episode columns)."""
    names = [f"{j}.pos" for j in JOINTS]
    feats: dict[str, dict[str, Any]] = {
        "observation.state": {"dtype": "float32", "shape": (len(JOINTS),), "names": names},
        "action": {"dtype": "float32", "shape": (len(JOINTS),), "names": names},
    }
    for cam, shape in cameras.items():
        feats[f"observation.images.{cam}"] = {"dtype": "video", "shape": tuple(int(v) for v in shape),
                                              "names": ["height", "width", "channels"]}
    if episode_columns:
        for column in EPISODE_STRING_COLUMNS:
            feats[column] = {"dtype": "string", "shape": (1,), "names": None}
        feats["success"] = {"dtype": "int8", "shape": (1,), "names": None}
        feats["valid"] = {"dtype": "int8", "shape": (1,), "names": None}
    return feats


def _camera_shapes(ep: EpisodeReader) -> dict[str, tuple[int, int, int]]:
    shapes = ep.attrs.get("camera_shapes") or {}
    out = {}
    for cam in ep.cameras:
        if cam in shapes:
            out[cam] = tuple(shapes[cam])
        elif ep.video_path(cam).exists():
            out[cam] = ep.first_frame(cam).shape
    return out


# --------------------------------------------------------------------------- videos


def _codec(path: Path) -> str:
    import av  # noqa: PLC0415

    with av.open(str(path)) as c:
        name = c.streams.video[0].codec_context.name
    return name


def _copyable(ep: EpisodeReader, camera: str) -> bool:
    """The recorded file presents exactly one frame at each row's timestamp, in a codec LeRobot reads."""
    if int(ep.attrs.get("schema_version", 1)) < SCHEMA_WITH_REAL_PTS:
        return False
    index = ep.frame_index(camera)
    if not np.array_equal(index, np.arange(len(index))):
        return False
    try:
        return _codec(ep.video_path(camera)) in DECODABLE_CODECS
    except Exception:  # noqa: BLE001 - unreadable: re-encoding will say what is wrong
        return False


def _reencode(ep: EpisodeReader, camera: str, dest: Path, codec: str, crf: int) -> None:
    """One frame per row at the row's real time; a row without a frame holds the previous one."""
    from fractions import Fraction

    import av  # noqa: PLC0415

    from spabench.record.video import MUXER_OPTIONS, TIME_BASE

    times = ep.timestamps
    index = ep.frame_index(camera)
    frames = ep.iter_frames(camera)
    current, position = None, -1
    with av.open(str(dest), "w", options=MUXER_OPTIONS) as out:
        stream: av.VideoStream | None = None
        last_pts = -1
        for t, want in zip(times, index, strict=True):
            if want >= 0:
                while position < want:
                    current = next(frames, current)
                    position += 1
            if current is None:
                current = next(frames, None)
                position = 0
                if current is None:
                    raise DataError(ep.video_path(camera), "the video holds no frame to export")
            if stream is None:
                added = out.add_stream(codec, rate=int(round(float(ep.attrs.get("control_hz") or 30))))
                if not isinstance(added, av.VideoStream):
                    raise DataError(dest, f"{codec} is not a video codec")
                stream = added
                stream.codec_context.time_base = TIME_BASE
                stream.height, stream.width = current.shape[:2]
                stream.pix_fmt = "yuv420p"
                if codec == "libx264":
                    stream.options = {"preset": "veryfast", "crf": str(crf)}
            frame = av.VideoFrame.from_ndarray(current, format="rgb24")
            last_pts = max(int(round(max(0.0, float(t)) / TIME_BASE)), last_pts + 1)
            frame.pts, frame.time_base = last_pts, Fraction(TIME_BASE)
            for packet in stream.encode(frame):
                out.mux(packet)
        if stream is not None:
            for packet in stream.encode():
                out.mux(packet)


def _video_stats(path: Path) -> dict:
    """LeRobot's per-channel image stats (normalised to [0, 1]) from the video's key frames."""
    import av  # noqa: PLC0415
    from lerobot.datasets.compute_stats import (
        DEFAULT_QUANTILES,
        auto_downsample_height_width,
        get_feature_stats,
    )

    images = []
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        for packet in c.demux(stream):  # key frames decode on their own: the rest is never decoded
            if not packet.is_keyframe or not packet.size:
                continue
            for frame in stream.codec_context.decode(packet):
                img = frame.to_ndarray(format="rgb24").transpose(2, 0, 1)
                images.append(auto_downsample_height_width(img))
            stream.codec_context.flush_buffers()
    if not images:  # a decoder with delay (B-frames) yields nothing per packet: decode it all
        with av.open(str(path)) as c:
            for frame in c.decode(video=0):
                images.append(auto_downsample_height_width(frame.to_ndarray(format="rgb24").transpose(2, 0, 1)))
    if not images:
        raise DataError(path, "no decodable frame for the dataset statistics")
    stats = get_feature_stats(np.stack(images), axis=(0, 2, 3), keepdims=True, quantile_list=DEFAULT_QUANTILES)
    return {k: v if k == "count" else np.squeeze(v / 255.0, axis=0) for k, v in stats.items()}


# --------------------------------------------------------------------------- the dataset


@contextlib.contextmanager
def _no_image_embedding(features: dict):
    """LeRobot's writer runs `embed_images` (a row-by-row datasets.map, ~5-20 ms a row here) on every
    episode; it embeds `image` features into the parquet, and this dataset has none (its cameras are
    `video`), so for it the call is the identity and is skipped."""
    from lerobot.datasets import dataset_writer  # noqa: PLC0415

    if any(ft.get("dtype") == "image" for ft in features.values()) or not hasattr(dataset_writer, "embed_images"):
        yield
        return
    original = dataset_writer.embed_images
    dataset_writer.embed_images = lambda dataset: dataset
    try:
        yield
    finally:
        dataset_writer.embed_images = original


@contextlib.contextmanager
def _quiet_third_party():
    """LeRobot's and FFmpeg's chatter (and torchcodec's fallback tracebacks) stay off the screen."""
    import av  # noqa: PLC0415

    names = ("lerobot", "datasets", "huggingface_hub", "torchcodec", "libav")
    saved = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    import datasets  # noqa: PLC0415

    previous = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)
    bars = datasets.utils.logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # its per-episode "Map" bars would drown ours
    try:
        yield
    finally:
        if bars:
            datasets.enable_progress_bars()
        av.logging.set_level(previous)
        for n, level in saved.items():
            logging.getLogger(n).setLevel(level)


def _write_episode(dataset, item: ExportEpisode, ep: EpisodeReader, shapes: dict, reencode: bool,
                   codec: str, crf: int, tmp_root: Path, report: ExportReport) -> None:
    from lerobot.datasets.compute_stats import compute_episode_stats

    writer, meta = dataset.writer, dataset.meta
    states = ep.states.astype(np.float32)
    actions = ep.executed_actions.astype(np.float32)
    missing = ~np.all(np.isfinite(actions), axis=1)
    actions[missing] = states[missing]  # no command sent yet: the arm held its measured position
    n = len(states)
    episode_index = meta.total_episodes
    identity = str(ep.attrs.get(SERVER_IDENTITY_ATTR) or "")
    buffer: dict = {
        "observation.state": states, "action": actions,
        "timestamp": ep.timestamps.astype(np.float32), "frame_index": np.arange(n, dtype=np.int64),
        **{k: np.array([v] * n) for k, v in item.columns.items()},
        "server_identity": np.array([identity] * n),
        "success": np.full(n, item.success, dtype=np.int8),
        "valid": np.full(n, int(item.valid), dtype=np.int8),
    }
    meta.save_episode_tasks([item.instruction])
    buffer["index"] = np.arange(meta.total_frames, meta.total_frames + n)
    buffer["episode_index"] = np.full(n, episode_index)
    buffer["task_index"] = np.full(n, meta.get_task_index(item.instruction))
    numeric = {k: v for k, v in buffer.items() if k in meta.features and meta.features[k]["dtype"] != "string"}
    ep_stats = compute_episode_stats(numeric, meta.features)
    ep_metadata = writer._save_episode_data(buffer)
    for cam in shapes:
        key = f"observation.images.{cam}"
        staging = Path(tempfile.mkdtemp(prefix=f"{cam}-", dir=tmp_root))
        video = staging / "episode.mp4"
        if not reencode and _copyable(ep, cam):
            shutil.copyfile(ep.video_path(cam), video)
            report.copied += 1
        else:
            _reencode(ep, cam, video, codec, crf)
            report.reencoded += 1
        ep_stats[key] = _video_stats(video)
        ep_metadata.update(writer._save_episode_video(key, episode_index, temp_path=video))  # moves it
    ep_metadata.update(episode_outcome(item, identity))
    meta.save_episode(episode_index, n, [item.instruction], ep_stats, ep_metadata)
    report.frames += n
    report.episodes += 1


def episode_outcome(item: ExportEpisode, server_identity: str) -> dict[str, Any]:
    """The columns the episode adds to LeRobot's episode table (plain values: pyarrow types them)."""
    return {**item.columns, "server_identity": server_identity, "success": int(item.success), "valid": bool(item.valid)}


def _abandon(dataset) -> None:
    """Stop LeRobot's writer for good before its staging folder is removed.

    `DatasetWriter` and `DatasetMetadata` re-run `finalize()` from `__del__` as a safety net. After
    a failed write (a full disk) that finalize had not completed, so when the garbage collector
    freed the dataset (once the error had been reported and the staging folder removed) the
    metadata flush recreated `<staging>/meta/episodes/...`: a `.partial` folder the message said
    was removed. Here the buffered metadata is dropped, open parquet writers are closed (errors
    ignored: those files are discarded) and both objects are marked finalized, so nothing writes
    again, whenever they are collected."""
    writer = getattr(dataset, "writer", None)
    meta = getattr(dataset, "meta", None)
    buffer = getattr(meta, "_metadata_buffer", None)
    if isinstance(buffer, list):
        buffer.clear()
    for part in (writer, meta, getattr(writer, "_meta", None)):
        if part is None:
            continue
        parquet = getattr(part, "_pq_writer", None)
        if parquet is not None:
            with contextlib.suppress(Exception):
                parquet.close()
            part._pq_writer = None
        part._finalized = True
    dataset._is_finalized = True


def export_lerobot_dataset(campaign_dir: str | os.PathLike, out: str | os.PathLike, repo_id: str | None = None,
                           include_invalid: bool = False, fps: int | None = None, *, reencode: bool = False,
                           codec: str = "libx264", crf: int = 23, progress: bool = True) -> ExportReport:
    """Write the dataset to `out` (new, empty, or an earlier export: spabench.outputs)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from tqdm import tqdm

    from spabench.outputs import replace_output

    campaign_dir = Path(campaign_dir).resolve()
    out = Path(out).resolve()
    episodes = episode_folders(campaign_dir, include_invalid)
    if not episodes:
        raise DataError(campaign_dir, "no complete recorded attempt to export")
    with EpisodeReader(episodes[0].folder) as first:
        shapes = _camera_shapes(first)
        rate = int(round(float(first.attrs.get("control_hz") or 30)))
    fps = fps or rate
    repo_id = repo_id or f"spabench/{campaign_dir.name}"
    report = ExportReport(out, 0, 0, 0, 0, [])
    features = features_for(shapes, True)
    with replace_output(out, "export lerobot", create=False, cleaned=report.cleaned) as staging, \
            _quiet_third_party(), _no_image_embedding(features):
        dataset = LeRobotDataset.create(repo_id=repo_id, fps=fps, features=features, root=staging,
                                        robot_type=ROBOT_TYPE, use_videos=True)
        # one video file per episode and camera: nothing is concatenated, from_timestamp stays 0
        dataset.meta.update_chunk_settings(video_files_size_in_mb=1e-9)
        tmp_root = Path(tempfile.mkdtemp(prefix=".export-", dir=staging))
        bar = tqdm(episodes, desc="export lerobot", unit="episode", disable=not progress, file=sys.stderr)
        try:
            for item in bar:
                bar.set_postfix_str(item.attempt_id)
                with EpisodeReader(item.folder) as ep:
                    if _camera_shapes(ep) != shapes:
                        log.warning("%s: camera set or resolution differs from the first episode; skipped",
                                    item.attempt_id)
                        report.skipped.append(item.attempt_id)
                        continue
                    _write_episode(dataset, item, ep, shapes, reencode, codec, crf, tmp_root, report)
            dataset.finalize()
        except BaseException:
            _abandon(dataset)   # before replace_output removes the staging folder
            raise
        finally:
            bar.close()
            shutil.rmtree(tmp_root, ignore_errors=True)
            images = staging / "images"
            if images.is_dir() and not any(images.rglob("*")):
                shutil.rmtree(images)
    log.info("exported %d episode(s) to %s", report.episodes, out)
    return report
