"""`spabench import lerobot dataset=DIR out=DIR [cells=FILE.csv]`: a LeRobotDataset v3 as a campaign.

A dataset recorded elsewhere (`lerobot-record`, `lerobot-rollout`, another lab's release) becomes a
campaign folder whose every episode is one complete, unscored attempt: scored blind from the terminal
or the console like a native one. The dataset is read with LeRobot's own `LeRobotDatasetMetadata`
(episodes, tasks, features, per-episode video spans) and the per-frame columns straight from the
episode's data file, one episode at a time (LeRobotDataset would load every frame table at once).

Videos are never decoded or re-encoded: each v3 MP4 (several episodes end to end) is hard-linked (or
copied) once into OUT/videos/ with the dataset's own layout, and each episode's `source.json` names
its span in it (LeRobot's from_timestamp/to_timestamp); the reader and the review page play that span.

Everything is checked before anything is written, then built in a staging folder beside OUT and
renamed into place: a failure leaves nothing behind.

Without cells= the campaign is a *review campaign*: the tasks are the dataset's own task texts and
`report` gives per-task success and the failure modes. With cells= (episode_index, task, condition,
evaluation_id[, policy, matched_group, scene_id]) each episode is a trial of a Spa-Bench cell and the
full protocol report runs once the episodes are scored.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spabench.errors import ConfigError, SpabenchError
from spabench.record.reader import SOURCE_JSON
from spabench.record.recorder import H5_NAME
from spabench.suite.vocabulary import JOINTS

IMPORT_COMMAND = "import lerobot"
REVIEW_KIND = "review"                 # the ledger meta's `kind` of a campaign without cells
RECORDED = "recorded"                  # a review campaign's condition and scene condition
BENCH_KIND = "imported"                # the attempts' bench kind: never pooled with rollouts run here
CELL_COLUMNS = ("episode_index", "task", "condition", "evaluation_id")
OPTIONAL_CELL_COLUMNS = ("policy", "matched_group", "scene_id")
CONVERT_COMMAND = "python -m lerobot.scripts.convert_dataset_v21_to_v30"
IMAGE_PREFIX = "observation.images."


class ImportError_(SpabenchError):   # noqa: N801 (ImportError is Python's own)
    """The dataset cannot be imported as it is; nothing was written."""


@dataclass(frozen=True)
class VideoSpan:
    key: str            # the dataset's feature key, e.g. observation.images.front
    file: Path          # the MP4 relative to the dataset root (videos/<key>/chunk-XXX/file-YYY.mp4)
    from_s: float
    to_s: float


@dataclass(frozen=True)
class EpisodeSource:
    index: int
    task: str
    length: int
    data_file: Path     # relative to the dataset root
    videos: dict[str, VideoSpan]   # camera name -> span


@dataclass(frozen=True)
class DatasetSource:
    root: Path
    repo_id: str
    fps: float
    robot_type: str
    cameras: dict[str, str]          # camera name -> feature key
    state_names: list[str] | None    # None: the dataset has no observation.state
    action_names: list[str] | None
    episodes: list[EpisodeSource] = field(default_factory=list)


@dataclass(frozen=True)
class Cell:
    task: str
    condition: str
    evaluation_id: str
    policy: str | None = None
    matched_group: str | None = None
    scene_id: str | None = None


@dataclass
class ImportResult:
    out: Path
    episodes: int
    frames: int
    seconds: float          # the episodes' recorded duration
    videos_linked: int
    videos_copied: int
    review: bool


# ---------------------------------------------------------------------------- reading the dataset
def _camera_names(keys: list[str]) -> dict[str, str]:
    """Feature key -> a camera name safe in a URL and a file name (`observation.images.front` -> front)."""
    out: dict[str, str] = {}
    for key in keys:
        short = key[len(IMAGE_PREFIX):] if key.startswith(IMAGE_PREFIX) else key
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", short).strip("_") or "camera"
        while name in out:
            name += "_"
        out[name] = key
    return out


def resolve_dataset(given: str | os.PathLike) -> tuple[Path, str]:
    """(dataset root, repo id) of `dataset=`: a local folder, or a Hub id already in LeRobot's local
    cache ($HF_LEROBOT_HOME/<id>). The Hub is never asked."""
    path = Path(given).expanduser()
    if path.is_dir():
        return path.absolute(), f"local/{path.absolute().name}"
    text = str(given)
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", text):
        from lerobot.utils import constants

        cached = Path(constants.HF_LEROBOT_HOME) / text    # where LeRobot keeps a dataset it recorded or pulled
        if (cached / "meta").is_dir():
            return cached, text
        snapshot = _hub_snapshot(text, Path(constants.HF_LEROBOT_HUB_CACHE))
        if snapshot is not None:
            return snapshot, text
        raise ImportError_(f"dataset={text}: no such folder, and not in LeRobot's local cache ({cached}); "
                           "import reads local datasets only: download it first (e.g. `hf download "
                           f"{text} --repo-type dataset --local-dir DIR`) and give dataset=DIR")
    raise ImportError_(f"dataset={text}: no such folder (allowed: a LeRobotDataset v3 folder with meta/info.json)")


def _hub_snapshot(repo_id: str, cache: Path) -> Path | None:
    """A Hub dataset's snapshot already in LeRobot's hub cache (never downloaded here), else None."""
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo_id, repo_type="dataset", cache_dir=cache, local_files_only=True))
    except Exception:   # not cached (huggingface_hub says so with one of several errors)
        return None
    return path if (path / "meta").is_dir() else None


def _version_problem(root: Path) -> str | None:
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        return (f"dataset={root}: not a LeRobotDataset folder (no meta/info.json; a v3 dataset holds meta/, "
                "data/ and videos/)")
    try:
        info = json.loads(info_path.read_text())
        version = str(info["codebase_version"])
    except (ValueError, KeyError, TypeError) as exc:
        return f"{info_path}: unreadable ({type(exc).__name__}: {exc})"
    if not version.startswith("v3."):
        how = (f" LeRobot converts a v2.1 dataset in place: {CONVERT_COMMAND} --repo-id=<org/name> "
               f"--root={root} --push-to-hub=false" if version.startswith("v2") else "")
        return f"dataset={root}: a LeRobotDataset {version}, not v3.x.{how}"
    for part in ("meta/tasks.parquet", "meta/episodes"):
        if not (root / part).exists():
            return f"dataset={root}: not a complete LeRobotDataset v3 ({part} is missing; was it finalized?)"
    if not any((root / "meta" / "episodes").rglob("*.parquet")):   # LeRobot would then ask the Hub for them
        return f"dataset={root}: not a complete LeRobotDataset v3 (meta/episodes/ holds no parquet file; was it finalized?)"
    return None


def read_dataset(given: str | os.PathLike) -> DatasetSource:
    """The dataset's metadata, every episode checked (frames, data file, each camera's video file)."""
    root, repo_id = resolve_dataset(given)
    problem = _version_problem(root)
    if problem:
        raise ImportError_(problem)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")   # a local folder (checked above): LeRobot never asks the Hub
    from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata

    try:
        meta = LeRobotDatasetMetadata(repo_id, root=root)
    except Exception as exc:   # LeRobot's own message says what is wrong with its files
        raise ImportError_(f"dataset={root}: LeRobot cannot read its metadata "
                           f"({type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]})") from None
    if not meta.total_episodes or meta.episodes is None:
        raise ImportError_(f"dataset={root}: holds no episodes")
    features = meta.features
    cameras = _camera_names(list(meta.video_keys))
    if not cameras:
        raise ImportError_(f"dataset={root}: no video features (keys: {', '.join(features)}); a review needs "
                           "the cameras' videos")

    def names(key: str) -> list[str] | None:
        if key not in features:
            return None
        given_names = features[key].get("names")
        if isinstance(given_names, dict):   # older datasets: {"motors": [...]}
            given_names = next(iter(given_names.values()), None)
        n = int(np.prod(features[key]["shape"]))
        return [str(x) for x in given_names] if isinstance(given_names, list) and len(given_names) == n \
            else [f"{key}[{i}]" for i in range(n)]

    episodes = []
    for row in meta.episodes:
        index = int(row["episode_index"])
        length = int(row["length"])
        tasks = list(row["tasks"] or [])
        if length <= 0:
            raise ImportError_(f"dataset={root}: episode {index} has no frames (length {length})")
        if not tasks or not str(tasks[0]).strip():
            raise ImportError_(f"dataset={root}: episode {index} has no task text")
        data_file = Path(meta.get_data_file_path(index))
        if not (root / data_file).is_file():
            raise ImportError_(f"dataset={root}: episode {index}: its data file {data_file} is missing")
        videos = {}
        for name, key in cameras.items():
            file = Path(meta.get_video_file_path(index, key))
            if not (root / file).is_file():
                raise ImportError_(f"dataset={root}: episode {index}: camera {key}: its video file {file} is missing")
            start, end = float(row[f"videos/{key}/from_timestamp"]), float(row[f"videos/{key}/to_timestamp"])
            if not end > start >= 0:
                raise ImportError_(f"dataset={root}: episode {index}: camera {key}: empty video span "
                                   f"{start}..{end} s")
            videos[name] = VideoSpan(key, file, start, end)
        episodes.append(EpisodeSource(index, " / ".join(str(t) for t in tasks), length, data_file, videos))
    episodes.sort(key=lambda e: e.index)
    return DatasetSource(root, repo_id, float(meta.fps), str(meta.robot_type or ""), cameras,
                         names("observation.state"), names("action"), episodes)


# ---------------------------------------------------------------------------- cells
def read_cells(path: str | os.PathLike, episodes: list[int]) -> dict[int, Cell]:
    """cells=FILE.csv: one row per episode (every episode, once) -> its Spa-Bench cell."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ImportError_(f"cells={path}: no such file (a CSV with columns {', '.join(CELL_COLUMNS)})")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = [c.strip() for c in reader.fieldnames or []]
        missing = [c for c in CELL_COLUMNS if c not in header]
        if missing:
            raise ImportError_(f"cells={path}: missing column(s) {', '.join(missing)} (columns: "
                               f"{', '.join(CELL_COLUMNS)}; optional: {', '.join(OPTIONAL_CELL_COLUMNS)})")
        out: dict[int, Cell] = {}
        for line, raw in enumerate(reader, start=2):
            row = {k.strip(): (v or "").strip() for k, v in raw.items() if k}
            try:
                index = int(row["episode_index"])
            except ValueError:
                raise ImportError_(f"cells={path}: line {line}: episode_index {row['episode_index']!r} is not a "
                                   "number") from None
            if index not in episodes:
                raise ImportError_(f"cells={path}: line {line}: episode {index} is not in the dataset "
                                   f"(episodes {min(episodes)}..{max(episodes)})")
            if index in out:
                raise ImportError_(f"cells={path}: line {line}: episode {index} is mapped twice")
            for name in CELL_COLUMNS[1:]:
                if not row.get(name):
                    raise ImportError_(f"cells={path}: line {line}: episode {index}: empty {name}")
            out[index] = Cell(row["task"], row["condition"], row["evaluation_id"], row.get("policy") or None,
                              row.get("matched_group") or None, row.get("scene_id") or None)
    left = [i for i in episodes if i not in out]
    if left:
        raise ImportError_(f"cells={path}: no row for episode(s) {', '.join(map(str, left[:10]))}"
                           + (" ..." if len(left) > 10 else "") + " (every episode needs its cell)")
    return out


def _scene_condition(condition: str) -> str:
    from spabench.suite.vocabulary import SCENE_CONDITIONS

    return condition if condition in SCENE_CONDITIONS else "ood"   # direct / paraphrase trials: the OOD scene


# ---------------------------------------------------------------------------- the plan
def _aliases(policies: list[str]) -> dict[str, str]:
    return {p: f"P{i}" for i, p in enumerate(policies, start=1)}


def build_trials(source: DatasetSource, cells: dict[int, Cell] | None) -> tuple[list[Any], dict[int, str]]:
    """(TrialRows, episode index -> trial id), validated as the ledger will (before anything is written)."""
    from spabench.ledger.ledger import validate_plan
    from spabench.ledger.schema import TrialRow

    default_policy = source.repo_id
    policies = sorted({(cells[e.index].policy if cells else None) or default_policy for e in source.episodes})
    alias = _aliases(policies)
    rows, trial_of = [], {}
    for order, ep in enumerate(source.episodes):
        duration = ep.length / source.fps
        if cells is None:
            policy, evaluation = default_policy, f"EP{ep.index:06d}"
            task, condition, scene_condition = ep.task, RECORDED, RECORDED
            scene_id, matched, cell = f"episode_{ep.index}", None, ep.task
        else:
            c = cells[ep.index]
            policy, evaluation = c.policy or default_policy, c.evaluation_id
            task, condition, scene_condition = c.task, c.condition, _scene_condition(c.condition)
            scene_id, matched, cell = c.scene_id or evaluation, c.matched_group, f"{c.task}/{c.condition}"
        trial_id = f"{evaluation}-{alias[policy]}"
        trial_of[ep.index] = trial_id
        rows.append(TrialRow(trial_id=trial_id, evaluation_id=evaluation, policy=policy, card=policy,
                             alias=alias[policy], task=task, condition=condition, scene_id=scene_id,
                             scene_condition=scene_condition, matched_group=matched, cell=cell, withheld=False,
                             instruction=ep.task,
                             instruction_variant="paraphrase" if condition.startswith("paraphrase") else "original",
                             timer_s=max(duration, 1e-3), order=order, control_hz=source.fps))
    try:
        validate_plan(rows, source="cells=" if cells is not None else "dataset", review=cells is None)
    except SpabenchError as exc:
        raise ImportError_(f"{exc}") from None
    return rows, trial_of


# ---------------------------------------------------------------------------- writing one episode
def _columns(source: DatasetSource, ep: EpisodeSource) -> dict[str, np.ndarray]:
    """The episode's per-frame columns (timestamp, state, action), read from its data file only."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    wanted = ["episode_index", "frame_index", "timestamp"]
    wanted += [k for k, n in (("observation.state", source.state_names), ("action", source.action_names)) if n]
    table = pq.read_table(source.root / ep.data_file, columns=wanted, filters=[("episode_index", "==", ep.index)])
    if table.num_rows != ep.length:
        raise ImportError_(f"dataset={source.root}: episode {ep.index}: {table.num_rows} frame(s) in "
                           f"{ep.data_file}, its metadata says {ep.length}")
    order = np.argsort(table.column("frame_index").to_numpy(), kind="stable")
    out = {"timestamp": table.column("timestamp").to_numpy().astype("f8")[order]}
    for key in ("observation.state", "action"):
        if key in table.column_names:
            out[key] = np.asarray(table.column(key).to_pylist(), dtype="f8").reshape(ep.length, -1)[order]
    return out


def _joint_view(values: np.ndarray | None, names: list[str] | None, n: int) -> np.ndarray:
    """The arrays as the review page's joint plot reads them (JOINTS order): columns named
    `<joint>.pos` (LeRobot's SO-100/101 names) or `<joint>` are placed; anything else stays NaN
    (the dataset's own columns are kept beside, under lerobot/)."""
    out = np.full((n, len(JOINTS)), np.nan)
    if values is None or names is None:
        return out
    for j, joint in enumerate(JOINTS):
        for i, name in enumerate(names):
            if name in (joint, f"{joint}.pos"):
                out[:, j] = values[:, i]
    return out


def write_episode(folder: Path, source: DatasetSource, ep: EpisodeSource, video_files: dict[Path, Path],
                  attrs: dict[str, Any]) -> int:
    """episode.h5 (the native layout: timestamps, joints, per-camera frame index, no events) and
    source.json (the cameras' shared MP4s and this episode's span in each). Returns the frames."""
    import h5py

    from spabench.record.arrays import SCHEMA_VERSION, STEP_DATASETS

    cols = _columns(source, ep)
    n = ep.length
    t = cols["timestamp"] - cols["timestamp"][0]
    state = _joint_view(cols.get("observation.state"), source.state_names, n)
    action = _joint_view(cols.get("action"), source.action_names, n)
    fill = {"timestamp": t, "observation/state": state, "action/raw": action, "action/executed": action}
    folder.mkdir(parents=True)
    with h5py.File(folder / H5_NAME, "w") as f:
        for name, (shape, dtype) in STEP_DATASETS.items():
            if name in fill:
                f.create_dataset(name, data=fill[name].astype(dtype))
            else:
                f.create_dataset(name, data=np.full((n, *shape), -1 if dtype.startswith("i") else np.nan, dtype=dtype))
        for cam in ep.videos:
            f.create_dataset(f"camera/{cam}/frame_index", data=np.arange(n, dtype="i8"))
            f.create_dataset(f"camera/{cam}/capture_t", data=t)
        for key in ("observation.state", "action"):
            if key in cols:
                f.create_dataset(f"lerobot/{key}", data=cols[key])
        f.create_dataset("events", data=np.array([], dtype=h5py.string_dtype()), dtype=h5py.string_dtype())
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["joints"] = json.dumps(list(JOINTS))
        f.attrs["cameras"] = json.dumps(list(ep.videos))
        f.attrs["n_steps"] = n
        f.attrs["complete"] = True
        for key, value in attrs.items():
            f.attrs[key] = value if isinstance(value, (str, int, float)) else json.dumps(value)
    videos = {cam: {"key": span.key, "file": os.path.relpath(video_files[span.file], folder),
                    "from_s": span.from_s, "to_s": span.to_s} for cam, span in ep.videos.items()}
    (folder / SOURCE_JSON).write_text(json.dumps({
        "format": "lerobot_v3", "dataset": str(source.root), "repo_id": source.repo_id,
        "episode_index": ep.index, "fps": source.fps, "videos": videos,
        "state_names": source.state_names, "action_names": source.action_names}, indent=1, sort_keys=True))
    return n


def _place_video(src: Path, dst: Path) -> bool:
    """A dataset MP4 into the campaign, bytes unchanged: a hard link when the file system allows, else
    a copy. True when linked."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
        return True
    except OSError:
        shutil.copyfile(src, dst)
        return False


# ---------------------------------------------------------------------------- the import
def import_lerobot(dataset: str | os.PathLike, out: str | os.PathLike, cells: str | os.PathLike | None = None,
                   progress: Callable[[str], None] | None = None) -> ImportResult:
    """Check the dataset (and cells) completely, then write the campaign into a staging folder beside
    `out` and rename it into place. Raises ImportError_ / ConfigError before anything is written."""
    from spabench import __version__
    from spabench.ledger import Ledger
    from spabench.outputs import check_new_folder, write_marker

    out = Path(out).expanduser().absolute()
    if Ledger.exists(out):
        raise ConfigError(f"out={out} is already a campaign; import writes a new campaign folder only")
    check_new_folder(out, IMPORT_COMMAND)
    source = read_dataset(dataset)
    cell_map = read_cells(cells, [e.index for e in source.episodes]) if cells is not None else None
    rows, trial_of = build_trials(source, cell_map)
    review = cell_map is None

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.import-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        linked = copied = 0
        video_files: dict[Path, Path] = {}
        for ep in source.episodes:
            for span in ep.videos.values():
                if span.file not in video_files:
                    dst = staging / span.file
                    if _place_video(source.root / span.file, dst):
                        linked += 1
                    else:
                        copied += 1
                    video_files[span.file] = dst
        meta = {"campaign": f"import of {source.repo_id}", "kind": REVIEW_KIND if review else "protocol",
                "bench": BENCH_KIND, "blind_aliases": True, "aliases": {r.alias: r.policy for r in rows},
                "policies": sorted({r.policy for r in rows}), "spabench_version": __version__,
                "imported": {"format": "lerobot_v3", "dataset": str(source.root), "repo_id": source.repo_id,
                             "fps": source.fps, "robot_type": source.robot_type, "cameras": source.cameras,
                             "cells": None if cells is None else str(Path(cells).expanduser().absolute())}}
        frames = 0
        Ledger.create(staging / Ledger.FILENAME, rows, f"imported:{source.repo_id}", meta, review=review).close()
        with Ledger.open(staging) as ledger:
            for ep in source.episodes:
                # bench_id: not the dataset's name (it may name the policy, which a blind rater never sees)
                attempt_id = ledger.begin_attempt(trial_of[ep.index], bench_id=BENCH_KIND,
                                                  bench_kind=BENCH_KIND, operator=None)
                rel = f"episodes/{attempt_id}"
                frames += write_episode(staging / rel, source, ep, {v.file: video_files[v.file] for v in ep.videos.values()},
                                        {"control_hz": source.fps, "timer_s": ep.length / source.fps,
                                         "attempt_id": attempt_id, "imported_from": str(source.root),
                                         "episode_index": ep.index, "instruction": ep.task,
                                         "robot_type": source.robot_type})
                ledger.log_event(attempt_id, "imported", {"episode_index": ep.index})
                ledger.finish_attempt(attempt_id, "complete", None, episode_path=rel)
                if progress is not None:
                    progress(f"episode {ep.index}: {ep.length} frames -> {attempt_id}")
        write_marker(staging, IMPORT_COMMAND)
        if out.is_dir():
            out.rmdir()   # check_new_folder: absent or empty
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = sum(e.length for e in source.episodes) / source.fps
    return ImportResult(out, len(source.episodes), frames, seconds, linked, copied, review)


def is_review_campaign(meta: dict[str, Any]) -> bool:
    """A campaign `import lerobot` made without cells= (its report is a review report)."""
    return meta.get("kind") == REVIEW_KIND
