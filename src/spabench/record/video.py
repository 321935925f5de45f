"""MP4 encoding off the control loop: one worker process per camera, frames passed through shared memory.

Why processes and shared memory: a 640x480 RGB frame is 0.9 MB; five cameras at 30 fps are 140 MB/s.
Pickling that through pipes, or encoding in threads that fight the control loop for the GIL, costs
the loop its timing. Here the control loop does one memcpy into a free ring slot per frame and puts a
small message on a queue; when no slot is free the frame is dropped and counted, never waited for.

Each worker owns one camera's stream at a time; `open` / `frame` / `close` commands are processed in
order, so the next episode's stream can be opened while the previous one is still being flushed.
A worker whose parent dies (kill -9) closes its container cleanly and exits, so even an interrupted
episode keeps a playable partial video. Workers ignore SIGINT (a Ctrl-C reaches the whole process
group): the parent decides when a stream ends, and the worker always finishes the frames it holds.

Presentation times are real: each frame carries the time of the control tick it was paired with
(seconds since the rollout timer started) in a 1/60000 s time base, so a stalled loop shows as a
held frame and the file lasts as long as the rollout did. (60000 is the finest base MPEG-4 Part 2
accepts; LeRobot decodes by timestamp with a 1e-4 s tolerance.)
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from multiprocessing import shared_memory
from typing import Any

import numpy as np

DEFAULT_CODEC = "libx264"
DEFAULT_PRESET = "ultrafast"
TIME_BASE = Fraction(1, 60000)  # seconds per pts unit of every recorded stream
# The MP4 edit list that carries a first frame presented after 0 is written in the movie time scale
# (FFmpeg's default 1000/s would shift every frame by up to 1 ms); in the stream's own it is exact.
MUXER_OPTIONS = {"movie_timescale": str(TIME_BASE.denominator)}


@dataclass(frozen=True)
class EncoderSettings:
    """How a camera stream is encoded (yuv420p MP4)."""

    codec: str = DEFAULT_CODEC      # libx264 | mpeg4
    preset: str = DEFAULT_PRESET    # libx264 preset; ignored by mpeg4
    crf: int = 23                   # libx264 quality
    queue_frames: int = 30          # ring slots per camera (about 1 s at 30 fps)
    threads: int = 1                # codec threads per camera


@dataclass
class StreamDone:
    """A finished stream as reported by its worker."""

    token: str
    camera: str
    path: str
    frames: int
    error: str | None = None


# --------------------------------------------------------------------------- worker process


def _encoder_main(camera: str, shm_name: str, shape: tuple[int, int, int], slots: int,
                  commands: mp.Queue, free: mp.Queue, done: mp.Queue, parent_pid: int) -> None:
    """Worker loop (runs in a spawned process). Imports PyAV only here.

    Over 80 lines on purpose: the worker's whole life (open, frame, close, quit, an orphaning kill
    of the parent) is one command loop whose `mux`/`finish` closures share the open container, the
    held packet and the error so far; split into functions they would pass that state around."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    import av  # noqa: PLC0415  (heavy import kept out of the parent)

    shm = shared_memory.SharedMemory(name=shm_name)
    ring: np.ndarray = np.ndarray((slots, *shape), dtype=np.uint8, buffer=shm.buf)
    # PyAV's output container and video stream while a file is open (typed Any: PyAV's stubs type the
    # container opened for writing and the added stream only as unions)
    container: Any = None
    stream: Any = None
    path = token = None
    frames = 0
    error: str | None = None
    held = None  # the newest packet: muxed once the next one exists, or at close with its duration

    def mux(packets) -> None:
        nonlocal held
        for packet in packets:
            if held is not None:
                container.mux(held)
            held = packet

    def finish(end_pts: int | None = None) -> None:
        nonlocal container, stream, frames, error, path, token, held
        if container is None and token is None:
            return
        try:
            if container is not None and stream is not None:
                mux(stream.encode())
                if held is not None:
                    if end_pts is not None and held.pts is not None and end_pts > held.pts:
                        held.duration = end_pts - held.pts  # the last frame lasts until the rollout ended
                    container.mux(held)
        except Exception as exc:  # report, never crash the worker
            error = error or f"flush failed: {exc}"
        finally:
            if container is not None:
                try:
                    container.close()
                except Exception as exc:
                    error = error or f"close failed: {exc}"
        done.put(("done", token, camera, path, frames, error))
        container = stream = path = token = held = None
        frames, error = 0, None

    while True:
        try:
            cmd = commands.get(timeout=0.5)
        except queue.Empty:
            if os.getppid() != parent_pid:  # orphaned by a kill -9: keep what was encoded
                finish()
                break
            continue
        kind = cmd[0]
        if kind == "frame":
            _, slot, pts = cmd
            try:
                if container is None:
                    raise RuntimeError("frame before open")
                frame = av.VideoFrame.from_ndarray(ring[slot], format="rgb24")
            except Exception as exc:
                free.put(slot)
                error = error or f"frame failed: {exc}"
                continue
            free.put(slot)  # the frame holds its own copy now
            try:
                frame.pts = pts
                frame.time_base = TIME_BASE
                mux(stream.encode(frame))
                frames += 1
            except Exception as exc:
                error = error or f"encode failed: {exc}"
        elif kind == "open":
            finish()
            _, token, path, fps, settings = cmd
            try:
                container = av.open(path, mode="w", options=MUXER_OPTIONS)
                stream = container.add_stream(settings.codec, rate=int(round(fps)))
                stream.codec_context.time_base = TIME_BASE
                stream.width, stream.height = shape[1], shape[0]
                stream.pix_fmt = "yuv420p"
                options = {"threads": str(settings.threads)}
                if settings.codec == "libx264":
                    options.update(preset=settings.preset, crf=str(settings.crf))
                else:
                    stream.bit_rate = 4_000_000
                stream.options = options
            except Exception as exc:
                error = f"open failed: {exc}"
                container = stream = None
        elif kind == "close":
            finish(cmd[1] if len(cmd) > 1 else None)
        elif kind == "quit":
            finish()
            break
    del ring
    shm.close()


# --------------------------------------------------------------------------- parent side


class _CameraWorker:
    """Parent-side handle of one worker: its ring, its queues, its slot bookkeeping."""

    def __init__(self, ctx, camera: str, shape: tuple[int, int, int], settings: EncoderSettings,
                 done: mp.Queue):
        self.camera, self.shape, self.settings = camera, shape, settings
        slots = max(2, int(settings.queue_frames))
        self.slots = slots
        self.shm = shared_memory.SharedMemory(create=True, size=int(np.prod(shape)) * slots)
        self.ring: np.ndarray = np.ndarray((slots, *shape), dtype=np.uint8, buffer=self.shm.buf)
        self.commands = ctx.Queue()
        self.free = ctx.Queue()
        self._free_local: list[int] = list(range(slots))
        self.process = ctx.Process(
            target=_encoder_main,
            args=(camera, self.shm.name, shape, slots, self.commands, self.free, done, os.getpid()),
            name=f"spabench-encoder-{camera}",
            daemon=True,
        )
        with _sigint_ignored():  # the child starts with SIGINT ignored, even while it boots
            self.process.start()
        self.open_token: str | None = None
        self.index = 0     # next frame's position in the open stream
        self.last_pts = -1

    def take_slot(self) -> int | None:
        if self._free_local:
            return self._free_local.pop()
        try:  # drain everything the worker has returned; never block
            while True:
                self._free_local.append(self.free.get_nowait())
        except queue.Empty:
            pass
        return self._free_local.pop() if self._free_local else None

    def in_use(self) -> int:
        """Ring slots holding frames the worker has not taken yet."""
        try:
            while True:
                self._free_local.append(self.free.get_nowait())
        except queue.Empty:
            pass
        return self.slots - len(self._free_local)

    def stop(self, timeout: float) -> None:
        with contextlib.suppress(Exception):
            self.commands.put(("quit",))
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(1.0)

    def release(self) -> None:
        del self.ring  # drop the view before closing the buffer
        try:
            self.shm.close()
            self.shm.unlink()
        except FileNotFoundError:
            pass
        for q in (self.commands, self.free):
            q.close()
            q.cancel_join_thread()


@contextlib.contextmanager
def _sigint_ignored():
    """SIG_IGN survives exec, and Python keeps an ignored SIGINT ignored: a worker spawned inside
    this block can never print a KeyboardInterrupt traceback. Main thread only (else a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class _PendingEpisode:
    token: str
    cameras: set[str]
    results: dict[str, StreamDone] = field(default_factory=dict)
    workers: dict[str, _CameraWorker] = field(default_factory=dict)
    on_done: Callable[[dict[str, StreamDone]], None] | None = None


class EncoderPool:
    """Camera name -> worker process. The control-loop side of video encoding.

    `open_episode(token, paths, fps)` names the files of an episode; `submit(camera, image)` returns
    the frame's index in that camera's video or -1 when the frame was dropped (ring full);
    `close_episode(token, on_done)` asks every worker to finish and calls `on_done(results)` from a
    background thread once all of the episode's videos are closed.
    """

    def __init__(self, settings: EncoderSettings | None = None):
        self.settings = settings or EncoderSettings()
        self._ctx = mp.get_context("spawn")
        self._done = self._ctx.Queue()
        self._workers: dict[str, _CameraWorker] = {}
        self._retired: list[_CameraWorker] = []
        self._paths: dict[str, str] = {}
        self._fps = 30.0
        self._token: str | None = None
        self._pending: dict[str, _PendingEpisode] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.dropped: dict[str, int] = {}
        self._stop = threading.Event()
        self._collector = threading.Thread(target=self._collect, name="spabench-encoder-done", daemon=True)
        self._collector.start()

    # ---- control-loop side -------------------------------------------------------------
    def open_episode(self, token: str, paths: dict[str, str], fps: float) -> None:
        self._token, self._paths, self._fps = token, dict(paths), float(fps)
        self.dropped = {camera: 0 for camera in paths}
        with self._lock:
            self._pending[token] = _PendingEpisode(token, set())

    def prepare(self, camera: str, shape: tuple[int, int, int]) -> None:
        """Start (or reuse) the camera's worker and open its stream before the first frame arrives."""
        if self._token is None or camera not in self._paths:
            return
        self._open(self._worker_for(camera, shape))

    def start_workers(self, shapes: dict[str, tuple[int, int, int]]) -> None:
        """Spawn the cameras' workers now, before any episode is open. Each spawn forks this process
        and boots an interpreter that imports PyAV: on a loaded 2-core machine that starves the
        session's threads (the console's among them) for about a second, which must not fall in the
        first trial's homing or pre-roll, where the console's dead-man is armed."""
        for camera, shape in shapes.items():
            self._worker_for(camera, shape)

    def _worker_for(self, camera: str, shape: tuple[int, int, int]) -> _CameraWorker:
        """The camera's worker for frames of this shape: the running one, or a new one."""
        worker = self._workers.get(camera)
        if worker is None or worker.shape != tuple(shape):
            worker = self._replace_worker(camera, shape)
        return worker

    @property
    def worker_pids(self) -> dict[str, int | None]:
        """Camera -> the process id of its current worker."""
        return {camera: worker.process.pid for camera, worker in self._workers.items()}

    def _open(self, worker: _CameraWorker) -> None:
        if self._token is not None and worker.open_token != self._token:
            worker.commands.put(("open", self._token, self._paths[worker.camera], self._fps, self.settings))
            worker.open_token, worker.index, worker.last_pts = self._token, 0, -1
            with self._lock:
                pending = self._pending[self._token]
                pending.cameras.add(worker.camera)
                pending.workers[worker.camera] = worker

    def submit(self, camera: str, image: np.ndarray, t_s: float | None = None) -> int:
        """Queue one frame for encoding, presented at `t_s` seconds (default: one nominal period after
        the previous frame); returns its index in the video, -1 if dropped. Never blocks."""
        if self._token is None or camera not in self._paths:
            return -1
        worker = self._workers.get(camera)
        if worker is None or worker.shape != image.shape:
            if worker is not None and worker.open_token == self._token:
                self.dropped[camera] = self.dropped.get(camera, 0) + 1  # size changed mid-episode
                return -1
            worker = self._replace_worker(camera, tuple(image.shape))
        self._open(worker)
        slot = worker.take_slot()
        if slot is None:
            self.dropped[camera] = self.dropped.get(camera, 0) + 1
            return -1
        np.copyto(worker.ring[slot], image)
        if t_s is None:
            step = max(1, int(round(1 / (self._fps * TIME_BASE))))
            pts = 0 if worker.last_pts < 0 else worker.last_pts + step
        else:
            pts = max(int(round(max(0.0, float(t_s)) / TIME_BASE)), worker.last_pts + 1)
        worker.commands.put(("frame", slot, pts))
        worker.last_pts = pts
        index = worker.index
        worker.index += 1
        return index

    def close_episode(self, on_done: Callable[[dict[str, StreamDone]], None] | None = None,
                      end_s: float | None = None) -> str | None:
        """Finish the episode's streams; `end_s` (s since the timer started) is when the last frame
        stops being shown, so each file lasts as long as the rollout did."""
        token, self._token = self._token, None
        if token is None:
            return None
        end_pts = None if end_s is None else int(round(max(0.0, float(end_s)) / TIME_BASE))
        for worker in self._workers.values():
            if worker.open_token == token:
                worker.commands.put(("close", end_pts))
                worker.open_token = None
        with self._lock:
            pending = self._pending[token]
            pending.on_done = on_done
            if pending.cameras <= set(pending.results):  # no frames at all, or already flushed
                self._finish(pending)
        return token

    # ---- background side ---------------------------------------------------------------
    def _replace_worker(self, camera: str, shape: tuple[int, int, int]) -> _CameraWorker:
        old = self._workers.pop(camera, None)
        if old is not None:
            # Its queued work (including an earlier episode's close) finishes before it quits.
            if old.open_token is not None:
                old.commands.put(("close",))
            old.commands.put(("quit",))
            self._retired.append(old)
        worker = _CameraWorker(self._ctx, camera, shape, self.settings, self._done)
        self._workers[camera] = worker
        return worker

    def _finish(self, pending: _PendingEpisode) -> None:
        self._pending.pop(pending.token, None)
        callback = pending.on_done
        if callback is not None:
            threading.Thread(target=callback, args=(dict(pending.results),), daemon=True,
                             name="spabench-episode-finalize").start()
        self._idle.notify_all()

    def _collect(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self._done.get(timeout=0.2)
            except (queue.Empty, OSError, EOFError, ValueError):
                self._reap_dead()
                continue
            _, token, camera, path, frames, error = msg
            with self._lock:
                pending = self._pending.get(token)
                if pending is None:
                    continue
                pending.results[camera] = StreamDone(token, camera, path, frames, error)
                if pending.on_done is not None and pending.cameras <= set(pending.results):
                    self._finish(pending)
                elif pending.on_done is None:
                    pass  # still recording; keep the result

    def _reap_dead(self) -> None:
        """A worker that died (crashed, killed) reports nothing: close its streams with an error."""
        with self._lock:
            for pending in list(self._pending.values()):
                for cam, worker in pending.workers.items():
                    if cam not in pending.results and not worker.process.is_alive():
                        pending.results[cam] = StreamDone(pending.token, cam, self._paths.get(cam, ""), 0,
                                                          f"encoder process died (exit code {worker.process.exitcode})")
                if pending.on_done is not None and pending.cameras <= set(pending.results):
                    self._finish(pending)

    def backlog(self) -> float:
        """The fullest camera ring, 0..1 (1: the next frame of that camera would be dropped)."""
        return max((w.in_use() / w.slots for w in self._workers.values()), default=0.0)

    def busy(self) -> bool:
        with self._lock:
            return any(p.on_done is not None for p in self._pending.values())

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every closed episode has finished encoding (True) or the timeout passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while any(p.on_done is not None for p in self._pending.values()):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                if not self._any_worker_alive():
                    return False
                self._idle.wait(0.2 if remaining is None else min(0.2, remaining))
        return True

    def alive(self) -> bool:
        return self._any_worker_alive() or not (self._workers or self._retired)

    def _any_worker_alive(self) -> bool:
        return any(w.process.is_alive() for w in (*self._workers.values(), *self._retired))

    def shutdown(self, timeout: float = 30.0) -> None:
        """Finish all videos, stop the workers, free the shared memory."""
        if self._token is not None:
            self.close_episode()
        self.wait_idle(timeout)
        for worker in (*self._workers.values(), *self._retired):
            worker.stop(timeout=5.0)
        self._stop.set()
        self._collector.join(2.0)
        for worker in (*self._workers.values(), *self._retired):
            worker.release()
        self._workers.clear()
        self._retired.clear()
        self._done.close()
        self._done.cancel_join_thread()

    def __enter__(self) -> EncoderPool:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
