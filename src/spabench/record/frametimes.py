"""Per-camera frame accounting from capture times: repeated (stale) frames, skipped frames, gaps.

A control tick pairs itself with the newest frame its camera had. Two ticks paired with the same
capture time saw the same (stale) frame: a repeat. Frames the camera produced that no tick ever
got are skipped: the span from the first to the latest distinct frame holds round(span / period) + 1
camera frames, and every one not seen was skipped. (Counting over the whole span rather than gap by
gap keeps capture-time jitter from adding up: a frame stamped late followed by one on time is not a
skip. A camera running slower than its nominal rate shows as skips, about 1 per 1000 frames for
0.1 %.) Gaps between consecutive distinct frames give the longest gap and the gap events. Written
once here; the recorder counts live, resume recounts from the stored capture times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GAP_EVENT_PERIODS = 2.0  # a camera gap longer than this many frame periods is a 'camera_gap' event


@dataclass
class FrameCounter:
    """Running counts for one camera; `add(t)` per tick with the paired frame's capture time."""

    period_s: float
    frames: int = 0            # distinct frames paired with a tick
    repeated: int = 0          # ticks that got the same frame as the tick before
    longest_gap_s: float = 0.0
    gaps: int = 0              # gaps longer than GAP_EVENT_PERIODS frame periods (the camera_gap events)
    _first: float | None = None
    _last: float | None = None

    @property
    def skipped(self) -> int:
        """Camera frames that never reached a tick."""
        if self._first is None or self._last is None:
            return 0
        return max(0, int(round((self._last - self._first) / self.period_s)) + 1 - self.frames)

    def add(self, t: float) -> float | None:
        """Count one tick's frame; returns the gap to the previous distinct frame (None for a repeat
        or the first frame)."""
        if t is None or not math.isfinite(t):
            return None
        if self._last is None:
            self._first = self._last = t
            self.frames = 1
            return None
        if abs(t - self._last) < 1e-9:
            self.repeated += 1
            return None
        gap = t - self._last
        self._last = t
        self.frames += 1
        self.longest_gap_s = max(self.longest_gap_s, gap)
        self.gaps += self.is_event(gap)
        return gap

    def is_event(self, gap: float | None) -> bool:
        return gap is not None and gap > GAP_EVENT_PERIODS * self.period_s

    def as_dict(self) -> dict:
        return {"frames": self.frames, "repeated": self.repeated, "skipped": self.skipped, "gaps": self.gaps,
                "longest_gap_s": round(self.longest_gap_s, 4), "fps": round(1.0 / self.period_s, 3)}


def frame_stats(capture_t: np.ndarray, fps: float) -> dict:
    """The same counts from a stored `camera/<name>/capture_t` column."""
    counter = FrameCounter(1.0 / float(fps))
    for t in np.asarray(capture_t, dtype=float):
        counter.add(float(t))
    return counter.as_dict()
