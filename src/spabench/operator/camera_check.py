"""The session-start camera check, for every person operator (the browser's and the terminal's):
each camera live, not frozen, not slow, judged per window, before the first trial.

A camera that delivers frames is not necessarily working: a hung USB camera (or its driver) keeps
handing out its last buffer, so frames arrive at full rate and never change; a starved one delivers
a fraction of its configured rate. Either would record a whole campaign of useless video. Over each
check window the check counts the samples it took of every camera and how many of them were new
images (content differs from the previous sample), then fails a camera that is

  frozen: every sample in the window the same image as the one before, over a window long enough
          for MIN_FRAMES new frames at the camera's configured fps;
  slow:   new images per second below SLOW_FRACTION of what the check could have seen, which is the
          camera's configured fps, or the check's own comparison rate when that is lower (a loaded
          machine under-samples; that is not the camera's fault).

A verdict stands when the previous window failed too (`steady`). A window stays open until every camera could have shown MIN_FRAMES new frames (`conclusive`); one
that never could is a failure too ("too few frames to judge").

Cameras rendered from a model (the twin: `Bench.rendered_cameras`) are exempt from both rules: a
still scene renders the same image every time, and their rate is the loop's, not a sensor's.

`CameraCheck` drives the windows over a connected bench; the operators only differ in how they show
the rows and ask. The rule is the same for both: nothing overrides a failing camera (a campaign of
useless video costs more than a fixed cable); the operator fixes it and the check measures again,
or ends the session.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from spabench.suite.vocabulary import CAMERAS

if TYPE_CHECKING:
    from spabench.bench.bench import Bench
    from spabench.bench.config import CameraSpec

MIN_FRAMES = 3
SLOW_FRACTION = 0.5
WINDOW_S = 1.0             # a check window's default length (operator.console.camera_check_s for the browser)
SIGNATURE_GRID = (60, 80)   # rows, columns sampled per image: cheap at 30 Hz x 5 cameras of 640x480


def _signature(img: np.ndarray) -> bytes:
    """A strided sample of about SIGNATURE_GRID pixels (every pixel of a small image): a live sensor's
    noise changes it from frame to frame, a repeated buffer does not."""
    stride = max(1, min(img.shape[0] // SIGNATURE_GRID[0], img.shape[1] // SIGNATURE_GRID[1]))
    return np.ascontiguousarray(img[::stride, ::stride]).tobytes()


class CameraWindow:
    """Samples of every camera over one check window; `rows()` judges them."""

    def __init__(self, names: Iterable[str], previous: Mapping[str, bytes] | None = None):
        self.names = list(names)
        self.samples = {n: 0 for n in self.names}
        self.new = {n: 0 for n in self.names}
        self.compared = {n: 0 for n in self.names}     # samples that had a previous image to differ from
        self.shapes: dict[str, list[int]] = {}
        self.loop_samples = 0
        self.last: dict[str, bytes] = dict(previous or {})   # carried over: the window's first frame may be old

    def add(self, images: Mapping[str, Any]) -> None:
        """One sample of every camera (the images one observation returned)."""
        self.loop_samples += 1
        for n in self.names:
            img = images.get(n)
            if img is None:
                continue
            self.samples[n] += 1
            self.shapes[n] = list(img.shape)
            sig = _signature(img)
            if n in self.last:
                self.compared[n] += 1
                self.new[n] += sig != self.last[n]
            self.last[n] = sig

    def conclusive(self, cam_cfg: Mapping[str, CameraSpec], span: float) -> bool:
        """Whether every camera had the chance to show MIN_FRAMES new frames in this window."""
        for n in self.names:
            spec = cam_cfg.get(n)
            configured = spec.fps if spec is not None else None
            rate = self.compared[n] / span if span else 0.0
            if (min(float(configured), rate) if configured else rate) * span < MIN_FRAMES:
                return False
        return True

    def rows(self, cam_cfg: Mapping[str, CameraSpec], span: float, *, rendered: bool = False) -> list[dict]:
        """One row per camera: what was measured, and `problem` ("" when the camera passes)."""
        out = []
        for n in self.names:
            cfg = cam_cfg.get(n)   # the bench config's CameraSpec
            shape = self.shapes.get(n)
            configured = cfg.fps if cfg is not None else None
            live = bool(self.samples[n]) and shape is not None
            new_hz = self.new[n] / span if span else None
            problem = ""
            if not live:
                problem = f"{n}: no frames"
            elif not rendered and span:
                problem = self._judge(n, configured, span)
            out.append({"name": n, "live": live, "ok": live and not problem, "problem": problem,
                        "width": shape[1] if shape else (cfg.width if cfg is not None else None),
                        "height": shape[0] if shape else (cfg.height if cfg is not None else None),
                        "configured_fps": configured,
                        "measured_hz": round(self.samples[n] / span, 1) if span else None,
                        "new_frames_hz": round(new_hz, 1) if new_hz is not None else None,
                        "frozen": problem.startswith(f"{n}: frozen"), "slow": problem.startswith(f"{n}: slow")})
        return out

    def _judge(self, n: str, configured: float | None, span: float) -> str:
        compare_hz = self.compared[n] / span
        expected = min(float(configured), compare_hz) if configured else compare_hz
        if expected * span < MIN_FRAMES:
            return (f"{n}: too few frames to judge ({self.compared[n]} compared over {span:.1f} s); "
                    "the check measures again")
        if self.new[n] == 0:
            return (f"{n}: frozen: {self.samples[n]} frames over {span:.1f} s, every one the same image "
                    "(a hung camera or driver repeating its last frame); reconnect it, or end the session")
        new_hz = self.new[n] / span
        if new_hz < SLOW_FRACTION * expected:
            return (f"{n}: slow: {new_hz:.1f} new frames/s, configured {configured} fps (the check compared "
                    f"{compare_hz:.1f} frames/s; at least {SLOW_FRACTION * expected:.1f} new ones needed); "
                    "check its cable, USB bandwidth and exposure, or end the session")
        return ""


def steady(rows: list[dict], previous: list[dict] | None) -> list[dict]:
    """A frozen or slow verdict stands when the camera also failed the previous window (or this is
    the first): one bad window after a good one (a loaded computer starving a camera's thread for a
    moment) does not fail the camera, while a camera that is frozen or slow fails every window."""
    if previous is None:
        return rows
    passed_before = {r["name"] for r in previous if r.get("ok")}
    out = []
    for r in rows:
        if r["live"] and r["problem"] and r["name"] in passed_before:
            r = {**r, "ok": True, "frozen": False, "slow": False, "problem": "",
                 "note": f"one failed window after a good one: {r['problem']}"}
        out.append(r)
    return out


def problems(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    return [r["problem"] for r in rows if r.get("problem")]


class CameraCheck:
    """The check over one connected bench: `add` every observation's images, `judged` returns a
    window's rows (after `steady`) once the window is over and conclusive, else None."""

    def __init__(self, bench: Bench | None, window_s: float = WINDOW_S):
        self.names = list(bench.camera_names if bench is not None else ()) or list(CAMERAS)
        self.cam_cfg: Mapping[str, CameraSpec] = bench.cfg.cameras if bench is not None else {}
        self.rendered = bool(bench is not None and bench.rendered_cameras)
        self.period_s = 1.0 / float((bench.fps if bench is not None else 0) or 30)
        self.window_s = window_s
        self.previous: list[dict] | None = None
        self.window = CameraWindow(self.names)
        self.t0 = time.monotonic()

    def measuring_rows(self) -> list[dict]:
        """The rows before any window is judged (names and configured sizes)."""
        return self.window.rows(self.cam_cfg, 0.0)

    def add(self, images: Mapping[str, Any] | None) -> None:
        """One observation's images; None: the observation failed (a camera fault)."""
        if images is None:
            self.window.loop_samples += 1
        else:
            self.window.add(images)

    def restart(self) -> None:
        """A new window from now (after the operator was asked: that wait measured nothing)."""
        self.window = CameraWindow(self.names, previous=self.window.last)
        self.t0 = time.monotonic()

    def judged(self) -> list[dict] | None:
        span = time.monotonic() - self.t0
        if span < self.window_s or not (self.rendered or self.window.conclusive(self.cam_cfg, span)
                                        or span >= 10 * self.window_s):
            return None
        raw = self.window.rows(self.cam_cfg, span, rendered=self.rendered)
        rows, self.previous = steady(raw, self.previous), raw
        self.restart()
        return rows

    def passes(self, rows: list[dict]) -> bool:
        """Every camera passed and every camera of the protocol is there."""
        return all(r["ok"] for r in rows) and set(CAMERAS) <= set(self.names)
