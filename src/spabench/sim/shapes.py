"""Simple MuJoCo shapes for the Spa-Bench objects: one `ShapeModel` per ObjectSpec and state.

Every object becomes a handful of primitive geoms (boxes, capsules, cylinders, spheres) coloured
like the real thing, with a mass and friction the SO-101 gripper can hold, and a grasp hint (where
and across which axis the jaws should close) that the scripted stand-in policy reads from the
privileged state.

Sizes: the inventory's `size_cm` is the real object's bounding box. The twin keeps every dimension
up to `TWIN_KNEE_CM` and compresses anything above it by `TWIN_SLOPE` (a monotone map, so size
order between objects is preserved) so that cups and cans still fit between the jaws.

Object frame: origin at the centre of the upright object's bounding box, x along its length,
y across its width, z up. An upside-down object is the upright shape turned 180 degrees about x.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from spabench.suite.model import ObjectSpec, ObjectState

TWIN_KNEE_CM = 4.5
TWIN_SLOPE = 0.35
WALL_SEGMENTS = 12

RGBA = tuple[float, float, float, float]

# Named colours of the inventory (tokens of ObjectSpec.colour, object_id or display_name).
PALETTE: dict[str, RGBA] = {
    "red": (0.80, 0.08, 0.08, 1.0),
    "blue": (0.10, 0.25, 0.80, 1.0),
    "green": (0.10, 0.60, 0.20, 1.0),
    "yellow": (0.95, 0.85, 0.10, 1.0),
    "white": (0.93, 0.93, 0.92, 1.0),
    "brown": (0.45, 0.28, 0.12, 1.0),
    "black": (0.06, 0.06, 0.06, 1.0),
    "pink": (0.95, 0.40, 0.65, 1.0),
    "orange": (0.95, 0.50, 0.10, 1.0),
    "purple": (0.50, 0.20, 0.60, 1.0),
    "grey": (0.55, 0.55, 0.55, 1.0),
    "gray": (0.55, 0.55, 0.55, 1.0),
    "silver": (0.75, 0.75, 0.78, 1.0),
    "glass": (0.75, 0.88, 0.92, 0.45),
    "clear": (0.75, 0.88, 0.92, 0.45),
    "coke": (0.78, 0.05, 0.07, 1.0),
    "pepsi": (0.05, 0.20, 0.65, 1.0),
    "multicolour": (0.90, 0.30, 0.10, 1.0),
    "multicolor": (0.90, 0.30, 0.10, 1.0),
}
DEFAULT_RGBA: RGBA = (0.6, 0.6, 0.6, 1.0)

# Twin mass per shape kind (kg): light enough for the gripper, heavy enough not to skate.
MASS_KG: dict[str, float] = {
    "block": 0.020, "sharpener": 0.015, "pen": 0.010, "marker": 0.012, "highlighter": 0.015,
    "can": 0.020, "airplane": 0.025, "cup": 0.040, "jar": 0.060, "sphere": 0.040, "box": 0.030,
}


@dataclass(frozen=True)
class GeomPart:
    """One primitive geom in the object frame (metres; MuJoCo `size` convention per type)."""

    kind: str                      # box | capsule | cylinder | sphere | ellipsoid
    size: tuple[float, ...]
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    rgba: RGBA = DEFAULT_RGBA
    collide: bool = True
    name: str = ""


@dataclass(frozen=True)
class ShapeModel:
    """How one object looks, weighs and is grasped in the twin."""

    kind: str
    parts: tuple[GeomPart, ...]
    dims_m: tuple[float, float, float]   # twin bounding box (length, width, height), upright
    mass_kg: float
    half_height_m: float                 # object origin above the table when resting
    grasp_offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)  # in the object frame
    alt_grasp_offsets_m: tuple[tuple[float, float, float], ...] = ()  # other places to hold it
    grasp_axis: tuple[float, float, float] = (0.0, 1.0, 0.0)      # jaws close along it (object frame)
    grasp_width_m: float = 0.0
    symmetric: bool = False              # round about z: any horizontal grasp axis works
    friction: tuple[float, float, float] = (1.0, 0.005, 0.0001)
    condim: int = 4                      # 6 adds rolling friction (balls, pens) so they come to rest
    flipped: bool = False                # upside-down: body turned 180 degrees about x
    meta: dict = field(default_factory=dict)


def twin_cm(size_cm: float) -> float:
    """The twin's length for a real length (cm): identity up to the knee, compressed above it."""
    s = float(size_cm)
    return s if s <= TWIN_KNEE_CM else TWIN_KNEE_CM + (s - TWIN_KNEE_CM) * TWIN_SLOPE


def shape_kind(spec: ObjectSpec) -> str:
    """Which primitive recipe an object gets, from its family (then id, then display name)."""
    for text in (spec.family, spec.object_id, spec.display_name):
        t = (text or "").lower()
        if "bowl" in t:
            return "bowl"
        if "cup" in t or "mug" in t:
            return "cup"
        if "container" in t or "spice" in t or "jar" in t:
            return "jar"
        if "sharpener" in t:
            return "sharpener"
        if "block" in t or "cube" in t:
            return "block"
        if "can" in t or "soda" in t or "coke" in t or "pepsi" in t:
            return "can"
        if "plane" in t:
            return "airplane"
        if "highlighter" in t:
            return "highlighter"
        if "marker" in t:
            return "marker"
        if "pen" in t:
            return "pen"
        if "ball" in t or "sphere" in t:
            return "sphere"
    return "box"


def colours(spec: ObjectSpec) -> tuple[RGBA, RGBA | None]:
    """(main colour, stripe/accent colour or None) from the colour name, id and display name."""
    found: list[RGBA] = []
    for text in (spec.colour, spec.object_id, spec.display_name):
        for token in (text or "").lower().replace("-", "_").replace(" ", "_").split("_"):
            if token in PALETTE and PALETTE[token] not in found:
                found.append(PALETTE[token])
        if found:
            break
    if not found:
        return DEFAULT_RGBA, None
    return found[0], (found[1] if len(found) > 1 else None)


def _shade(rgba: RGBA, factor: float) -> RGBA:
    return (rgba[0] * factor, rgba[1] * factor, rgba[2] * factor, rgba[3])


def _yaw_quat(angle: float) -> tuple[float, float, float, float]:
    return (math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2))


_Y_TO_X = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # z axis -> x axis (about y)


def _hollow(radius: float, height: float, main: RGBA, stripe: RGBA | None, *, lid: bool,
            lid_rgba: RGBA, wall: float = 0.0035, floor: float = 0.004) -> list[GeomPart]:
    """An open-topped cylinder (cup, jar, bowl) as a floor disc and a ring of wall boxes."""
    parts = [GeomPart("cylinder", (radius - wall, floor / 2), (0.0, 0.0, -height / 2 + floor / 2),
                      rgba=main, name="floor")]
    half_chord = radius * math.sin(math.pi / WALL_SEGMENTS) + wall / 2
    for k in range(WALL_SEGMENTS):
        a = 2 * math.pi * k / WALL_SEGMENTS
        r = radius - wall / 2
        rgba = stripe if (stripe is not None and k % 2) else main
        parts.append(GeomPart("box", (wall / 2, half_chord, height / 2),
                              (r * math.cos(a), r * math.sin(a), 0.0), _yaw_quat(a), rgba,
                              name=f"wall{k}"))
    if lid:
        parts.append(GeomPart("cylinder", (radius + 0.001, 0.003), (0.0, 0.0, height / 2 - 0.003),
                              rgba=lid_rgba, name="lid"))
    return parts


@dataclass(frozen=True)
class _Sized:
    """What every shape builder reads: the object, its state, its twin size (m) and colours."""

    spec: ObjectSpec
    state: ObjectState
    kind: str
    length: float
    width: float
    height: float
    main: RGBA
    accent: RGBA | None
    mass: float

    @property
    def flipped(self) -> bool:
        return self.state.pose == "upside_down"


def shape_for(spec: ObjectSpec, state: ObjectState | None = None) -> ShapeModel:
    """The twin shape of one inventory object in the given state (lid, pose)."""
    state = state or ObjectState()
    kind = shape_kind(spec)
    length, width, height = (twin_cm(v) / 100.0 for v in spec.size_cm)
    main, accent = colours(spec)
    sized = _Sized(spec, state, kind, length, width, height, main, accent, MASS_KG.get(kind, MASS_KG["box"]))
    return _BUILDERS.get(kind, _box)(sized)


def _hollow_shape(o: _Sized) -> ShapeModel:
    """Cups and jars: a hollow cylinder, lid on when closed; glass jars see-through."""
    radius = max(o.length, o.width) / 2
    if o.kind == "jar":
        # glass: see-through, tinted when the inventory names a colour
        body = PALETTE["glass"] if o.main == DEFAULT_RGBA else (o.main[0], o.main[1], o.main[2], 0.5)
        lid_rgba = (0.15, 0.15, 0.15, 1.0)
    else:
        body = o.main
        lid_rgba = _shade(o.main, 0.7) if o.main != PALETTE["black"] else (0.3, 0.3, 0.3, 1.0)
    parts = _hollow(radius, o.height, body, o.accent, lid=o.state.lid == "closed", lid_rgba=lid_rgba)
    return ShapeModel(o.kind, tuple(parts), (2 * radius, 2 * radius, o.height), o.mass, o.height / 2,
                      grasp_offset_m=(0.0, 0.0, o.height * (0.15 if not o.flipped else -0.15)),
                      grasp_axis=(0.0, 1.0, 0.0), grasp_width_m=2 * radius, symmetric=True,
                      flipped=o.flipped, meta={"lid": o.state.lid, "pose": o.state.pose or "upright"})


def _sphere(o: _Sized) -> ShapeModel:
    radius = min(o.length, o.width, o.height) / 2
    parts = [GeomPart("sphere", (radius,), rgba=o.main, name="ball")]
    if o.accent is not None:
        parts.append(GeomPart("box", (radius * 0.72, radius * 0.72, 0.001), rgba=o.accent,
                              collide=False, name="band"))
    return ShapeModel(o.kind, tuple(parts), (2 * radius,) * 3, o.mass, radius,
                      grasp_width_m=2 * radius, symmetric=True, friction=(1.0, 0.01, 0.003),
                      condim=6)


def _stick(o: _Sized) -> ShapeModel:
    """Pens, markers, highlighters: a capsule barrel with a cap."""
    radius = min(o.width, o.height) / 2
    half_len = max(o.length / 2 - radius, radius)
    cap = _shade(o.main, 0.6)
    parts = [GeomPart("capsule", (radius, half_len), quat=_Y_TO_X, rgba=o.main, name="barrel"),
             GeomPart("cylinder", (radius * 1.08, half_len * 0.22),
                      (half_len * 0.75, 0.0, 0.0), _Y_TO_X, cap, collide=False, name="cap")]
    return ShapeModel(o.kind, tuple(parts), (2 * (half_len + radius), 2 * radius, 2 * radius),
                      o.mass, radius, grasp_axis=(0.0, 1.0, 0.0), grasp_width_m=2 * radius,
                      friction=(1.0, 0.01, 0.003), condim=6)


def _can(o: _Sized) -> ShapeModel:
    """Crushed cans: an ellipsoid with a band."""
    parts = [GeomPart("ellipsoid", (o.length / 2, o.width / 2, o.height / 2), rgba=o.main, name="body"),
             GeomPart("ellipsoid", (o.length * 0.18, o.width / 2 * 1.01, o.height / 2 * 1.01),
                      rgba=o.accent or PALETTE["silver"], collide=False, name="band")]
    return ShapeModel(o.kind, tuple(parts), (o.length, o.width, o.height), o.mass, o.height / 2,
                      grasp_axis=(0.0, 1.0, 0.0), grasp_width_m=o.width)


def _airplane(o: _Sized) -> ShapeModel:
    """A capsule fuselage with wings and fin; propellers when the inventory names them."""
    length, width, height = o.length, o.width, o.height
    r = min(height / 2, 0.009)
    fus_half = max(length / 2 - r, r)
    z_axis = -height / 2 + r
    parts = [
        GeomPart("capsule", (r, fus_half), (0.0, 0.0, z_axis), _Y_TO_X, o.main, name="fuselage"),
        GeomPart("box", (length * 0.12, width / 2, 0.0025), (0.0, 0.0, z_axis), rgba=o.main,
                 name="wings"),
        GeomPart("box", (length * 0.06, 0.0015, max(height / 2 - r, 0.004)),
                 (-length / 2 + length * 0.08, 0.0, z_axis + max(height / 2 - r, 0.004)),
                 rgba=o.main, name="fin"),
    ]
    spec = o.spec
    propeller = "without" not in f"{spec.object_id} {spec.display_name}".lower() and \
        "propeller" in f"{spec.object_id} {spec.display_name} {spec.family}".lower()
    if propeller:
        for k, q in enumerate((_yaw_quat(0.0), (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0))):
            parts.append(GeomPart("box", (0.0015, r * 2.2, 0.003), (length / 2 + 0.0015, 0.0, z_axis),
                                  q, o.accent or PALETTE["black"], collide=False, name=f"prop{k}"))
    return ShapeModel(o.kind, tuple(parts), (length, width, height), o.mass, height / 2,
                      grasp_offset_m=(length * 0.3, 0.0, z_axis),
                      alt_grasp_offsets_m=((-length * 0.3, 0.0, z_axis),), grasp_axis=(0.0, 1.0, 0.0),
                      grasp_width_m=2 * r, meta={"propellers": propeller})


def _box(o: _Sized) -> ShapeModel:
    """Blocks, sharpeners and any other kind: a box (the sharpener gets a dark blade hole in front)."""
    length, width, height = o.length, o.width, o.height
    parts = [GeomPart("box", (length / 2, width / 2, height / 2), rgba=o.main, name="body")]
    if o.kind == "sharpener":
        hole_r = min(width, height) * 0.25
        parts.append(GeomPart("cylinder", (hole_r, 0.001), (length / 2 + 0.0005, 0.0, 0.0), _Y_TO_X,
                              (0.05, 0.05, 0.05, 1.0), collide=False, name="hole"))
    if o.accent is not None:
        parts.append(GeomPart("box", (length / 2 * 1.005, width / 2 * 1.005, height * 0.12),
                              rgba=o.accent, collide=False, name="stripe"))
    axis, grasp_w = ((0.0, 1.0, 0.0), width) if width <= length else ((1.0, 0.0, 0.0), length)
    return ShapeModel(o.kind, tuple(parts), (length, width, height), o.mass, height / 2,
                      grasp_axis=axis, grasp_width_m=grasp_w)


# shape kind -> its builder; a kind not listed (block, sharpener, unknown) is a box
_BUILDERS: dict[str, Callable[[_Sized], ShapeModel]] = {
    "cup": _hollow_shape, "jar": _hollow_shape, "sphere": _sphere,
    "pen": _stick, "marker": _stick, "highlighter": _stick, "can": _can, "airplane": _airplane,
}


def bowl_parts(inner_radius_m: float, outer_radius_m: float, height_m: float,
               rgba: RGBA = (0.82, 0.86, 0.90, 1.0)) -> list[GeomPart]:
    """The receptacle: floor and wall ring, origin on the table at the bowl's centre."""
    wall = outer_radius_m - inner_radius_m
    floor = 0.008
    parts = [GeomPart("cylinder", (inner_radius_m, floor / 2), (0.0, 0.0, floor / 2), rgba=rgba,
                      name="bowl_floor")]
    n = 16
    half_chord = outer_radius_m * math.sin(math.pi / n) + 0.001
    for k in range(n):
        a = 2 * math.pi * k / n
        r = inner_radius_m + wall / 2
        parts.append(GeomPart("box", (wall / 2, half_chord, height_m / 2),
                              (r * math.cos(a), r * math.sin(a), height_m / 2), _yaw_quat(a), rgba,
                              name=f"bowl_wall{k}"))
    return parts


BOWL_FLOOR_TOP_M = 0.008
