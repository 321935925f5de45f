"""Read a recorded episode back: arrays, events, provenance and camera frames.

Works on complete folders and on `.partial` ones left by a crash (episode.h5 is then opened in SWMR
read mode, which HDF5 allows for a file whose writer died).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from spabench.record.arrays import is_tick_dataset, whole_ticks
from spabench.record.recorder import (
    H5_NAME,
    PARTIAL_SUFFIX,
    VIDEOS_JSON,
    RecordError,
    resolve_episode_dir,
    video_name,
)

# An imported episode (`spabench import lerobot`) keeps its videos where the dataset had them: one MP4
# per camera holding several episodes. source.json names, per camera, the file (relative to the
# episode folder) and the episode's span in it (from_s, to_s), as LeRobot's episode metadata gives it.
SOURCE_JSON = "source.json"

_JSON_ATTRS = ("server_metadata", "software_versions", "camera_shapes", "camera_fps", "dropped_frames", "joints",
               "cameras", "camera_frames", "timing", "health")


def open_h5(path: str | os.PathLike) -> h5py.File:
    """Open an episode.h5 for reading, also when its writer was killed mid-episode."""
    try:
        return h5py.File(path, "r")
    except OSError:
        try:
            return h5py.File(path, "r", libver="latest", swmr=True)
        except OSError as exc:
            raise RecordError(f"{path}: unreadable episode file ({exc})") from None


def time_base_s(stream: Any) -> float:
    """A demuxed video stream's time base in seconds (an MP4 stream always carries one)."""
    if stream.time_base is None:
        raise RecordError(f"video stream {stream} has no time base")
    return float(stream.time_base)


class EpisodeReader:
    """One episode folder. Use as a context manager or call `close()`."""

    def __init__(self, path: str | os.PathLike):
        self.folder = resolve_episode_dir(path)
        h5 = self.folder / H5_NAME
        if not h5.exists():
            raise RecordError(f"{self.folder}: no {H5_NAME}")
        self._file = open_h5(h5)
        self._ticks: tuple[str, ...] | None = None
        self._length: int | None = None
        source = self.folder / SOURCE_JSON
        self.source: dict[str, Any] | None = json.loads(source.read_text()) if source.is_file() else None

    # ---- provenance ------------------------------------------------------------------------
    @property
    def partial(self) -> bool:
        return self.folder.name.endswith(PARTIAL_SUFFIX)

    @property
    def complete(self) -> bool:
        """The episode was closed cleanly (arrays and events final)."""
        return bool(self._file.attrs.get("complete", False))

    @property
    def attrs(self) -> dict[str, Any]:
        out = {}
        for key, value in self._file.attrs.items():
            if isinstance(value, bytes):
                value = value.decode()
            if isinstance(value, np.generic):
                value = value.item()
            if key in _JSON_ATTRS and isinstance(value, str) and value:
                value = json.loads(value)
            out[key] = value
        return out

    @property
    def cameras(self) -> list[str]:
        return json.loads(self._file.attrs.get("cameras", "[]"))

    # ---- arrays ----------------------------------------------------------------------------
    def _dataset(self, name: str) -> h5py.Dataset:
        if name not in self._file:
            raise RecordError(f"{self.folder / H5_NAME}: no dataset '{name}'")
        ds = self._file[name]
        if self._file.swmr_mode:
            ds.refresh()
        return ds

    def _tick_names(self) -> tuple[str, ...]:
        """The per-tick datasets this file has (older schemas lack some; a file gains none later)."""
        if self._ticks is None:
            names: list[str] = []
            self._file.visititems(lambda name, obj: names.append(name)
                                  if isinstance(obj, h5py.Dataset) and is_tick_dataset(name) else None)
            self._ticks = tuple(names) or ("timestamp",)
        return self._ticks

    def array(self, name: str) -> np.ndarray:
        """A dataset's rows; a per-tick one cut to `len(self)` (see there)."""
        data = self._dataset(name)[()]
        return data[:len(self)] if name in self._tick_names() else data

    def __len__(self) -> int:
        """Ticks recorded: the rows every per-tick dataset holds (arrays.whole_ticks). Kept once read,
        unless the file is open in SWMR mode (a live writer may still be appending)."""
        if self._length is not None:
            return self._length
        n = whole_ticks({name: int(self._dataset(name).shape[0]) for name in self._tick_names()})
        if not self._file.swmr_mode:
            self._length = n
        return n

    @property
    def timestamps(self) -> np.ndarray:
        return self.array("timestamp")

    @property
    def states(self) -> np.ndarray:
        return self.array("observation/state")

    @property
    def raw_actions(self) -> np.ndarray:
        return self.array("action/raw")

    @property
    def executed_actions(self) -> np.ndarray:
        return self.array("action/executed")

    def frame_index(self, camera: str) -> np.ndarray:
        return self.array(f"camera/{camera}/frame_index")

    def capture_times(self, camera: str) -> np.ndarray:
        """Per tick: when the camera captured the frame that tick used (s since the timer started;
        NaN where the tick had no frame). Episodes recorded before schema 2 give the tick times."""
        name = f"camera/{camera}/capture_t"
        return self.array(name) if name in self._file else self.timestamps

    def health(self) -> dict[str, np.ndarray]:
        """Motor telemetry (schema 3): t (s since the timer started), then per sample and motor
        temperature_c, current_ma, load, voltage_v, status. Empty arrays when none was taken."""
        from spabench.record.arrays import HEALTH_FIELDS

        return {name: (self.array(f"health/{name}") if f"health/{name}" in self._file else np.zeros(0))
                for name in HEALTH_FIELDS}
    def events(self) -> list[dict]:
        """Events as dicts: the final `events` dataset, or the crash-safe `events_log` bytes."""
        if "events" in self._file:
            return [json.loads(s.decode() if isinstance(s, bytes) else s) for s in self._file["events"][()]]
        blob = bytes(self.array("events_log").tobytes()).decode(errors="replace")
        out = []
        for line in blob.splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line after a crash
                break
        return out

    # ---- video -----------------------------------------------------------------------------
    @property
    def imported(self) -> bool:
        """Recorded elsewhere and imported: its cameras are the dataset's, its videos shared files."""
        return self.source is not None

    def video_path(self, camera: str) -> Path:
        if self.source is not None:
            video = self.source["videos"].get(camera)
            if video is None:
                raise RecordError(f"{self.folder}: no camera '{camera}' in this imported episode")
            return (self.folder / video["file"]).resolve()
        return self.folder / video_name(camera)

    def video_span(self, camera: str) -> tuple[float, float]:
        """(from_s, to_s): where this episode lies in its camera's MP4 (0, inf: the whole file)."""
        if self.source is None:
            return 0.0, float("inf")
        video = self.source["videos"][camera]
        return float(video["from_s"]), float(video["to_s"])

    def video_info(self) -> dict[str, dict]:
        p = self.folder / VIDEOS_JSON
        return json.loads(p.read_text()) if p.exists() else {}

    def iter_frames(self, camera: str) -> Iterator[np.ndarray]:
        """Decoded RGB frames (HxWx3 uint8) of one camera, in order."""
        for _, frame in self.iter_timed_frames(camera):
            yield frame

    def iter_timed_frames(self, camera: str) -> Iterator[tuple[float, np.ndarray]]:
        """(presentation time in s since the timer started, RGB frame) in order. The time is the
        control tick the frame was paired with; see `capture_times` for when it was captured."""
        import av  # noqa: PLC0415

        path = self.video_path(camera)
        if not path.exists():
            raise RecordError(f"{path}: no video for camera '{camera}'")
        start, end = self.video_span(camera)
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            half = 0.5 / float(stream.average_rate or 30)   # a frame belongs to the span its start is in
            if start > 0:   # a shared file: jump to the keyframe before this episode
                container.seek(int(start / time_base_s(stream)), stream=stream, backward=True)
            for frame in container.decode(stream):
                when = float(frame.time if frame.time is not None else float("nan"))
                if when < start - half:
                    continue
                if when >= end - half:
                    break
                yield when - start, frame.to_ndarray(format="rgb24")

    def frame_times(self, camera: str) -> np.ndarray:
        """Presentation times of every frame in the camera's MP4 (from the container, no decoding)."""
        import av  # noqa: PLC0415

        path = self.video_path(camera)
        if not path.exists():
            raise RecordError(f"{path}: no video for camera '{camera}'")
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None)
            tb = time_base_s(stream)
            half = 0.5 / float(stream.average_rate or 30)
        times = np.asarray(pts, dtype=float) * tb
        start, end = self.video_span(camera)
        if start > 0 or np.isfinite(end):
            times = times[(times >= start - half) & (times < end - half)] - start
        return times

    def video_duration(self, camera: str) -> float:
        """The MP4's duration in seconds, as a player reports it."""
        import av  # noqa: PLC0415

        if self.source is not None:
            start, end = self.video_span(camera)
            return end - start
        with av.open(str(self.video_path(camera))) as container:
            stream = container.streams.video[0]
            if stream.duration is not None:
                seconds = stream.duration * time_base_s(stream)
            else:
                seconds = float(container.duration or 0) / 1e6
        return seconds

    def frame_at(self, camera: str, t: float) -> np.ndarray:
        """The frame on screen at time t (s since the timer started): the last one presented at or
        before t (the first frame for t before it)."""
        chosen = None
        for when, frame in self.iter_timed_frames(camera):
            if chosen is not None and when > t + 1e-4:  # pts are rounded to 1/60000 s
                break
            chosen = frame
        if chosen is None:
            raise RecordError(f"{self.video_path(camera)}: the video holds no frame")
        return chosen

    def first_frame(self, camera: str) -> np.ndarray:
        for frame in self.iter_frames(camera):
            return frame
        raise RecordError(f"{self.video_path(camera)}: the video holds no frame")

    def count_frames(self, camera: str) -> int:
        return sum(1 for _ in self.iter_frames(camera))

    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> EpisodeReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
