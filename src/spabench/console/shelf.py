"""The newest camera frame of each camera, in shared memory: the control process puts, the console
process reads. Latest only (a put overwrites), one copy per put whatever the number of viewers, no
encoding on the control side.

Layout: a small directory segment (`name`) holds, as int64, the time the console last wanted frames
(`time.monotonic_ns()`, one clock for every process on Linux) and per camera the generation of its
data segment (0: none yet). A camera's data segment (`name_<camera index>_<generation>`) starts with
int64 [seq, height, width, channels] and holds the RGB pixels after HEADER_BYTES. A new shape gets a
new generation (the old segment is unlinked; a reader still mapping it keeps reading it until it
sees the new generation).

Each data segment is a seqlock: the writer makes `seq` odd, copies the pixels, makes it even again;
a reader copies the pixels between two reads of `seq` and keeps the copy only when both are the same
even number, so it never keeps a torn frame (x86 keeps stores and loads in program order; the
counter is one aligned 8-byte word).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from multiprocessing import resource_tracker
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from spabench.suite.vocabulary import CAMERAS

HEADER_BYTES = 64          # seq, height, width, channels (int64), padded to a cache line
READ_TRIES = 8             # a reader that loses this many races to the writer skips the frame


def _attach(name: str) -> SharedMemory:
    """Map an existing segment without letting this process's resource tracker unlink it at exit
    (Python < 3.13 registers every attached segment, so a console process ending would remove the
    control process's frames)."""
    if sys.version_info >= (3, 13):
        return SharedMemory(name, track=False)  # type: ignore[call-arg,unused-ignore]
    shm = SharedMemory(name)
    with contextlib.suppress(Exception):
        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    return shm


class _Segment:
    """One camera's data segment: its header words and its pixels as numpy views."""

    def __init__(self, shm: SharedMemory):
        self.shm = shm
        self.head: np.ndarray = np.ndarray((4,), np.int64, shm.buf, 0)
        h, w, c = (int(v) for v in self.head[1:4])
        if h <= 0 or w <= 0 or c <= 0 or HEADER_BYTES + h * w * c > shm.size:
            raise ValueError(f"shared frame segment {shm.name}: bad shape {h}x{w}x{c}")
        self.pixels: np.ndarray = np.ndarray((h, w, c), np.uint8, shm.buf, HEADER_BYTES)

    def release(self) -> None:
        del self.head, self.pixels
        with contextlib.suppress(BufferError):
            self.shm.close()


class FrameShelf:
    """The control process's side: `put` the newest images; `watched` says whether the console asked
    for frames lately (so nobody copies frames for a console that shows none)."""

    def __init__(self, cameras: Sequence[str] = CAMERAS):
        self.cameras = tuple(cameras)
        self.name = f"spabench_{os.getpid()}_{secrets.token_hex(4)}"
        self._dir_shm = SharedMemory(self.name, create=True, size=8 * (1 + len(self.cameras)))
        self._dir: np.ndarray = np.ndarray((1 + len(self.cameras),), np.int64, self._dir_shm.buf)
        self._dir[:] = 0
        self._segments: dict[str, _Segment] = {}
        self.puts = 0

    def watched(self, within_s: float) -> bool:
        return time.monotonic_ns() - int(self._dir[0]) <= within_s * 1e9

    def _segment(self, cam: str, shape: tuple[int, int, int]) -> _Segment:
        seg = self._segments.get(cam)
        if seg is not None and seg.pixels.shape == shape:
            return seg
        i = self.cameras.index(cam)
        gen = int(self._dir[1 + i]) + 1
        shm = SharedMemory(f"{self.name}_{i}_{gen}", create=True, size=HEADER_BYTES + int(np.prod(shape)))
        head: np.ndarray = np.ndarray((4,), np.int64, shm.buf, 0)
        head[:] = (0, *shape)
        del head
        new = _Segment(shm)
        if seg is not None:
            seg.release()
            with contextlib.suppress(FileNotFoundError):
                seg.shm.unlink()
        self._segments[cam] = new
        self._dir[1 + i] = gen       # published last: a reader finds the shape already written
        return new

    def put(self, images: Mapping[str, object]) -> None:
        """Copy each camera's image (HxWx3 uint8) into its segment under the seqlock."""
        for cam, img in list(images.items()):
            if cam not in self.cameras or img is None:
                continue
            arr = np.asarray(img)
            if arr.dtype != np.uint8 or arr.ndim != 3:
                continue
            seg = self._segment(cam, (int(arr.shape[0]), int(arr.shape[1]), int(arr.shape[2])))
            seg.head[0] += 1          # odd: a write is under way
            np.copyto(seg.pixels, arr)
            seg.head[0] += 1          # even: the frame is whole
        self.puts += 1

    def close(self) -> None:
        for seg in self._segments.values():
            seg.release()
            with contextlib.suppress(FileNotFoundError):
                seg.shm.unlink()
        self._segments.clear()
        del self._dir
        with contextlib.suppress(BufferError):
            self._dir_shm.close()
        with contextlib.suppress(FileNotFoundError):
            self._dir_shm.unlink()


class ShelfReader:
    """The console process's side: the newest whole frame of each camera, and `want` to tell the
    control process that frames are being watched."""

    def __init__(self, name: str, cameras: Sequence[str] = CAMERAS):
        self.name, self.cameras = name, tuple(cameras)
        self._dir_shm = _attach(name)
        self._dir: np.ndarray = np.ndarray((1 + len(self.cameras),), np.int64, self._dir_shm.buf)
        self._segments: dict[str, tuple[int, _Segment]] = {}
        self.torn = 0   # reads dropped because the writer was copying meanwhile (each retried)

    def want(self) -> None:
        self._dir[0] = time.monotonic_ns()

    def _segment(self, i: int, cam: str) -> _Segment | None:
        gen = int(self._dir[1 + i])
        held = self._segments.get(cam)
        if held is not None and held[0] == gen:
            return held[1]
        if gen == 0:
            return None
        try:
            seg = _Segment(_attach(f"{self.name}_{i}_{gen}"))
        except (FileNotFoundError, ValueError):   # replaced again meanwhile: next time
            return None
        if held is not None:
            held[1].release()
        self._segments[cam] = (gen, seg)
        return seg

    def version(self) -> tuple[int, ...]:
        """Changes whenever any camera got a new frame (or segment)."""
        out: list[int] = []
        for i, cam in enumerate(self.cameras):
            seg = self._segment(i, cam)
            out += [int(self._dir[1 + i]), int(seg.head[0]) if seg is not None else 0]
        return tuple(out)

    def latest(self) -> dict[str, np.ndarray]:
        """A private copy of each camera's newest whole frame (cameras with none are left out)."""
        images: dict[str, np.ndarray] = {}
        for i, cam in enumerate(self.cameras):
            seg = self._segment(i, cam)
            if seg is None:
                continue
            for _ in range(READ_TRIES):
                before = int(seg.head[0])
                if before == 0:       # no frame written yet
                    break
                if before % 2 == 0:
                    copy = seg.pixels.copy()
                    if int(seg.head[0]) == before:
                        images[cam] = copy
                        break
                self.torn += 1
                time.sleep(0.001)
        return images

    def close(self) -> None:
        for _, seg in self._segments.values():
            seg.release()
        self._segments.clear()
        del self._dir
        with contextlib.suppress(BufferError):
            self._dir_shm.close()
