"""The top-down placement diagram of a scene: where each object goes, to the centimetre, and which way.

Drawn as the overhead camera sees the table (the robot at the bottom, forward up, the robot's left
on the left), so the diagram, the overhead view and the real table all read the same way. On it: a
1 cm grid (labelled every 5 cm), the robot base with its frame (+x forward, +y the robot's left),
the workspace and the bowl, each object's real footprint (inventory size_cm, not the twin's
shapes) at its specified position and yaw with a label, and the rotation convention:

  yaw 0 deg: the object's length (its first size_cm axis) points forward, away from the base, its
  front end (airplane nose, pen or marker cap, the sharpener's blade hole) furthest from the robot;
  positive yaw turns it counterclockwise seen from above, the front end toward the robot's left
  (+90 deg: front end to the robot's left; -90 deg: to its right; 180 deg: toward the robot).

Matplotlib's object API on the Agg canvas (no pyplot, no global backend switch).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from spabench.atomic import write_atomically
from spabench.suite.model import BenchGeometry, ObjectSpec, PlacedObject, SceneSpec

# The drawn part of the table (cm): from just behind the base to beyond the workspace, full width.
VIEW_X_CM = (-7.0, 40.0)
MAJOR_CM = 5
ROBOT_COLOR, X_COLOR, Y_COLOR = "#444444", "#C0392B", "#1E8449"


def is_round(spec: ObjectSpec) -> bool:
    """Cups, containers and balls: drawn as circles (their yaw shows nothing)."""
    return bool(spec.footprint_radius_cm) and abs(spec.size_cm[0] - spec.size_cm[1]) < 1e-6


def footprint(placed: PlacedObject, spec: ObjectSpec) -> list[tuple[float, float]]:
    """Corners (x_cm, y_cm) of an object's rectangular footprint at its position and yaw."""
    length, width = spec.size_cm[0], spec.size_cm[1]
    c, s = math.cos(math.radians(placed.yaw_deg)), math.sin(math.radians(placed.yaw_deg))
    out = []
    for u, v in ((length / 2, width / 2), (length / 2, -width / 2), (-length / 2, -width / 2), (-length / 2, width / 2)):
        out.append((placed.x_cm + u * c - v * s, placed.y_cm + u * s + v * c))
    return out


def _colour(spec: ObjectSpec) -> str:
    from matplotlib.colors import is_color_like

    for token in (spec.colour or "").replace("-", "_").split("_"):
        if is_color_like(token):
            return token
    return "#888888"


def placement_text(placed: PlacedObject) -> str:
    if placed.location == "bowl":
        return "in the bowl"
    text = f"x {placed.x_cm:.1f}, y {placed.y_cm:+.1f} cm"
    if abs(placed.yaw_deg) > 0.5:
        text += f", yaw {placed.yaw_deg:+.0f}°"
    state = [str(v).replace("_", "-") for v in (placed.state.pose, placed.state.lid and f"lid {placed.state.lid}") if v]
    return text + (f"; {', '.join(state)}" if state else "")


def draw_placement(scene: SceneSpec, objects: Mapping[str, ObjectSpec], geometry: BenchGeometry,
                   out: str | os.PathLike) -> Path:
    """Write the placement diagram of `scene` to `out` (PNG) and return its path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 6.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.06, 0.08, 0.62, 0.86))
    key = fig.add_axes((0.70, 0.04, 0.29, 0.92))
    half_y = geometry.table_size_cm[1] / 2
    _grid(ax, half_y)
    _robot(ax)
    _workspace_and_bowl(ax, geometry)
    in_bowl = [p for p in scene.objects if p.location == "bowl"]
    for placed in scene.objects:
        spec = objects.get(placed.object_id)
        if spec is not None:
            _object(ax, placed, spec, geometry, in_bowl)
    ax.set_title(f"Scene {scene.scene_id}: placement seen from above (as the overhead camera sees it)",
                 fontsize=10, loc="left")
    _convention_key(key, scene, objects)
    return write_atomically(out, lambda tmp: fig.savefig(tmp, format="png"))


def _grid(ax, half_y: float) -> None:
    x0, x1 = VIEW_X_CM
    ax.set_xlim(half_y, -half_y)          # the robot's left (+y) on the left, as the overhead camera
    ax.set_ylim(x0, x1)
    ax.set_aspect("equal")
    ax.set_xticks(range(-int(half_y) // MAJOR_CM * MAJOR_CM, int(half_y) + 1, MAJOR_CM))
    ax.set_yticks(range(math.ceil(x0 / MAJOR_CM) * MAJOR_CM, int(x1) + 1, MAJOR_CM))
    ax.set_xticks(range(-int(half_y), int(half_y) + 1), minor=True)
    ax.set_yticks(range(math.ceil(x0), int(x1) + 1), minor=True)
    ax.grid(which="minor", color="#E6E6E6", linewidth=0.5)
    ax.grid(which="major", color="#B8B8B8", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_facecolor("#FBF7F0")
    ax.tick_params(labelsize=8)
    ax.set_xlabel("y (cm): + = the robot's LEFT, - = its RIGHT", fontsize=9)
    ax.set_ylabel("x (cm): forward, away from the robot base", fontsize=9)


def _robot(ax) -> None:
    from matplotlib.patches import FancyArrow, Rectangle

    ax.add_patch(Rectangle((5.5, -6.5), -11.0, 6.5, facecolor="#D5D5D5", edgecolor=ROBOT_COLOR, zorder=2))
    ax.text(0, -3.3, "robot base", ha="center", va="center", fontsize=8, color=ROBOT_COLOR, zorder=3)
    ax.plot([0], [0], marker="o", color="black", markersize=4, zorder=4)
    ax.add_patch(FancyArrow(0, 0, 0, 8, width=0.35, head_width=1.4, head_length=1.4, color=X_COLOR, zorder=4))
    ax.add_patch(FancyArrow(0, 0, 8, 0, width=0.35, head_width=1.4, head_length=1.4, color=Y_COLOR, zorder=4))
    ax.text(-0.8, 9.8, "+x forward", color=X_COLOR, fontsize=8, ha="left", zorder=4)
    ax.text(9.5, 1.0, "+y robot's left", color=Y_COLOR, fontsize=8, ha="center", zorder=4)
    ax.text(-6.2, -1.0, "origin (0, 0): the table surface\nunder the shoulder_pan axis", fontsize=6.5,
            ha="left", va="top", color=ROBOT_COLOR, zorder=4)


def _workspace_and_bowl(ax, geometry: BenchGeometry) -> None:
    from matplotlib.patches import Circle, Rectangle

    (wx0, wx1), (wy0, wy1) = geometry.workspace_x_cm, geometry.workspace_y_cm
    ax.add_patch(Rectangle((wy0, wx0), wy1 - wy0, wx1 - wx0, fill=False, linestyle="--", edgecolor="#7F8C8D",
                           linewidth=1.0, zorder=1))
    ax.text(wy1 - 0.3, wx1 + 0.4, "workspace", fontsize=7, color="#7F8C8D", ha="left")
    bx, by = geometry.bowl_xy_cm
    ax.add_patch(Circle((by, bx), geometry.bowl_outer_radius_cm, facecolor="#EEF2F5", edgecolor="#5D6D7E",
                        linewidth=1.2, zorder=2))
    ax.add_patch(Circle((by, bx), geometry.bowl_inner_radius_cm, fill=False, edgecolor="#5D6D7E",
                        linewidth=0.6, zorder=2))
    ax.text(by, bx - geometry.bowl_outer_radius_cm - 0.6, f"bowl (fixed: x {bx:.1f}, y {by:+.1f})",
            fontsize=7, ha="center", va="top", color="#5D6D7E", zorder=3)


def _object(ax, placed: PlacedObject, spec: ObjectSpec, geometry: BenchGeometry, in_bowl: list) -> None:
    from matplotlib.patches import Circle, FancyArrow, Polygon

    colour = _colour(spec)
    if placed.location == "bowl":   # drawn where the twin puts it: the spec point, else spread round the centre
        bx, by = geometry.bowl_xy_cm
        x, y = placed.x_cm, placed.y_cm
        if math.hypot(x - bx, y - by) > geometry.bowl_inner_radius_cm - 1.0:
            k, n = in_bowl.index(placed), len(in_bowl)
            a = 2 * math.pi * k / n + math.pi / 2 if n > 1 else 0.0
            x, y = (bx + 2.8 * math.cos(a), by + 2.8 * math.sin(a)) if n > 1 else (bx, by)
        placed = PlacedObject(placed.object_id, x, y, placed.yaw_deg, placed.state, placed.location)
    style = dict(facecolor=colour, alpha=0.55, edgecolor="black", linewidth=1.0, zorder=5)
    if is_round(spec):
        ax.add_patch(Circle((placed.y_cm, placed.x_cm), spec.size_cm[0] / 2, **style))
        reach = spec.size_cm[0] / 2
    else:
        ax.add_patch(Polygon([(y, x) for x, y in footprint(placed, spec)], closed=True, **style))
        yaw = math.radians(placed.yaw_deg)   # the front end: where the length axis points
        dx, dy = math.cos(yaw) * spec.size_cm[0] / 2, math.sin(yaw) * spec.size_cm[0] / 2
        ax.add_patch(FancyArrow(placed.y_cm, placed.x_cm, dy, dx, width=0.12, head_width=0.9, head_length=0.9,
                                length_includes_head=True, color="black", zorder=6))
        reach = math.hypot(*spec.size_cm[:2]) / 2
    ax.plot([placed.y_cm], [placed.x_cm], marker="+", color="black", markersize=7, zorder=7)
    ax.annotate(f"{spec.display_name} ({spec.object_id})\n{placement_text(placed)}",
                (placed.y_cm, placed.x_cm), xytext=(placed.y_cm - reach - 0.8, placed.x_cm + 0.8),
                fontsize=7, ha="left", va="bottom", zorder=8,
                bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="#999999", alpha=0.85),
                arrowprops=dict(arrowstyle="-", color="#666666", linewidth=0.6))


def _convention_key(ax, scene: SceneSpec, objects: Mapping[str, ObjectSpec]) -> None:
    """The rotation convention as a dial: 0 deg forward, + counterclockwise from above."""
    from matplotlib.patches import Arc, FancyArrow, FancyArrowPatch

    ax.set_xlim(1.6, -1.6)                # same orientation as the diagram: +y (left) on the left
    ax.set_ylim(-2.6, 1.8)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.text(0, 1.72, "Rotation (yaw) convention", ha="center", va="top", fontsize=10, weight="bold")
    ax.add_patch(Arc((0, 0), 2.0, 2.0, color="#BBBBBB", linewidth=0.8))
    for deg, label in ((0, "0°  front end forward"), (90, "+90° left"), (-90, "-90° right"), (180, "180° toward robot")):
        r = math.radians(deg)
        tip = (math.sin(r) * 1.0, math.cos(r) * 1.0)          # (y, x): the length axis at this yaw
        ax.add_patch(FancyArrow(0, 0, tip[0] * 0.92, tip[1] * 0.92, width=0.015, head_width=0.07,
                                head_length=0.07, color="#555555" if deg else X_COLOR))
        ax.text(tip[0] * 1.12, tip[1] * 1.12 + (0.06 if deg == 0 else 0), label, fontsize=7.5,
                ha="center" if deg in (0, 180) else ("right" if deg == 90 else "left"),
                va="bottom" if deg == 0 else ("top" if deg == 180 else "center"))
    # +120 deg drawn: counterclockwise from forward, seen from above
    ax.add_patch(FancyArrowPatch((0.0, 0.62), (math.sin(math.radians(120)) * 0.62, math.cos(math.radians(120)) * 0.62),
                                 connectionstyle="arc3,rad=0.55", arrowstyle="-|>", mutation_scale=10,
                                 color=Y_COLOR, linewidth=1.4))
    r120 = math.radians(120)
    ax.add_patch(FancyArrow(0, 0, math.sin(r120) * 0.9, math.cos(r120) * 0.9, width=0.015, head_width=0.07,
                            head_length=0.07, color=Y_COLOR))
    ax.text(math.sin(r120) * 1.05, math.cos(r120) * 1.05 - 0.05, "+120°", color=Y_COLOR, fontsize=8,
            ha="right", va="top")
    lines = ["Seen from above. An object's yaw is where its",
             "length (first size_cm axis) points: 0° = forward,",
             "away from the robot base, its front end (airplane",
             "nose, pen or marker cap, sharpener's blade hole)",
             "furthest from the robot. + turns counterclockwise",
             "(front end toward the robot's LEFT), - clockwise.",
             "Round objects (cups, containers, balls): no yaw.",
             "", "Outline: real footprint (inventory size_cm);",
             "+ marks the specified centre; arrow: front end."]
    placed_yaws = sorted({f"{p.yaw_deg:+.0f}°" for p in scene.objects
                          if abs(p.yaw_deg) > 0.5 and p.object_id in objects and not is_round(objects[p.object_id])})
    if placed_yaws:
        lines += ["", "Yaws in this scene: " + ", ".join(placed_yaws)]
    ax.text(1.55, -1.45, "\n".join(lines), fontsize=7.5, ha="left", va="top", family="sans-serif", linespacing=1.35)
