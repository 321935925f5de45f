"""The episode recorder: a rollout observer writing DIR/episodes/<attempt_id>.partial/ -> <attempt_id>/.

`on_episode_end` returns once episode.h5 is durable (well under a second); the five MP4s finish in
the encoder workers and the folder is renamed from a background thread when they are done, so the
next trial can start meanwhile. A folder still named `.partial` is an attempt that never finished
(or whose videos are still being written).

The encoder workers are spawned processes: a script that creates a Recorder must guard its top level
with `if __name__ == "__main__":` (as multiprocessing requires), or every worker re-runs the script.
The `spabench` command and the benchmarks do. A session starts them when the bench connects
(`start_encoders`), so their start-up is not in the first trial's homing and pre-roll.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spabench.atomic import write_text_durably
from spabench.config import check_fields, opt
from spabench.errors import SpabenchError
from spabench.record.arrays import EpisodeArrays
from spabench.record.frametimes import FrameCounter
from spabench.record.video import EncoderPool, EncoderSettings, StreamDone

PARTIAL_SUFFIX = ".partial"
H5_NAME = "episode.h5"
VIDEOS_JSON = "videos.json"
DROP_EVENT_EVERY = 30  # one frame_dropped event per camera for the first drop, then every N drops


class RecordError(SpabenchError):
    """An episode folder cannot be written or read."""


CODECS: tuple[str, ...] = ("libx264", "mpeg4")
# libx264's presets (x264 --help); mpeg4 ignores the preset
X264_PRESETS: tuple[str, ...] = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
                                 "veryslow", "placebo")


@dataclass
class RecorderConfig:
    """The recorder's options (`operator.recorder.*`), their ranges declared here, where they are used."""

    flush_s: float = opt(1.0, gt=0)
    codec: str = opt("libx264", choices=CODECS)
    preset: str = opt("ultrafast", choices=X264_PRESETS)
    crf: int = opt(23, lo=0, hi=51)
    queue_frames: int = opt(30, lo=2)
    video: bool = True

    def __post_init__(self) -> None:
        check_fields(self, "operator config", "recorder.")


def write_json_durably(path: Path, data) -> None:
    """JSON written via a temporary file and fsync, so a full disk never leaves a 0-byte file."""
    write_text_durably(path, json.dumps(data, indent=1, sort_keys=True))


def describe_error(exc: BaseException) -> str:
    text = (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}"[:300]


def video_name(camera: str) -> str:
    return f"cam_{camera}.mp4"


def episode_dir(campaign_dir: str | os.PathLike, attempt_id: str) -> Path:
    """The final folder of an attempt (may not exist yet; see `resolve_episode_dir`)."""
    return Path(campaign_dir) / "episodes" / str(attempt_id)


def resolve_episode_dir(path: str | os.PathLike) -> Path:
    """An episode folder as recorded: the final name if it exists, else its `.partial` twin."""
    p = Path(path)
    if p.name == H5_NAME:
        p = p.parent
    if p.is_dir():
        return p
    partial = p.with_name(p.name + PARTIAL_SUFFIX)
    if partial.is_dir():
        return partial
    raise RecordError(f"{p}: no episode folder (neither {p.name}/ nor {partial.name}/ exists)")


def software_versions() -> dict[str, str]:
    """Versions written into every episode's provenance."""
    from importlib import metadata

    from spabench import __version__

    versions = {"python": platform.python_version(), "spabench": __version__}   # the package's own, the one place
    for dist in ("lerobot", "numpy", "h5py", "av"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = ""
    return versions


class Recorder:
    """Rollout observer that records one attempt per episode. One instance serves a whole campaign
    (its encoder processes are reused); call `close()` at the end to wait for the last videos.

    `records = True` tells the rollout that a failure here (disk full, I/O error) makes the attempt
    invalid (storage_error); `episode_error(attempt_id)` reports a failure found after the rollout
    (a video that could not be finished), once `wait_finished` returned."""

    records = True

    def __init__(self, campaign_dir: str | os.PathLike, config: RecorderConfig | None = None):
        self.campaign_dir = Path(campaign_dir)
        self.config = config or RecorderConfig()
        self.episodes_dir = self.campaign_dir / "episodes"
        self.episodes_dir.mkdir(parents=True, exist_ok=True)
        self._pool: EncoderPool | None = None
        self._arrays: EpisodeArrays | None = None
        self._folder: Path | None = None
        self._meta: Any = None        # the open episode's EpisodeMeta (rollout.types; not imported: no cycle)
        self._cameras: tuple[str, ...] = ()
        self._drops: dict[str, int] = {}
        self._counters: dict[str, FrameCounter] = {}
        self._last_t = 0.0
        self._finalized: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._closing: set[str] = set()
        self._errors: dict[str, str] = {}   # attempt id -> what could not be written
        self.last_episode: Path | None = None

    # ---- helpers --------------------------------------------------------------------------
    @property
    def pool(self) -> EncoderPool:
        if self._pool is None:
            c = self.config
            self._pool = EncoderPool(EncoderSettings(codec=c.codec, preset=c.preset, crf=c.crf,
                                                     queue_frames=c.queue_frames))
        return self._pool

    def start_encoders(self, camera_shapes: dict[str, tuple[int, int, int]]) -> None:
        """Start the video encoders for these frame shapes before the first trial (see
        EncoderPool.start_workers); nothing to do when videos are off."""
        if self.config.video and camera_shapes:
            self.pool.start_workers(camera_shapes)

    def relative_path(self, attempt_id: str) -> str:
        """What the ledger stores: the final folder, relative to the campaign folder."""
        return f"episodes/{attempt_id}"

    # ---- observer hooks -------------------------------------------------------------------
    def on_episode_start(self, meta) -> None:
        if self._arrays is not None:
            raise RecordError(f"episode {self._meta.attempt_id} is still open")
        final = self.episodes_dir / str(meta.attempt_id)
        folder = final.with_name(final.name + PARTIAL_SUFFIX)
        if final.exists():
            raise RecordError(f"{final}: an episode with attempt id {meta.attempt_id} already exists")
        folder.mkdir(parents=True, exist_ok=False)
        cameras = tuple(meta.cameras) or tuple(meta.camera_shapes)
        attrs = {
            f.name: getattr(meta, f.name)
            for f in dataclasses.fields(meta)
            if f.name not in ("cameras", "camera_shapes", "extra")
        }
        attrs.update({f"extra.{k}": v for k, v in (meta.extra or {}).items()})
        attrs["camera_shapes"] = {k: list(v) for k, v in meta.camera_shapes.items()}
        attrs["software_versions"] = software_versions()
        attrs["host"] = platform.node()
        self._arrays = EpisodeArrays(folder / H5_NAME, cameras, attrs, flush_s=self.config.flush_s)
        self._folder, self._meta, self._cameras = folder, meta, cameras
        self._drops = {cam: 0 for cam in cameras}
        fps = dict(getattr(meta, "camera_fps", None) or {})
        self._counters = {cam: FrameCounter(1.0 / float(fps.get(cam) or meta.control_hz)) for cam in cameras}
        self._last_t = 0.0
        if self.config.video and cameras:
            paths = {cam: str(folder / video_name(cam)) for cam in cameras}
            self.pool.open_episode(str(meta.attempt_id), paths, meta.control_hz)
            for cam, shape in meta.camera_shapes.items():  # start encoders before the timer runs
                if cam in paths:
                    self.pool.prepare(cam, tuple(shape))

    def on_step(self, step) -> None:
        arrays = self._arrays
        if arrays is None:
            return
        if arrays.error is not None:  # the rollout stops at once: storage_error
            raise RecordError(f"{arrays.path}: cannot write ({describe_error(arrays.error)})")
        frame_index: dict[str, int] = {}
        capture_t: dict[str, float] = dict(getattr(step, "image_t", None) or {})
        self._last_t = float(step.t)
        for cam in self._cameras:
            if step.images.get(cam) is None:
                continue
            counter = self._counters[cam]
            gap = counter.add(capture_t.setdefault(cam, float(step.t)))
            if gap is not None and counter.is_event(gap):
                arrays.append_event({"kind": "camera_gap", "t": round(float(step.t), 6), "camera": cam,
                                     "gap_s": round(gap, 4), "skipped": int(round(gap / counter.period_s)) - 1})
        if self.config.video:
            for cam in self._cameras:
                image = step.images.get(cam)
                if image is None:
                    frame_index[cam] = -1
                    continue
                index = self.pool.submit(cam, image, float(step.t))
                frame_index[cam] = index
                if index < 0:
                    self._drops[cam] += 1
                    n = self._drops[cam]
                    if n == 1 or n % DROP_EVENT_EVERY == 0:
                        arrays.append_event({"kind": "frame_dropped", "t": round(float(step.t), 6),
                                             "camera": cam, "dropped_so_far": n})
        step.frame_index.update(frame_index)
        arrays.append_step(step.t, step.state, step.raw_action, step.executed_action, step.chunk_id,
                           step.request_latency_s, step.server_ms, step.period_s, step.work_s, frame_index,
                           int(getattr(step, "slot", -1)), capture_t)

    def on_health(self, sample) -> None:
        if self._arrays is not None:
            self._arrays.append_health(sample)

    def on_event(self, event) -> None:
        if self._arrays is not None:
            self._arrays.append_event(event.as_dict() if hasattr(event, "as_dict") else dict(event))

    def on_episode_end(self, result) -> None:
        """Arrays durable on return; videos finish in the background, then the folder is renamed."""
        arrays, folder, meta = self._arrays, self._folder, self._meta
        if arrays is None or folder is None:
            return
        self._arrays = None
        final_attrs = {
            "stop_reason": result.stop_reason,
            "valid": bool(result.valid),
            "invalid_reason": result.invalid_reason or "",
            "stop_detail": getattr(result, "detail", "") or "",
            "duration_s": float(result.duration_s),
            "end_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dropped_frames": dict(self._drops),
            "camera_frames": self.camera_frames(),
            "timing": dict(getattr(result, "timing", None) or {}),
            "health": dict(getattr(result, "health", None) or {}),
        }
        if hasattr(result, "camera_frames"):
            result.camera_frames = self.camera_frames()
        if getattr(result, "motion_onset", None) is not None:
            final_attrs["motion_onset"] = int(result.motion_onset)
        try:
            arrays.close(final_attrs)
        finally:
            self.last_episode = self.episodes_dir / str(meta.attempt_id)
            drops, frames, duration = dict(self._drops), self.camera_frames(), float(result.duration_s)
            with self._lock:
                self._closing.add(folder.name[: -len(PARTIAL_SUFFIX)])
            if self.config.video and self._cameras:
                self.pool.close_episode(lambda results: self._finalize(folder, drops, results, frames, duration),
                                        end_s=duration)
            else:
                self._finalize(folder, drops, {}, frames, duration)

    def camera_frames(self) -> dict[str, dict]:
        """Per camera: distinct frames, repeated (stale) ticks, skipped camera frames, gaps, longest gap,
        and frames the video encoder dropped (its queue full)."""
        return {cam: {**c.as_dict(), "dropped": self._drops.get(cam, 0)} for cam, c in self._counters.items()}

    # ---- background -----------------------------------------------------------------------
    def _finalize(self, folder: Path, drops: dict[str, int], results: dict[str, StreamDone],
                  frames: dict[str, dict] | None = None, duration_s: float | None = None) -> None:
        """Runs on the encoder's thread: never raises (a full disk is reported, not lost in a thread)."""
        attempt_id = folder.name[: -len(PARTIAL_SUFFIX)]
        frames = frames or {}
        videos = {
            cam: {"file": video_name(cam), "frames": r.frames, "dropped": drops.get(cam, 0), "error": r.error,
                  "timestamps": "pts = tick time (s since timer start), time base 1/60000",
                  **({"rollout_duration_s": round(duration_s, 4)} if duration_s is not None else {}),
                  **{("distinct_frames" if k == "frames" else k): v for k, v in frames.get(cam, {}).items()}}
            for cam, r in results.items()
        }
        problems = [f"{cam}: {v['error']}" for cam, v in videos.items() if v["error"]]
        try:
            write_json_durably(folder / VIDEOS_JSON, videos)
            if not problems:
                os.replace(folder, folder.with_name(attempt_id))
        except OSError as exc:
            problems.append(f"{folder.name}: {exc.strerror or exc}")
        finally:
            with self._lock:
                if problems:   # the folder stays .partial: what was written is kept for inspection
                    self._errors[attempt_id] = "; ".join(problems)[:500]
                self._finalized[attempt_id] = videos
                self._closing.discard(attempt_id)
                self._done.notify_all()

    def episode_error(self, attempt_id: str) -> str | None:
        """What could not be written for a finished episode (None: everything is on disk)."""
        with self._lock:
            return self._errors.get(str(attempt_id))

    def wait_finished(self, attempt_id: str, timeout: float | None = None) -> bool:
        """Wait until one episode's videos are written (or failed) and its folder is final."""
        return self._wait_until(lambda: str(attempt_id) not in self._closing, timeout)

    def _wait_until(self, done, timeout: float | None) -> bool:
        """Wait (holding the condition) until `done()`; False on timeout or dead encoders."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while not done():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                if self._pool is not None and not self._pool.alive():
                    return False
                self._done.wait(0.2 if remaining is None else min(remaining, 0.2))
        return True

    def finished(self, attempt_id: str) -> bool:
        with self._lock:
            return str(attempt_id) in self._finalized

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every closed episode's videos are written and its folder renamed."""
        return self._wait_until(lambda: not self._closing, timeout)

    def close(self, timeout: float = 120.0) -> None:
        if self._arrays is not None:  # an episode left open by a failing harness: keep what is there
            self._arrays.abandon()
            self._arrays = None
        if self._pool is not None:
            self._pool.shutdown(timeout)
            self._pool = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

