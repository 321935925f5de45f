"""episode.h5: per-tick arrays and events, appended in chunks so a kill -9 leaves readable data.

The file is opened in HDF5 SWMR mode (single writer, multiple readers): after every flush the file
on disk is consistent, so a crash loses at most the last second. SWMR forbids creating datasets
after it starts, so every dataset is created up front, and events are appended as JSON-lines bytes
to `events_log` (uint8); on a clean close the file is reopened once to add the `events` string
dataset and the end-of-episode attributes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from spabench.suite.vocabulary import JOINTS

log = logging.getLogger(__name__)
SCHEMA_VERSION = 3  # 2: timing/slot, camera/<name>/capture_t, MP4 pts = tick times; 3: health/*
RESERVE_BYTES = 2 * 1024 * 1024
N_JOINTS = len(JOINTS)

# dataset name -> (per-step shape, dtype, fill value for "absent")
STEP_DATASETS: dict[str, tuple[tuple[int, ...], str]] = {
    "timestamp": ((), "f8"),
    "observation/state": ((N_JOINTS,), "f8"),
    "action/raw": ((N_JOINTS,), "f8"),
    "action/executed": ((N_JOINTS,), "f8"),
    "action/chunk_id": ((), "i8"),
    "policy/request_latency_s": ((), "f8"),
    "policy/server_ms": ((), "f8"),
    "timing/period_s": ((), "f8"),
    "timing/work_s": ((), "f8"),
    "timing/slot": ((), "i8"),
}
# per camera, per tick: the frame's position in cam_<name>.mp4 (-1: none / dropped by the encoder)
# and its capture time (seconds since the timer started; NaN: no frame)
CAMERA_DATASETS: dict[str, str] = {"frame_index": "i8", "capture_t": "f8"}
# motor telemetry (spabench.bench.health), one row per sample at its own rate: t = seconds since the
# timer started (the loop's time of the read), then per motor in JOINTS order
HEALTH_DATASETS: dict[str, tuple[tuple[int, ...], str]] = {
    "health/t": ((), "f8"),
    "health/temperature_c": ((N_JOINTS,), "f4"),
    "health/current_ma": ((N_JOINTS,), "f4"),
    "health/load": ((N_JOINTS,), "f4"),
    "health/voltage_v": ((N_JOINTS,), "f4"),
    "health/status": ((N_JOINTS,), "u1"),
}
HEALTH_FIELDS = ("t", "temperature_c", "current_ma", "load", "voltage_v", "status")
CHUNK_ROWS = 256


def is_tick_dataset(name: str) -> bool:
    """One row per control tick: the step arrays and every camera's columns (not the health
    samples, not the event log)."""
    return name in STEP_DATASETS or name.startswith("camera/")


def whole_ticks(lengths: dict[str, int]) -> int:
    """The ticks every per-tick dataset holds. Equal in a closed file; a kill -9 during a flush can
    leave the extents apart (seen: timestamp 33 rows, observation/state 31)."""
    return min((n for name, n in lengths.items() if is_tick_dataset(name)), default=0)


def _attr_value(value: Any) -> Any:
    """HDF5 attributes take strings and numbers; everything else is stored as JSON text."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float, bool, np.integer, np.floating)):
        return value
    return json.dumps(value, default=str, sort_keys=True)


class EpisodeArrays:
    """Writer of one episode.h5. `append_step` is cheap (a list append); a background thread writes
    and flushes every `flush_s` seconds. `close()` makes everything durable before it returns."""

    def __init__(self, path: Path, cameras: tuple[str, ...], attrs: dict[str, Any], flush_s: float = 1.0):
        self.path = Path(path)
        self.cameras = tuple(cameras)
        self.flush_s = float(flush_s)
        self._rows: list[tuple] = []
        self._health: list[tuple] = []
        self.n_health = 0
        self._events: list[dict] = []
        self._all_events: list[dict] = []
        self._lock = threading.Lock()
        # A reserve file, given back when a write fails, so that HDF5 can still flush and close
        # (it crashes closing a file on a full disk) and the rows written so far stay readable.
        self._reserve = self.path.with_name(".reserve")
        with open(self._reserve, "wb") as fh:
            fh.truncate(0)
            fh.write(b"\0" * RESERVE_BYTES)
        self._file = h5py.File(self.path, "w", libver="latest")
        f = self._file
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["joints"] = json.dumps(list(JOINTS))
        f.attrs["cameras"] = json.dumps(list(self.cameras))
        f.attrs["complete"] = False
        for key, value in attrs.items():
            f.attrs[key] = _attr_value(value)
        self._ds: dict[str, h5py.Dataset] = {}
        for name, (shape, dtype) in STEP_DATASETS.items():
            self._ds[name] = f.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape),
                                              chunks=(CHUNK_ROWS, *shape), dtype=dtype)
        for name, (shape, dtype) in HEALTH_DATASETS.items():
            self._ds[name] = f.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape),
                                              chunks=(64, *shape), dtype=dtype)
        for cam in self.cameras:
            for column, dtype in CAMERA_DATASETS.items():
                name = f"camera/{cam}/{column}"
                self._ds[name] = f.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(CHUNK_ROWS,),
                                                  dtype=dtype)
        self._events_log = f.create_dataset("events_log", shape=(0,), maxshape=(None,), chunks=(4096,),
                                            dtype="u1")
        f.swmr_mode = True
        f.flush()
        self.n_steps = 0
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._flusher, name="spabench-h5-flush", daemon=True)
        self._thread.start()

    # ---- called from the control loop -----------------------------------------------------
    def append_step(self, t: float, state, raw, executed, chunk_id: int, latency_s: float, server_ms: float,
                    period_s: float, work_s: float, frame_index: dict[str, int], slot: int = -1,
                    capture_t: dict[str, float] | None = None) -> None:
        capture_t = capture_t or {}
        row = (t, state, raw, executed, chunk_id, latency_s, server_ms, period_s, work_s,
               tuple(frame_index.get(cam, -1) for cam in self.cameras), slot,
               tuple(capture_t.get(cam, float("nan")) for cam in self.cameras))
        with self._lock:
            self._rows.append(row)

    def append_health(self, sample) -> None:
        """One telemetry sample (spabench.bench.health.HealthSample; t already on the episode's clock)."""
        row = tuple(getattr(sample, name) for name in HEALTH_FIELDS)
        with self._lock:
            self._health.append(row)

    def append_event(self, event: dict) -> None:
        with self._lock:
            self._events.append(event)
            self._all_events.append(event)

    @property
    def error(self) -> BaseException | None:
        """The background writer's failure (e.g. disk full), if any: the episode cannot be saved."""
        return self._error

    # ---- background -----------------------------------------------------------------------
    def _flusher(self) -> None:
        while not self._stop.wait(self.flush_s):
            try:
                self._write_pending()
            except BaseException as exc:  # keep the loop alive; close() re-raises
                self._error = exc
                return

    def _write_pending(self) -> None:
        with self._lock:
            rows, self._rows = self._rows, []
            health, self._health = self._health, []
            events, self._events = self._events, []
        if rows:
            n0, n = self.n_steps, len(rows)
            columns = list(zip(*rows, strict=True))
            values = {
                "timestamp": np.asarray(columns[0], dtype="f8"),
                "observation/state": np.asarray(columns[1], dtype="f8").reshape(n, N_JOINTS),
                "action/raw": np.asarray(columns[2], dtype="f8").reshape(n, N_JOINTS),
                "action/executed": np.asarray(columns[3], dtype="f8").reshape(n, N_JOINTS),
                "action/chunk_id": np.asarray(columns[4], dtype="i8"),
                "policy/request_latency_s": np.asarray(columns[5], dtype="f8"),
                "policy/server_ms": np.asarray(columns[6], dtype="f8"),
                "timing/period_s": np.asarray(columns[7], dtype="f8"),
                "timing/work_s": np.asarray(columns[8], dtype="f8"),
                "timing/slot": np.asarray(columns[10], dtype="i8"),
            }
            frames = np.asarray(columns[9], dtype="i8").reshape(n, len(self.cameras))
            captured = np.asarray(columns[11], dtype="f8").reshape(n, len(self.cameras))
            for i, cam in enumerate(self.cameras):
                values[f"camera/{cam}/frame_index"] = frames[:, i]
                values[f"camera/{cam}/capture_t"] = captured[:, i]
            for name, data in values.items():
                ds = self._ds[name]
                ds.resize(n0 + n, axis=0)
                ds[n0:n0 + n] = data
            self.n_steps = n0 + n
        if health:
            n0, n = self.n_health, len(health)
            for name, column in zip(HEALTH_FIELDS, zip(*health, strict=True), strict=True):
                ds = self._ds[f"health/{name}"]
                ds.resize(n0 + n, axis=0)
                ds[n0:n0 + n] = np.asarray(column, dtype=ds.dtype).reshape(n, *ds.shape[1:])
            self.n_health = n0 + n
        if events:
            blob = "".join(json.dumps(e, default=str, sort_keys=True) + "\n" for e in events).encode()
            m = self._events_log.shape[0]
            self._events_log.resize((m + len(blob),))
            self._events_log[m:] = np.frombuffer(blob, dtype="u1")
        if rows or events or health:
            self._file.flush()

    # ---- end of episode -----------------------------------------------------------------------
    def close(self, final_attrs: dict[str, Any]) -> None:
        """Write what is left, leave SWMR, add `events` and the final attributes. Durable on return.

        A write failure (disk full) raises OSError after the reserve file is given back, so HDF5 can
        flush what it holds and close cleanly: the rows written so far stay readable."""
        self._stop.set()
        self._thread.join()
        try:
            if self._error is not None:
                raise self._error
            self._write_pending()
        except Exception as exc:
            problem = (str(exc).splitlines() or [""])[0][:200]
            self._close_after_failure()
            number = getattr(exc, "errno", None)  # no number: none is made up (it was ENOSPC for anything)
            raise (OSError(number, f"{self.path}: {problem}") if number else OSError(f"{self.path}: {problem}")) from None
        self._file.close()
        self._give_back_reserve()
        with h5py.File(self.path, "a", libver="latest") as f:
            text = [json.dumps(e, default=str, sort_keys=True) for e in self._all_events]
            f.create_dataset("events", data=np.array(text, dtype=h5py.string_dtype()),
                             dtype=h5py.string_dtype())
            for key, value in final_attrs.items():
                f.attrs[key] = _attr_value(value)
            f.attrs["n_steps"] = self.n_steps
            f.attrs["complete"] = True
            f.flush()

    def abandon(self) -> None:
        """Close without the final step (used when the harness itself is failing)."""
        self._stop.set()
        self._thread.join()
        try:
            self._write_pending()
        except Exception:
            self._close_after_failure()
            return
        self._file.close()
        self._give_back_reserve()

    def _give_back_reserve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._reserve)

    def _close_after_failure(self) -> None:
        """HDF5 crashes closing a file whose flush failed on a full disk: free the reserve first."""
        self._give_back_reserve()
        try:
            self._file.flush()
        except Exception as exc:
            log.warning("%s: could not flush after a write failure: %s", self.path, exc)
        try:
            self._file.close()
        except Exception as exc:
            log.warning("%s: could not close after a write failure: %s", self.path, exc)
