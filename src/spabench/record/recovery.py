"""Finish episode folders a crash left behind (`<attempt>.partial/` after kill -9, power loss, or a
session that exited before its videos were closed), so that nothing recorded is lost.

What a crash leaves: episode.h5 still flagged as open by its (dead) SWMR writer, which plain
`h5py.File` refuses ("already open for write"), rows up to the last flush, events only in the
JSON-lines `events_log`, and MP4s that their orphaned encoders closed with every frame they had,
often more frames than the h5 has rows. Recovery reads the h5 the SWMR way, writes a plain copy
(rows truncated to what every dataset holds, `events` written out, end-of-episode attributes),
cuts each MP4 (stream copy, no re-encoding) to the frames of recorded rows, marks rows whose frame
never reached the MP4 as without one, recounts the per-camera frame accounting, writes videos.json
and renames the folder to its final name. The episode's end time is the last recorded row's.

`recover_campaign(ledger, campaign_dir)` runs from `spabench run` at start-up (after the ledger has
marked running attempts interrupted) and points the ledger at the folder that now exists.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import h5py
import numpy as np

from spabench.record.arrays import is_tick_dataset, whole_ticks
from spabench.record.frametimes import frame_stats
from spabench.record.reader import open_h5, time_base_s
from spabench.record.recorder import H5_NAME, PARTIAL_SUFFIX, VIDEOS_JSON, RecordError, video_name

log = logging.getLogger(__name__)

PTS_TOLERANCE_S = 1e-4
SETTLE_TIMEOUT_S = 15.0  # longest wait for an orphaned encoder to finish its file


@dataclass
class Recovered:
    folder: Path               # the final folder
    rows: int                  # recorded ticks kept
    ended_at: str | None       # ISO 8601 UTC of the last recorded row (None when unknown)
    videos: dict[str, dict]    # videos.json as written
    writer_died: bool          # the h5 was never closed (kill -9), not just its videos unfinished


def _events(f: h5py.File) -> list[dict]:
    if "events" in f:
        return [json.loads(s.decode() if isinstance(s, bytes) else s) for s in f["events"][()]]
    if "events_log" not in f:
        return []
    out = []
    for line in bytes(f["events_log"][()].tobytes()).decode(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # the torn last line of a crash
            break
    return out


def _readable(path: Path) -> bool:
    import av  # noqa: PLC0415

    try:
        with av.open(str(path)) as c:
            readable = c.streams.video[0] is not None
        return readable
    except Exception:  # noqa: BLE001 - not (yet) a complete MP4
        return False


def _settle(path: Path, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """An orphaned encoder may still be closing the file (its index is written last): wait until the
    file is a readable MP4 that has not changed for a second, or the timeout passes."""
    import time  # noqa: PLC0415

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            quiet = time.time() - path.stat().st_mtime >= 1.0
        except OSError:
            return
        if quiet and _readable(path):
            return
        time.sleep(0.2)


def _cut_video(path: Path, t_max: float) -> tuple[int, str | None]:
    """Keep the frames presented at or before t_max (stream copy). Returns (frames kept, error)."""
    import av  # noqa: PLC0415

    _settle(path)
    try:
        with av.open(str(path)) as src:
            stream = src.streams.video[0]
            packets = [p for p in src.demux(stream) if p.size and p.pts is not None]
            tb = time_base_s(stream)
            keep = [p for p in packets if p.pts is not None and p.pts * tb <= t_max + PTS_TOLERANCE_S]
            if len(keep) == len(packets):
                return len(packets), None
            tmp = path.with_name(path.name + ".cut.mp4")
            from spabench.record.video import MUXER_OPTIONS  # noqa: PLC0415

            with av.open(str(tmp), "w", options=MUXER_OPTIONS) as dst:
                out = dst.add_stream_from_template(stream)
                for packet in keep:
                    packet.stream = out
                    dst.mux(packet)
        os.replace(tmp, path)
        return len(keep), None
    except Exception as exc:  # noqa: BLE001 - an unreadable video is reported, the episode kept
        return 0, f"unreadable after the crash: {type(exc).__name__}: {exc}"


def _ended_at(events: list[dict], last_t: float) -> str | None:
    start = next((e for e in events if e.get("kind") == "timer_started" and "wall_time" in e), None)
    if start is None:
        return None
    return datetime.fromtimestamp(float(start["wall_time"]) + last_t, UTC).isoformat(timespec="microseconds")


def finalize_partial(folder: str | os.PathLike) -> Recovered:
    """Make a `.partial` episode folder final (see the module docstring). Idempotent per folder."""
    folder = Path(folder)
    if not folder.name.endswith(PARTIAL_SUFFIX):
        raise RecordError(f"{folder}: not a .partial episode folder")
    final = folder.with_name(folder.name[: -len(PARTIAL_SUFFIX)])
    if final.exists():
        raise RecordError(f"{final} already exists beside {folder.name}; keep both and check by hand")
    h5 = folder / H5_NAME
    if not h5.exists():
        raise RecordError(f"{folder}: no {H5_NAME}")
    attrs, datasets, events = _read_partial(h5)
    complete = bool(attrs.get("complete", False))
    cameras = json.loads(attrs.get("cameras", "[]") or "[]")
    step_names = [name for name in datasets if is_tick_dataset(name)]
    n = whole_ticks({name: len(data) for name, data in datasets.items()})
    times = datasets.get("timestamp", np.zeros(0))[:n]
    last_t = float(times[-1]) if n else 0.0
    rate = float(attrs.get("control_hz") or 30.0)
    videos = _recover_videos(folder, cameras, datasets, attrs, n, times, rate)

    tmp = folder / (H5_NAME + ".recovered")
    with h5py.File(tmp, "w") as dst:
        _write_rows(dst, datasets, step_names, n, events)
        for key, value in attrs.items():
            dst.attrs[key] = value
        if not complete:  # the writer died: what an orderly close would have added
            ended = _ended_at(events, last_t + 1.0 / rate)
            dst.attrs.update({
                "stop_reason": "interrupted", "valid": False, "invalid_reason": "interrupted",
                "stop_detail": "the recording process died (kill or crash); recovered on resume",
                "duration_s": last_t + 1.0 / rate if n else 0.0, "end_time": ended or "",
                "camera_frames": json.dumps({c: {k: v for k, v in videos[c].items() if k in (
                    "distinct_frames", "repeated", "skipped", "longest_gap_s", "fps")} for c in cameras},
                    sort_keys=True),
                "dropped_frames": json.dumps({c: videos[c]["dropped"] for c in cameras}, sort_keys=True),
            })
        dst.attrs["n_steps"] = n
        dst.attrs["complete"] = True
        dst.attrs["recovered"] = True
    os.replace(tmp, h5)
    (folder / VIDEOS_JSON).write_text(json.dumps(videos, indent=1, sort_keys=True))
    os.replace(folder, final)
    ended_at = _ended_at(events, last_t + 1.0 / rate) if n else None
    log.info("recovered %s: %d rows", final, n)
    return Recovered(folder=final, rows=n, ended_at=ended_at, videos=videos, writer_died=not complete)


def _read_partial(h5: Path) -> tuple[dict, dict[str, np.ndarray], list]:
    """(attributes, every dataset by name, events) of an episode.h5 its dead writer left open."""
    with open_h5(h5) as src:
        attrs = {k: v for k, v in src.attrs.items()}
        datasets: dict[str, np.ndarray] = {}

        def grab(name: str, obj) -> None:
            if isinstance(obj, h5py.Dataset):
                if src.swmr_mode:
                    obj.refresh()
                datasets[name] = obj[()]

        src.visititems(grab)
        events = _events(src)
    return attrs, datasets, events


def _recover_videos(folder: Path, cameras: list[str], datasets: dict[str, np.ndarray], attrs: dict,
                    n: int, times: np.ndarray, rate: float) -> dict[str, dict]:
    """Cut each camera's MP4 to the recorded rows, mark rows whose frame never reached it (in
    `datasets`), and recount the camera's frames: the new videos.json entries."""
    last_t = float(times[-1]) if n else 0.0
    camera_fps = json.loads(attrs.get("camera_fps") or "{}") if isinstance(attrs.get("camera_fps"), str) else {}
    old_videos = {}
    if (folder / VIDEOS_JSON).exists():
        try:
            old_videos = json.loads((folder / VIDEOS_JSON).read_text())
        except ValueError:
            old_videos = {}
    videos: dict[str, dict] = {}
    for cam in cameras:
        key = f"camera/{cam}/frame_index"
        path = folder / video_name(cam)
        index = datasets.get(key, np.full(n, -1))[:n].astype("i8")
        if path.exists():
            kept, error = _cut_video(path, last_t)
        else:
            kept, error = 0, "no video file"
        lost = index >= kept  # the encoder never got these frames into the file before the crash
        index[lost] = -1
        datasets[key] = index
        capture = datasets.get(f"camera/{cam}/capture_t", times)[:n]
        stats = frame_stats(capture[np.isfinite(capture)], float(camera_fps.get(cam) or rate))
        videos[cam] = {**old_videos.get(cam, {}), "file": video_name(cam), "frames": int(kept),
                       "dropped": int((index < 0).sum()), "error": error or old_videos.get(cam, {}).get("error"),
                       "recovered": True, "rows": n,
                       **{("distinct_frames" if k == "frames" else k): v for k, v in stats.items()}}
    return videos


def _write_rows(dst: h5py.File, datasets: dict[str, np.ndarray], step_names: list[str], n: int,
                events: list) -> None:
    """Every dataset into the plain copy, step datasets cut to the `n` rows all of them hold, and the
    events written out as the `events` dataset."""
    for name, data in datasets.items():
        if name == "events":
            continue
        data = data[:n] if name in step_names else data
        if data.ndim:
            dst.create_dataset(name, shape=data.shape, dtype=data.dtype, maxshape=(None, *data.shape[1:]),
                               chunks=(max(1, min(256, len(data))), *data.shape[1:]))
            if data.size:
                dst[name][...] = data
        else:
            dst.create_dataset(name, data=data)
    text = [json.dumps(e, default=str, sort_keys=True) for e in events]
    dst.create_dataset("events", data=np.array(text, dtype=h5py.string_dtype()), dtype=h5py.string_dtype())


def recover_campaign(ledger, campaign_dir: str | os.PathLike, say=print,
                     bench_id: str | None = None) -> list[Recovered]:
    """Finish every `.partial` folder of a finished (or interrupted) attempt and point the ledger
    at the final folder, with the end time of its last recorded row where the writer died. With
    `bench_id` (a shared multi-bench ledger) only that bench's attempts: another bench may still be
    encoding its latest videos."""
    campaign_dir = Path(campaign_dir)
    out = []
    for attempt in ledger.attempts():
        if attempt.status == "running" or not attempt.episode_path:
            continue
        if bench_id is not None and getattr(attempt, "bench_id", None) != bench_id:
            continue
        recorded = campaign_dir / attempt.episode_path
        partial = recorded.with_name(recorded.name + PARTIAL_SUFFIX)
        if recorded.name.endswith(PARTIAL_SUFFIX):
            partial, recorded = recorded, recorded.with_name(recorded.name[: -len(PARTIAL_SUFFIX)])
        if recorded.exists() or not partial.is_dir():
            continue
        try:
            done = finalize_partial(partial)
        except (RecordError, OSError) as exc:
            say(f"warning: attempt {attempt.attempt_id}: could not finish {partial}: {exc}")
            continue
        rel = done.folder.relative_to(campaign_dir).as_posix()
        ledger.episode_recovered(attempt.attempt_id, rel, done.ended_at if done.writer_died else None,
                                 {"rows": done.rows, "videos": {c: v["frames"] for c, v in done.videos.items()}})
        say(f"attempt {attempt.attempt_id}: recording finished from {partial.name} ({done.rows} rows) -> {rel}")
        out.append(done)
    return out
