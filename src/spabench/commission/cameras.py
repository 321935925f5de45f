"""The cameras part of `bench check`: one picture per camera, its size and measured rate, and its identity.

Rate: the cameras open on their own (Bench.open_cameras, the arm untouched) and are sampled at the
bench's rate for `camera_s` seconds (longer, up to ten times, until every camera could show
operator.camera_check's MIN_FRAMES new frames); spabench.operator.camera_check judges the window, so
a frozen or slow camera fails here by the same rule as at session start.

Identity: a camera's picture is compared with the reference picture of every camera (a 32 x 24 colour
thumbnail, mean absolute difference). The first check stores the references (in `camera_references`,
default bench-checks/references/<robot_id>/ in the current folder); a later check refuses a camera
whose view is nearer another camera's reference than its own: two USB cameras that came up in each
other's device after a reboot ("wrist and overhead look swapped"). `accept_cameras=true` stores the
views as they are now as the new references (a camera was moved on purpose).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from spabench.atomic import write_atomically
from spabench.commission.record import CheckRecord
from spabench.operator.camera_check import CameraWindow
from spabench.operator.camera_identity import (
    distances,
    identity_problems,
    read_png,
    references_dir,
    stored_references,
)

REFERENCE_INFO = "references.json"


def write_png(path: Path, rgb: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: Image.fromarray(np.ascontiguousarray(rgb)).save(tmp, format="PNG"))


def measure(feed: Any, bench: Any, seconds: float, say: Callable[[str], None]) -> tuple[list[dict], dict]:
    """Sample every camera for `seconds` (longer until conclusive, at most 10x): the judged rows and
    each camera's last frame."""
    cam_cfg = bench.cfg.cameras
    window = CameraWindow(feed.names)
    period = 1.0 / float(bench.fps or 30)
    last: dict[str, np.ndarray] = {}
    t0 = next_tick = time.monotonic()
    shown = 0
    while True:
        images = feed.read()
        window.add(images)
        last.update(images)
        span = time.monotonic() - t0
        if int(span) > shown:
            shown = int(span)
            say(f"  cameras: measuring frame rates, {shown} of {seconds:g} s")
        if span >= seconds and (bench.rendered_cameras or window.conclusive(cam_cfg, span) or span >= 10 * seconds):
            break
        next_tick += period
        time.sleep(max(0.0, next_tick - time.monotonic()))
    return window.rows(cam_cfg, span, rendered=bool(bench.rendered_cameras)), last


def check_cameras(bench: Any, record: CheckRecord, staging: Path, say: Callable[[str], None], *,
                  seconds: float, references: Path | None, accept: bool) -> None:
    """Pictures, sizes, rates and identity of every configured camera (module docstring)."""
    if not bench.camera_names:
        record.add("cameras", "cameras", True, "the bench has no cameras configured")
        return
    with bench.open_cameras() as feed:
        rows, last = measure(feed, bench, seconds, say)
        errors = dict(feed.errors)
    record.frames.update(last)
    for row in rows:
        name = row["name"]
        if name in errors:
            row["problem"] = errors[name]
            row["ok"] = False
        spec = bench.cfg.cameras[name]
        if row["ok"] and (row["width"], row["height"]) != (spec.width, spec.height):
            row["ok"] = False
            row["problem"] = (f"{name}: delivers {row['width']}x{row['height']}, configured "
                              f"{spec.width}x{spec.height} (cameras.{name}.width/height)")
        if name in last:
            file = f"cameras/{name}.png"
            write_png(staging / file, last[name])
            record.pictures[name] = file
        if row["ok"]:
            record.add("cameras", name, True, f"camera '{name}' {row['width']}x{row['height']}, "
                       f"{row['new_frames_hz']} new frames/s (configured {row['configured_fps']} fps)")
        else:
            record.add("cameras", name, False, f"camera {row['problem']}" if row["problem"].startswith(name)
                       else row["problem"] or f"camera '{name}': no frames")
    record.parts["cameras"] = {"rows": rows, "seconds": seconds}
    _identity(bench, record, last, references_dir(references, bench.cfg.robot_id), accept)


def _identity(bench: Any, record: CheckRecord, last: dict[str, np.ndarray], folder: Path, accept: bool) -> None:
    """Compare every picture with the stored references; store them on the first check (or accept)."""
    names = [n for n in bench.camera_names if n in last]
    info_path = folder / REFERENCE_INFO
    stored = stored_references(folder, bench.camera_names)
    part: dict[str, Any] = {"folder": str(folder)}
    record.parts.setdefault("cameras", {})["identity"] = part
    if bench.rendered_cameras:
        record.add("cameras", "identity", True, "the twin renders its cameras: no identity to check")
        return
    if not stored or accept:
        for n in names:
            write_png(folder / f"{n}.png", last[n])
        info = {"stored": datetime.now(UTC).isoformat(timespec="seconds"), "cameras": names,
                "reason": "accept_cameras=true" if stored else "first check"}
        info_path.write_text(json.dumps(info, indent=2) + "\n")
        part.update(info)
        record.add("cameras", "identity", True, f"reference pictures stored in {folder} "
                   f"({'accepted as they are now' if stored else 'the first check'}); later checks compare with them")
        return
    refs = {n: read_png(p) for n, p in stored.items()}
    try:
        part["stored"] = json.loads(info_path.read_text()).get("stored")
    except (OSError, ValueError):
        part["stored"] = None
    views = {n: last[n] for n in names}
    part["distances"] = d = distances(views, refs)
    problems = identity_problems(views, refs)
    for n in names:
        if n not in d[n]:
            record.add("cameras", f"{n} identity", True, f"camera '{n}': no reference of its size to compare with "
                       f"(accept_cameras=true stores one)", warn=True)
        elif n in problems:
            record.add("cameras", f"{n} identity", False, problems[n])
        else:
            record.add("cameras", f"{n} identity", True, f"camera '{n}' shows its own reference view "
                       f"(difference {d[n][n]:g})")
