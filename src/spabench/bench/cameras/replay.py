"""A LeRobot camera that replays a file or renders the numbered test pattern, paced like hardware.

A background thread publishes frames at `fps` on a fixed clock: frame k is due at t0 + k/fps. If the
thread falls behind (CPU starved), it skips to the frame that is due now, so the frame index jumps
exactly like a hardware camera whose driver missed frames. read_latest()/async_read()/read() behave
like LeRobot's OpenCVCamera, including its errors, and two fault hooks emulate a camera going away:
stop() (the read thread dies: read_latest raises RuntimeError) and freeze() (frames stop arriving:
read_latest raises TimeoutError once the last frame is older than max_age_ms). stall(seconds) (or
the config's periodic stall_every_s/stall_s) injects a bounded stall: no new frame for that long,
then the clock skips the missed frames; with stall_blocks, read_latest() also blocks meanwhile.
Like LeRobot's own cameras it exposes `latest_frame` / `latest_timestamp` (perf_counter). The stamp
is the frame's exposure time on the camera's own clock (t0 + index / fps), as a hardware camera with a
sensor clock reports it, not when a starved thread got round to publishing it; `published` keeps
(index, stamp) of every frame for tests to check against.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from lerobot.cameras.camera import Camera
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from . import pattern
from .config_replay import PATTERN, SpabenchReplayCameraConfig

logger = logging.getLogger(__name__)


class _FileFrames:
    """Sequential RGB frames from an .npz (all in memory) or an .mp4 (decoded on the fly)."""

    def __init__(self, path: Path, width: int, height: int, loop: bool):
        self.path, self.width, self.height, self.loop = path, width, height, loop
        self._frames: np.ndarray | None = None
        self._cap: Any = None   # cv2.VideoCapture while a video file is open (cv2 is imported lazily)
        self._pos = 0
        if path.suffix == ".npz":
            with np.load(path) as data:
                key = "frames" if "frames" in data.files else data.files[0]
                frames = data[key]
            if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) == 0:
                raise ValueError(f"{path}: array '{key}' has shape {frames.shape} dtype {frames.dtype}; "
                                 "expected (N, H, W, 3) uint8 RGB with N >= 1")
            self._frames = np.stack([self._fit(f) for f in frames])
        else:
            self._open_video()

    def _open_video(self) -> None:
        import cv2

        if self._cap is not None:
            self._cap.release()
        self._cap = cv2.VideoCapture(str(self.path))
        if not self._cap.isOpened():
            raise ConnectionError(f"{self.path}: cannot open the video file")

    def _fit(self, frame: np.ndarray) -> np.ndarray:
        if frame.shape[:2] != (self.height, self.width):
            import cv2

            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)
        return np.ascontiguousarray(frame)

    def next(self, skip: int = 0) -> np.ndarray | None:
        """The next frame (after skipping `skip` frames); None when the file ended and loop is off."""
        if self._frames is not None:
            self._pos += skip
            if self._pos >= len(self._frames) and not self.loop:
                return None
            frame = self._frames[self._pos % len(self._frames)].copy()
            self._pos += 1
            return frame
        import cv2

        for _ in range(skip):
            self._cap.grab()
        ok, bgr = self._cap.read()
        if not ok:
            if not self.loop:
                return None
            self._open_video()
            ok, bgr = self._cap.read()
            if not ok:
                raise RuntimeError(f"{self.path}: no frames could be decoded")
        return self._fit(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class SpabenchReplayCamera(Camera):
    """LeRobot Camera over SpabenchReplayCameraConfig (type "spabench_replay")."""

    def __init__(self, config: SpabenchReplayCameraConfig):
        super().__init__(config)
        self.config = config
        self._connected = False
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._frozen = threading.Event()
        self._lock = threading.Lock()
        self.frame_lock = self._lock  # LeRobot's cameras guard latest_frame/latest_timestamp with this name
        self._new_frame = threading.Event()
        self._latest: np.ndarray | None = None
        self._latest_t: float | None = None   # when the frame was published (read_latest's age check)
        self._capture_t: float | None = None  # when it was exposed, on the camera clock
        self._source: _FileFrames | None = None
        self._base: np.ndarray | None = None
        self.frame_index: int = -1      # camera frame index of the latest frame
        self.frames_published: int = 0  # frames actually published (index jumps = drops)
        self.published: deque[tuple[int, float]] = deque(maxlen=500_000)  # (frame index, capture time)
        self._recent: deque[tuple[np.ndarray, float]] = deque(maxlen=16)  # frames still referenced, stamps
        self.stalls: list[tuple[float, float]] = []    # (start, end) perf_counter of injected stalls
        self._stall_until = 0.0

    def __str__(self) -> str:
        label = f"{self.config.label}:" if self.config.label else ""
        return f"{self.__class__.__name__}({label}{self.config.source})"

    @property
    def is_connected(self) -> bool:
        return self._connected

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        return [{"name": "spabench test pattern", "type": "spabench_replay", "id": PATTERN}]

    # ------------------------------------------------------------------ lifecycle
    def connect(self, warmup: bool = True) -> None:
        if self._connected:
            raise DeviceAlreadyConnectedError(f"{self} is already connected.")
        if self.config.source == PATTERN:
            self._base = pattern.base_image(self.width, self.height, self.config.label)
        else:
            path = Path(self.config.source)
            if not path.is_file():
                raise ConnectionError(f"Failed to open {self}: file {path} does not exist.")
            self._source = _FileFrames(path, self.width, self.height, self.config.loop)
        self._stop_event = threading.Event()
        self._frozen.clear()
        self._new_frame.clear()
        self._thread = threading.Thread(target=self._run, name=f"{self}_read_loop", daemon=True)
        self._connected = True
        self._thread.start()
        if warmup and not self._new_frame.wait(timeout=max(self.config.warmup_s, 5.0 / self.fps)):
            self.disconnect()
            raise ConnectionError(f"{self} failed to capture frames during warmup.")
        logger.info("%s connected.", self)

    def disconnect(self) -> None:
        if not self._connected and self._thread is None:
            raise DeviceNotConnectedError(f"{self} not connected.")
        self._stop_thread()
        if self._source is not None:
            self._source.close()
            self._source = None
        with self._lock:
            self._latest = None
            self._latest_t = self._capture_t = None
        self._connected = False

    def _stop_thread(self) -> None:
        self._stop_event.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self._thread = None

    # ------------------------------------------------------------------ fault hooks
    def stop(self) -> None:
        """Emulate a lost camera (unplugged, driver died): the read thread ends, reads raise."""
        self._stop_thread()

    def freeze(self) -> None:
        """Emulate a hung camera: the thread lives but no new frames arrive."""
        self._frozen.set()

    def unfreeze(self) -> None:
        self._frozen.clear()

    def stall(self, seconds: float) -> None:
        """Inject one stall now: no new frame for `seconds` (then the missed frames are skipped)."""
        now = time.perf_counter()
        with self._lock:
            self._stall_until = now + float(seconds)
            self.stalls.append((now, self._stall_until))

    def _stalled(self, now: float, t0: float) -> bool:
        every, length = float(self.config.stall_every_s), float(self.config.stall_s)
        if every > 0 and length > 0:
            n = int((now - t0) / every)
            start = t0 + n * every
            if n >= 1 and now < start + length:
                with self._lock:
                    if not self.stalls or self.stalls[-1][0] != start:
                        self.stalls.append((start, start + length))
                    self._stall_until = max(self._stall_until, start + length)
        return now < self._stall_until

    @property
    def latest_frame(self) -> np.ndarray | None:
        return self._latest

    @property
    def latest_timestamp(self) -> float | None:
        return self._capture_t

    def capture_time_of(self, frame: np.ndarray) -> float | None:
        """The stamp of a frame this camera returned recently (exact, whatever was published since)."""
        with self._lock:
            for recent, stamp in reversed(self._recent):
                if recent is frame:
                    return stamp
        return None

    # ------------------------------------------------------------------ frames
    def _frame(self, index: int, skip: int) -> np.ndarray | None:
        if self._source is None:
            return pattern.render(self.width, self.height, index, base=self._base)
        frame = self._source.next(skip)
        if frame is not None and self.config.stamp_index:
            pattern.stamp_index(frame, index)
        return frame

    def _run(self) -> None:
        period = 1.0 / float(self.fps)
        t0 = time.perf_counter()
        index = 0  # the camera clock: frame k belongs to the slot [t0 + k/fps, t0 + (k+1)/fps)
        stop = self._stop_event
        while not stop.is_set():
            if self._frozen.is_set() or self._stalled(time.perf_counter(), t0):
                stop.wait(min(period, 0.005))  # no frames; afterwards the clock below skips the missed slots
                continue
            due = int((time.perf_counter() - t0) / period)
            skip = max(0, due - index)  # behind schedule (starved or frozen): frames are lost
            index += skip
            try:
                frame = self._frame(index, skip)
            except Exception:  # a decoding failure ends the stream like a lost camera
                logger.exception("%s: frame source failed", self)
                return
            if frame is None:  # file ended and loop is off
                logger.warning("%s: source ended", self)
                return
            with self._lock:
                self._latest = frame
                self._latest_t = time.perf_counter()
                self._capture_t = stamp = t0 + index * period
                self.frame_index = index
                self.frames_published += 1
                self.published.append((index, stamp))
                self._recent.append((frame, stamp))
            self._new_frame.set()
            index += 1
            delay = t0 + index * period - time.perf_counter()
            if delay > 0:
                stop.wait(delay)

    def _check_thread(self) -> None:
        if not self._connected:
            raise DeviceNotConnectedError(f"{self.__class__.__name__} is not connected. Run `.connect()` first.")
        if self._thread is None or not self._thread.is_alive():
            raise RuntimeError(f"{self} read thread is not running.")

    def read(self) -> np.ndarray:
        self._check_thread()
        self._new_frame.clear()
        return self.async_read(timeout_ms=max(1000.0, 3000.0 / self.fps))

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        self._check_thread()
        if not self._new_frame.wait(timeout=timeout_ms / 1000.0):
            raise TimeoutError(f"Timed out waiting for frame from camera {self} after {timeout_ms} ms. "
                               f"Read thread alive: {self._thread is not None and self._thread.is_alive()}.")
        with self._lock:
            frame = self._latest
            self._new_frame.clear()
        if frame is None:
            raise RuntimeError(f"Internal error: Event set but no frame available for {self}.")
        return frame

    def read_latest(self, max_age_ms: int = 500) -> np.ndarray:
        self._check_thread()
        if self.config.stall_blocks:
            while (wait := self._stall_until - time.perf_counter()) > 0:
                time.sleep(min(wait, 0.01))
            if self._stall_until:  # the stall is over: wait for its first fresh frame
                with self._lock:
                    fresh = self._latest_t is not None and self._latest_t >= self._stall_until
                if not fresh:
                    self._new_frame.clear()
                    self._new_frame.wait(timeout=2.0 / self.fps)
        with self._lock:
            frame, stamp = self._latest, self._latest_t
        if frame is None or stamp is None:
            raise RuntimeError(f"{self} has not captured any frames yet.")
        age_ms = (time.perf_counter() - stamp) * 1e3
        if age_ms > max_age_ms:
            raise TimeoutError(f"{self} latest frame is too old: {age_ms:.1f} ms (max allowed: {max_age_ms} ms).")
        return frame

    def latest_index(self) -> int:
        """Camera frame index of the frame read_latest() would return (-1 before the first)."""
        with self._lock:
            return self.frame_index
