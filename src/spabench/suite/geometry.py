"""Plane geometry of scenes in the workspace frame (cm): footprints, gaps, directional relations.

Pure functions of positions and sizes, shared by the resolvers, the contracts, the generator and
(later) the twin's success evaluator. Frame: +x forward (away from the robot), +y the robot's left.
A footprint is the length x width rectangle turned by yaw_deg (0 = length along +x, positive turns
towards +y), or a disc for round objects (footprint_radius_cm set in the inventory).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spabench.suite.model import ObjectSpec, PlacedObject

Point = tuple[float, float]
Polygon = tuple[Point, ...]

# The robot's directions as unit vectors in the workspace frame.
DIRECTION_VECTORS: dict[str, Point] = {
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
    "front": (-1.0, 0.0),
    "behind": (1.0, 0.0),
}

_DISC_SIDES = 16


@dataclass(frozen=True)
class Footprint:
    """An object's outline on the table: a disc (radius set) or a turned rectangle (corners set)."""

    centre: Point
    radius: float | None = None
    corners: Polygon = ()

    @property
    def reach(self) -> float:
        """Radius of a circle about the centre that holds the whole footprint."""
        if self.radius is not None:
            return self.radius
        return max(distance(self.centre, c) for c in self.corners)

    @property
    def polygon(self) -> Polygon:
        """The outline as a convex polygon (a disc as its circumscribed 16-gon)."""
        if self.radius is None:
            return self.corners
        r = self.radius / math.cos(math.pi / _DISC_SIDES)
        cx, cy = self.centre
        return tuple((cx + r * math.cos(2 * math.pi * i / _DISC_SIDES), cy + r * math.sin(2 * math.pi * i / _DISC_SIDES))
                     for i in range(_DISC_SIDES))


if TYPE_CHECKING:
    from spabench.suite.success import RelationRule


def footprint(spec: ObjectSpec, x_cm: float, y_cm: float, yaw_deg: float = 0.0) -> Footprint:
    """The object's table footprint at a pose."""
    if spec.footprint_radius_cm > 0:
        return Footprint(centre=(x_cm, y_cm), radius=spec.footprint_radius_cm)
    half_l, half_w = spec.size_cm[0] / 2.0, spec.size_cm[1] / 2.0
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    corners = ((half_l, half_w), (-half_l, half_w), (-half_l, -half_w), (half_l, -half_w))
    return Footprint(centre=(x_cm, y_cm),
                     corners=tuple((x_cm + c * u - s * v, y_cm + s * u + c * v) for u, v in corners))


def placed_footprint(spec: ObjectSpec, placed: PlacedObject) -> Footprint:
    return footprint(spec, placed.x_cm, placed.y_cm, placed.yaw_deg)


def footprint_gap(a: Footprint, b: Footprint) -> float:
    """Clear distance between two footprints (0 when they touch or overlap); exact for discs."""
    if a.radius is not None and b.radius is not None:
        return max(0.0, distance(a.centre, b.centre) - a.radius - b.radius)
    if a.radius is not None:
        return max(0.0, point_polygon_distance(a.centre, b.corners) - a.radius)
    if b.radius is not None:
        return max(0.0, point_polygon_distance(b.centre, a.corners) - b.radius)
    return polygon_gap(a.corners, b.corners)


def footprints_apart(a: Footprint, b: Footprint, gap: float) -> bool:
    """Is the clear distance between two footprints at least `gap`? (Cheap when they are far apart.)"""
    if distance(a.centre, b.centre) - a.reach - b.reach >= gap:
        return True
    if a.radius is None and b.radius is None and _projected_gap(a.corners, b.corners) >= gap:
        return True
    return footprint_gap(a, b) >= gap


def _projected_gap(a: Polygon, b: Polygon) -> float:
    """The widest gap between the polygons' shadows on their unit edge normals (a lower bound of
    their clear distance)."""
    best = -math.inf
    for poly in (a, b):
        for nx, ny in _axes(poly):
            norm = math.hypot(nx, ny)
            axis = (nx / norm, ny / norm)
            lo_a, hi_a = _project(a, axis)
            lo_b, hi_b = _project(b, axis)
            best = max(best, lo_b - hi_a, lo_a - hi_b)
    return best


def point_footprint_distance(p: Point, f: Footprint) -> float:
    """Distance from a point to a footprint (0 inside)."""
    if f.radius is not None:
        return max(0.0, distance(p, f.centre) - f.radius)
    return point_polygon_distance(p, f.corners)


def y_interval(f: Footprint) -> tuple[float, float]:
    """The footprint's extent across y (the robot's left-right axis)."""
    if f.radius is not None:
        return f.centre[1] - f.radius, f.centre[1] + f.radius
    ys = [p[1] for p in f.corners]
    return min(ys), max(ys)


def _axes(poly: Polygon):
    n = len(poly)
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        yield (y1 - y2, x2 - x1)


def _project(poly: Polygon, axis: Point) -> tuple[float, float]:
    values = [p[0] * axis[0] + p[1] * axis[1] for p in poly]
    return min(values), max(values)


def polygons_intersect(a: Polygon, b: Polygon) -> bool:
    """Separating-axis test for two convex polygons (touching counts as intersecting)."""
    for axis in (*_axes(a), *_axes(b)):
        lo_a, hi_a = _project(a, axis)
        lo_b, hi_b = _project(b, axis)
        if hi_a < lo_b or hi_b < lo_a:
            return False
    return True


def _point_segment(p: Point, a: Point, b: Point) -> float:
    dx, dy = b[0] - a[0], b[1] - a[1]
    length2 = dx * dx + dy * dy
    t = 0.0 if length2 == 0 else max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length2))
    return math.hypot(p[0] - a[0] - t * dx, p[1] - a[1] - t * dy)


def point_in_polygon(p: Point, poly: Polygon) -> bool:
    sign = 0
    n = len(poly)
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        cross = (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1)
        if cross != 0:
            if sign == 0:
                sign = 1 if cross > 0 else -1
            elif (cross > 0) != (sign > 0):
                return False
    return True


def point_polygon_distance(p: Point, poly: Polygon) -> float:
    """Distance from a point to a convex polygon (0 inside)."""
    if point_in_polygon(p, poly):
        return 0.0
    n = len(poly)
    return min(_point_segment(p, poly[i], poly[(i + 1) % n]) for i in range(n))


def polygon_gap(a: Polygon, b: Polygon) -> float:
    """Clear distance between two convex polygons (0 when they touch or overlap)."""
    if polygons_intersect(a, b):
        return 0.0
    na, nb = len(a), len(b)
    return min(
        min(_point_segment(p, b[i], b[(i + 1) % nb]) for p in a for i in range(nb)),
        min(_point_segment(p, a[i], a[(i + 1) % na]) for p in b for i in range(na)),
    )


def relation_offset(target_xy: Point, reference_xy: Point, direction: str) -> tuple[float, float]:
    """(centre distance, angle in degrees between the offset and the direction's vector)."""
    dx, dy = target_xy[0] - reference_xy[0], target_xy[1] - reference_xy[1]
    distance = math.hypot(dx, dy)
    if distance == 0:
        return 0.0, 180.0
    ux, uy = DIRECTION_VECTORS[direction]
    cos_angle = max(-1.0, min(1.0, (dx * ux + dy * uy) / distance))
    return distance, math.degrees(math.acos(cos_angle))


def half_width_cm(spec) -> float:
    """An object's half-width for edge gaps: its disc radius, else half its shorter side."""
    return spec.footprint_radius_cm or min(spec.size_cm[0], spec.size_cm[1]) / 2


def edge_gap_cm(target_xy: Point, reference_xy: Point, target_spec, reference_spec) -> float:
    """Approximate edge-to-edge gap (the sheet bound): centre distance minus both half-widths."""
    return distance(target_xy, reference_xy) - half_width_cm(target_spec) - half_width_cm(reference_spec)


def relation_holds(target_xy: Point, reference_xy: Point, direction: str,
                   rule: RelationRule | None = None, edge_gap_cm: float | None = None) -> bool:
    """The protocol's Relational Placement criterion (spabench.suite.success: the suite's `relation` rule)."""
    from spabench.suite.success import DEFAULT_RELATION_RULE

    distance, angle = relation_offset(target_xy, reference_xy, direction)
    return (rule or DEFAULT_RELATION_RULE).holds(distance, angle, edge_gap_cm)


def distance(a: Point, b: Point) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def between_excess(p: Point, r1: Point, r2: Point) -> float:
    """How far p is from lying between r1 and r2: |p-r1| + |p-r2| - |r1-r2| (0 on the segment)."""
    return distance(p, r1) + distance(p, r2) - distance(r1, r2)


def centroid(points: Sequence[Point]) -> Point:
    return (sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points))
