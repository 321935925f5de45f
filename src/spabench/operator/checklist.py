"""Scene-reset checklists and reference images: how the operator reproduces a scene exactly.

Positions are given from the ROBOT's point of view (the protocol's frame): "forward" is away from
the robot base, "left"/"right" are the robot's left/right, not the operator's. The reference image
is the first overhead frame (middle as fallback) of the first complete attempt of the same
evaluation id whose scene was staged, so every policy sees the scene the first one saw.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.atomic import write_atomically
from spabench.errors import DataError
from spabench.suite.model import BenchGeometry, PlacedObject, SceneSpec

if TYPE_CHECKING:
    from spabench.suite.spec import Suite
    from spabench.suite.success import RelationRule

REFERENCE_DIR = "references"


def _object_name(suite: Suite | None, object_id: str) -> str:
    if suite is None:   # geometry only: the id alone still identifies it
        return object_id
    try:
        obj = suite.object(object_id)
    except DataError:
        return object_id
    return f"{obj.display_name} ({object_id})"


def _side(y_cm: float) -> str:
    if abs(y_cm) < 0.05:
        return "on the centre line"
    return f"{abs(y_cm):.1f} cm to the robot's {'LEFT' if y_cm > 0 else 'RIGHT'}"


def _state_text(placed: PlacedObject) -> str:
    parts = []
    if placed.state.pose:
        parts.append(str(placed.state.pose).replace("_", "-"))
    if placed.state.lid:
        parts.append(f"lid {placed.state.lid}")
    return ", ".join(parts)


def placement_line(placed: PlacedObject, suite: Suite | None) -> str:
    name = _object_name(suite, placed.object_id)
    if placed.location == "bowl":
        where = "IN THE BOWL"
    else:
        where = f"{placed.x_cm:.1f} cm forward of the robot base, {_side(placed.y_cm)}"
        if abs(placed.yaw_deg) > 0.5:
            where += f", turned {placed.yaw_deg:+.0f} deg"
    state = _state_text(placed)
    return f"{name}: {where}" + (f"; {state}" if state else "")


def checklist(scene: SceneSpec, suite_or_geometry: Suite | BenchGeometry, reference_image: str | os.PathLike | None,
              instruction: str | None = None, relation_rule: RelationRule | None = None) -> str:
    """The operator's reset checklist for one scene, as plain text (one item per line).

    Relational goals print the suite's success rule (spabench.suite.success, conf/suite `relation`)."""
    if isinstance(suite_or_geometry, BenchGeometry):
        geometry, suite = suite_or_geometry, None
    else:
        geometry, suite = suite_or_geometry.geometry, suite_or_geometry
    lines = [f"Scene {scene.scene_id}  (task {scene.task}, scene condition {scene.condition})",
             "Positions are from the ROBOT's point of view: forward = away from the base; "
             "left/right = the robot's left/right.",
             "[ ] Clear the table: only the objects below and the bowl."]
    bowl = geometry.bowl_xy_cm
    lines.append(f"[ ] Bowl at its fixed mark: {bowl[0]:.1f} cm forward, {_side(bowl[1])}.")
    objects = sorted(scene.objects, key=lambda p: (p.location != "bowl", -p.y_cm, p.x_cm))
    for placed in objects:
        lines.append(f"[ ] {placement_line(placed, suite)}")
    lines.append("[ ] Arm at home; nothing in the gripper; nobody in the workspace.")
    if reference_image:
        lines.append(f"Reference image (same evaluation, earlier attempt): {reference_image}")
    else:
        lines.append("Reference image: none yet (first attempt of this evaluation); place from the numbers above "
                     "and the rendered reference (placement diagram, twin views).")
    if instruction:
        lines.append(f"Instruction the policy will get: \"{instruction}\"")
    if scene.goal.kind == "relation":
        from spabench.suite.success import DEFAULT_RELATION_RULE

        lines.append(f"Success: {(relation_rule or DEFAULT_RELATION_RULE).describe()}.")
    if scene.notes:
        lines.append(f"Note: {scene.notes}")
    return "\n".join(lines)


# Ledger event of an attempt whose scene was set up before it started: by the twin ("twin") or
# confirmed by a person at the ready gate ("operator"). Only such attempts give reference images.
SCENE_STAGED = "scene_staged"
SCENE_UNSTAGED = "scene_unstaged"


def reference_attempt(ledger: Any, evaluation_id: str) -> Any | None:
    """The earliest complete attempt of `evaluation_id` (any policy) whose scene was staged.

    An attempt recorded on a scene nobody set up (the twin without a scene, an unattended run) is
    never a reference: its first frame would show the wrong table to every later policy."""
    candidates = []
    for trial in ledger.trials():
        if trial.evaluation_id != evaluation_id:
            continue
        candidates += [a for a in ledger.attempts_for(trial.trial_id) if a.status == "complete" and a.episode_path]
    for attempt in sorted(candidates, key=lambda a: (a.ended_at or "", a.attempt_id)):
        if ledger.events(attempt.attempt_id, kind=SCENE_STAGED):
            return attempt
    return None


def reference_image(ledger: Any, campaign_dir: str | os.PathLike, evaluation_id: str,
                    camera: str = "overhead", fallback: str = "middle") -> Path | None:
    """PNG of the first frame of the first complete staged attempt of `evaluation_id` (cached under
    DIR/references/). None when no such attempt with a readable video exists yet."""
    out = Path(campaign_dir) / REFERENCE_DIR / f"{evaluation_id}.png"
    if out.exists():
        return out
    for cam in (camera, fallback):
        if _first_frame_png(ledger, campaign_dir, evaluation_id, cam, out):
            return out
    return None


def reference_frame(ledger: Any, campaign_dir: str | os.PathLike, evaluation_id: str, camera: str) -> Path | None:
    """PNG of one camera's first frame of the reference attempt (DIR/references/<eval>.<camera>.png),
    for overlays on that camera's live view; None before the evaluation's first complete attempt."""
    out = Path(campaign_dir) / REFERENCE_DIR / f"{evaluation_id}.{camera}.png"
    if out.exists() or _first_frame_png(ledger, campaign_dir, evaluation_id, camera, out):
        return out
    return None


def _first_frame_png(ledger: Any, campaign_dir: str | os.PathLike, evaluation_id: str, camera: str,
                     out: Path) -> bool:
    attempt = reference_attempt(ledger, evaluation_id)
    if attempt is None:
        return False
    from spabench.record.reader import EpisodeReader
    from spabench.record.recorder import RecordError

    path = Path(attempt.episode_path)
    if not path.is_absolute():
        path = Path(campaign_dir) / path
    try:
        with EpisodeReader(path) as ep:
            if not ep.video_path(camera).exists():
                return False
            try:
                frame = ep.first_frame(camera)
            except Exception:  # a video still being written or broken
                return False
    except RecordError:
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_png(out, frame)
    return True


def _write_png(path: Path, rgb) -> None:
    try:
        from PIL import Image

        write_atomically(path, lambda tmp: Image.fromarray(rgb).save(tmp, format="PNG"))
    except ImportError:
        import cv2

        write_atomically(path, lambda tmp: tmp.write_bytes(cv2.imencode(".png", rgb[:, :, ::-1])[1].tobytes()))
