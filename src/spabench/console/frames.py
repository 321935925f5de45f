"""Live frames for the browser, published off the control loop.

In a session (`operator=web`) the work is split between two processes. In the control process,
ShelfPublisher's `on_step` keeps a reference to the tick's images (no copy, no lock, no encoding);
its background thread (niced below the control loop) wakes at `stream_hz` and, only while the
console process asked for frames in the last two seconds, copies the latest images into shared
memory (console.shelf), once whatever the number of pages; between trials it also scores the
reference alignment. In the console process, FramePublisher reads that shared memory and encodes
JPEGs (downscaled to `stream_width`) for the pages, likewise at `stream_hz` and only while watched.
A FramePublisher fed by `publish` in one process is the same encoder without the shared memory.
Older frames are simply overwritten: latest only, never a queue.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from spabench.console.config import ConsoleConfig
from spabench.console.shelf import FrameShelf, ShelfReader
from spabench.operator.alignment import alignment_score, load_rgb

WATCH_S = 2.0
BACKGROUND_NICE = 10  # the console's threads yield the CPU to the control loop when it is scarce


def lower_thread_priority(nice: int = BACKGROUND_NICE) -> None:
    """Linux schedules threads individually: make the calling thread nicer than the control loop."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not permitted: run at normal priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))


def encode_jpeg(rgb: np.ndarray, quality: int = 70, max_width: int | None = None) -> bytes:
    import cv2

    img = np.ascontiguousarray(rgb)
    if max_width and img.shape[1] > max_width:
        h = max(1, round(img.shape[0] * max_width / img.shape[1]))
        img = cv2.resize(img, (max_width, h), interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", img[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()


class StreamGate:
    """At most `limit` pages watch the live views at once (each page names itself with `viewer`): every
    frame a page fetches costs the console a request and its share of the encoding."""

    def __init__(self, limit: int, window_s: float = WATCH_S):
        self.limit, self.window_s = limit, window_s
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def admit(self, viewer: str) -> bool:
        now = time.monotonic()
        with self._lock:
            if viewer not in self._seen:
                self._seen = {v: t for v, t in self._seen.items() if now - t <= self.window_s}
                if len(self._seen) >= self.limit:
                    return False
            self._seen[viewer] = now
            return True


class LatestImages:
    """What both publishers share: the producer side (the control loop's only cost is keeping a
    reference to the tick's images: no copy, no lock, no encoding; the publisher's thread takes the
    newest) and the trial's references with the alignment of the latest images against them."""

    def __init__(self, cfg: ConsoleConfig):
        self.cfg = cfg
        self._latest: Mapping[str, np.ndarray] | None = None
        self._seq = 0
        self._refs: dict[str, np.ndarray] = {}
        self.alignment: dict[str, float] = {}
        self._lock = threading.Lock()

    def set_references(self, paths: Mapping[str, Path | None]) -> None:
        refs = {cam: load_rgb(p) for cam, p in paths.items() if p is not None}
        with self._lock:
            self._refs = refs
            self.alignment = {}

    def has_reference(self, camera: str) -> bool:
        return camera in self._refs

    def score_now(self) -> dict[str, float]:
        """Alignment of the latest images against the references, computed on the caller's thread."""
        images = self._latest or {}
        with self._lock:
            refs = dict(self._refs)
        return {cam: round(alignment_score(images[cam], ref, self.cfg.workspace_roi), 4)
                for cam, ref in refs.items() if cam in images}

    def publish(self, images: Mapping[str, np.ndarray]) -> None:
        self._latest = images
        self._seq += 1

    def on_step(self, step) -> None:
        self._latest = step.images
        self._seq += 1


class FramePublisher(LatestImages):
    """The JPEG encoder of the live views (see the module doc): fed by `publish` / `on_step`, or,
    with `source`, from the control process's shared memory."""

    def __init__(self, cfg: ConsoleConfig, source: ShelfReader | None = None):
        super().__init__(cfg)
        self._source = source
        self._done_seq: Any = 0
        self._jpeg: dict[str, bytes] = {}
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._watched = 0.0
        self.encoded = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spabench-console-frames", daemon=True)
        self._thread.start()

    # ---- consumer side (web requests) -------------------------------------------------------
    def jpeg(self, camera: str) -> bytes | None:
        self._watched = time.monotonic()
        if self._source is not None:
            self._source.want()     # the control process copies frames while someone asks
        self._wake.set()
        return self._jpeg.get(camera)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self._shapes)

    # ---- the encoder thread -----------------------------------------------------------------
    def _run(self) -> None:
        lower_thread_priority()
        period = 1.0 / self.cfg.stream_hz
        while not self._stop.is_set():
            started = time.monotonic()
            if started - self._watched > WATCH_S:  # nobody is looking: sleep until a request comes
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            seq, images = self._next()
            if images is not None and seq != self._done_seq:
                with contextlib.suppress(Exception):  # a torn or odd frame must not kill the stream
                    self._encode(images)
                self._done_seq = seq
            self._stop.wait(max(0.0, period - (time.monotonic() - started)))

    def _next(self) -> tuple[Any, Mapping[str, Any] | None]:
        """The latest images and a key that changes with them."""
        if self._source is None:
            return self._seq, self._latest
        version = self._source.version()
        if version == self._done_seq:
            return version, None
        return version, self._source.latest()

    def _encode(self, images: Mapping[str, Any]) -> None:
        out, shapes = {}, {}
        for cam, img in list(images.items()):
            if img is None:
                continue
            arr = np.asarray(img)
            shapes[cam] = tuple(arr.shape)
            out[cam] = encode_jpeg(arr, self.cfg.jpeg_quality, self.cfg.stream_width)
        self._jpeg.update(out)
        self._shapes.update(shapes)
        self.encoded += 1
        if self._refs:
            self.alignment = self.score_now()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(2.0)


class ShelfPublisher(LatestImages):
    """The control process's side of the live views (see the module doc): a rollout observer and
    idle-time sink whose thread copies the latest images into a FrameShelf for the console process,
    and the alignment of the latest images against the trial's references."""

    def __init__(self, cfg: ConsoleConfig):
        super().__init__(cfg)
        self.shelf = FrameShelf()
        self._score_after: int | None = None   # scoring the alignment: frames published after this one
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spabench-console-shelf", daemon=True)
        self._thread.start()

    def score_live(self, on: bool) -> None:
        """Score the alignment of the frames published from now on (the operator stages the scene),
        never the one left from before (the last rollout's), or stop scoring."""
        self._score_after = self._seq if on else None

    def _run(self) -> None:
        lower_thread_priority()
        period = 1.0 / self.cfg.stream_hz
        put, scored = 0, 0
        while not self._stop.is_set():
            started = time.monotonic()
            seq, images = self._seq, self._latest
            if images is not None and seq != put and self.shelf.watched(WATCH_S):
                with contextlib.suppress(Exception):  # an odd frame must not end the stream
                    self.shelf.put(images)
                put = seq
            after = self._score_after
            if images is not None and seq != scored and after is not None and seq > after and self._refs:
                with contextlib.suppress(Exception):
                    self.alignment = self.score_now()
                scored = seq
            self._stop.wait(max(0.0, period - (time.monotonic() - started)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.shelf.close()
