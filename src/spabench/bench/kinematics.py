"""SO-101 forward kinematics in numpy, read from the arm's MJCF (hardware/sim/so101.xml).

The bench needs to know where the gripper is for a joint target (the Cartesian workspace envelope
in bench/safety.py) without MuJoCo or the twin, so this module parses the same MJCF the twin
simulates: body anchors, hinge axes, joint ranges, sites and the collision geoms. One model file is
the only source of the arm's geometry; the scripted stand-in's planner and IK use this FK too
(standins/kinematics.py).

Collision geometry: every geom that collides (contype or conaffinity non-zero) on a body a joint
moves (the links; the base is bolted to the table) is kept as a box core swept by a ball, what the
envelope's tests need in closed form (COLLISION_SHAPES): a box is its core, a capsule a segment
swept by its radius and a sphere a point swept by it (all three exact); a cylinder or an ellipsoid
is replaced by its bounding box (conservative by at most (sqrt(2) - 1) x its radius at the rim).
A mesh, plane or height field is refused: give the link a primitive collision geom.

Frames: the workspace frame of hardware/bench.yaml, in metres. The model's bodies are parallel to
their parent at q = 0 (the MJCF states that convention; a body with an orientation is refused), so
a body's frame is parent position + parent rotation @ anchor, rotated about its hinge axis.

Units: the bench speaks LeRobot's SO101Follower units (use_degrees=True): arm joints in degrees
around the calibrated mid-range, whose zero is the model's q = 0; the gripper 0..100 maps linearly
onto the gripper joint's range (0 = closed = lower limit).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from spabench.errors import ConfigError
from spabench.suite.vocabulary import GRIPPER, JOINTS

GRIPPER_INDEX = JOINTS.index(GRIPPER)
# The bodies whose box geoms' corners are "the gripper's points" (the Cartesian envelope checks them)
GRIPPER_BODIES: tuple[str, ...] = ("gripper", "moving_jaw")
_ORIENTATION_ATTRS = ("quat", "euler", "axisangle", "xyaxes", "zaxis")
_CORNER_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)


def to_units(qpos_rad, gripper_range_rad: tuple[float, float]) -> np.ndarray:
    """(..., 6) joint radians in JOINTS order -> degrees with the gripper in 0..100."""
    q = np.asarray(qpos_rad, dtype=np.float64)
    out = np.rad2deg(q)
    lo, hi = gripper_range_rad
    out[..., GRIPPER_INDEX] = (q[..., GRIPPER_INDEX] - lo) / (hi - lo) * 100.0
    return out


def to_radians(values, gripper_range_rad: tuple[float, float]) -> np.ndarray:
    """(..., 6) degrees / gripper 0..100 in JOINTS order -> joint radians."""
    v = np.asarray(values, dtype=np.float64)
    out = np.deg2rad(v)
    lo, hi = gripper_range_rad
    out[..., GRIPPER_INDEX] = lo + v[..., GRIPPER_INDEX] / 100.0 * (hi - lo)
    return out


def _box_shape(size: list[float], half_length: float | None) -> tuple[np.ndarray, float]:
    return np.array(size[:3]), 0.0


def _capsule_shape(size: list[float], half_length: float | None) -> tuple[np.ndarray, float]:
    return np.array([0.0, 0.0, half_length if half_length is not None else size[1]]), size[0]


def _sphere_shape(size: list[float], half_length: float | None) -> tuple[np.ndarray, float]:
    return np.zeros(3), size[0]


def _cylinder_shape(size: list[float], half_length: float | None) -> tuple[np.ndarray, float]:
    return np.array([size[0], size[0], half_length if half_length is not None else size[1]]), 0.0


# MJCF geom type -> (sizes it needs without fromto, (size, fromto half length) -> (box core half
# sizes in the geom frame, swept ball radius)); the geom frame's z is a capsule's or cylinder's axis,
# as in MuJoCo
COLLISION_SHAPES: dict[str, tuple[int, Callable[[list[float], float | None], tuple[np.ndarray, float]]]] = {
    "box": (3, _box_shape),
    "capsule": (2, _capsule_shape),
    "sphere": (1, _sphere_shape),
    "cylinder": (2, _cylinder_shape),
    "ellipsoid": (3, _box_shape),
}
_FROMTO_TYPES = ("capsule", "cylinder")


def cross_sizes(half: np.ndarray) -> np.ndarray:
    """(3, 3) M with M[m, j] = half[the third index] for m != j, 0 on the diagonal: the half width of
    a box (axes a) along e_i x a_j is (|a| @ M)[i, j], as the separating-axis test needs."""
    out = np.zeros((3, 3))
    for m in range(3):
        for j in range(3):
            if m != j:
                out[m, j] = half[3 - m - j]
    return out


@dataclass(frozen=True)
class CollisionGeom:
    """One collision geom of the arm: a box core (half sizes along the geom frame's axes) swept by a
    ball of `radius`, in its body's frame."""

    name: str
    kind: str                   # the MJCF type it came from
    body: int                   # index into ArmModel.bodies
    centre: np.ndarray          # (3,) in the body frame
    axes: np.ndarray            # (3, 3) columns: the geom frame's axes in the body frame
    half: np.ndarray            # (3,) half sizes of the box core
    radius: float               # ball swept around the core (capsule, sphere), else 0


class LinkShapes:
    """The collision geoms of some links stacked for batched placement (ArmModel.link_shapes)."""

    def __init__(self, arm: ArmModel, geoms: Sequence[CollisionGeom]):
        self.arm = arm
        self.geoms = tuple(geoms)
        self.names = tuple(g.name for g in geoms)
        self.links = tuple(arm.bodies[g.body].name for g in geoms)
        self.body = np.array([g.body for g in geoms], dtype=np.intp)
        self.centre = np.array([g.centre for g in geoms]).reshape(-1, 3)
        self.axes = np.array([g.axes for g in geoms]).reshape(-1, 3, 3)
        self.half = np.array([g.half for g in geoms]).reshape(-1, 3)
        self.radius = np.array([g.radius for g in geoms], dtype=np.float64)
        self.cross_half = np.array([cross_sizes(h) for h in self.half]).reshape(-1, 3, 3)

    def place(self, q_rad) -> tuple[np.ndarray, np.ndarray]:
        """(centres (n, G, 3), axes (n, G, 3, 3)) in the world for n joint vectors (n, 6) in radians."""
        pos, rot = self.arm.frames_many(q_rad)                   # (B, n, 3), (B, n, 3, 3)
        r = rot[self.body]                                        # (G, n, 3, 3)
        centres = pos[self.body] + np.einsum("gnij,gj->gni", r, self.centre)
        axes = r @ self.axes[:, None]
        return centres.transpose(1, 0, 2), axes.transpose(1, 0, 2, 3)

    def place_units(self, values) -> tuple[np.ndarray, np.ndarray]:
        """place() for (n, 6) targets in bench units (degrees, gripper 0..100)."""
        return self.place(to_radians(np.atleast_2d(values), self.arm.gripper_range))


@dataclass(frozen=True)
class Body:
    name: str
    parent: int                 # index into ArmModel.bodies; -1 for a child of the world
    anchor: np.ndarray          # (3,) position in the parent frame
    joint: int                  # index into JOINTS; -1 for a body fixed to its parent
    axis: np.ndarray            # (3,) unit hinge axis in the body frame


class ArmModel:
    """The SO-101's kinematic tree from its MJCF: FK of bodies, sites, box-geom corners and every
    link's collision geometry."""

    def __init__(self, mjcf: str | Path | None = None):
        path = Path(mjcf) if mjcf is not None else default_arm_model()
        self.path = path
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as exc:
            raise ConfigError(f"arm model {path}: cannot be read ({exc})") from exc
        self._defaults = _defaults(root)
        self.bodies: list[Body] = []
        self.sites: dict[str, tuple[int, np.ndarray]] = {}
        self.boxes: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}   # name -> (body, centre, half sizes)
        self.geoms: list[CollisionGeom] = []    # every collision geom, any body
        self.ranges: dict[str, tuple[float, float]] = {}
        world = root.find("worldbody")
        if world is None:
            raise ConfigError(f"arm model {path}: no <worldbody>")
        for body in world.findall("body"):
            self._walk(body, -1, "main")
        missing = [j for j in JOINTS if j not in self.ranges]
        if missing:
            raise ConfigError(f"arm model {path}: no hinge joint(s) {missing} (needs {', '.join(JOINTS)})")
        self.gripper_range: tuple[float, float] = self.ranges[GRIPPER]
        self._index = {b.name: i for i, b in enumerate(self.bodies)}
        corners = [self._box_corners_local(name) for name, (b, _, _) in self.boxes.items()
                   if self.bodies[b].name in GRIPPER_BODIES]
        # (body index per point, local point) of the gripper's points, grouped per body for one matmul
        self._gripper_points = [(b, np.vstack([c for bi, c in corners if bi == b]))
                                for b in sorted({bi for bi, _ in corners})]
        self.gripper_point_count = sum(len(p) for _, p in self._gripper_points)
        # per hinge: R(a) = A + cos(a) B + sin(a) K with A = k k^T, B = I - k k^T, K = [k]x (Rodrigues)
        self._hinges = {i: _rodrigues_terms(b.axis) for i, b in enumerate(self.bodies) if b.joint >= 0}
        # the same terms per joint index (JOINTS order), stacked for frames_many
        terms = {b.joint: self._hinges[i] for i, b in enumerate(self.bodies) if b.joint >= 0}
        self._hinge_terms = tuple(np.array([terms[j][t] for j in range(len(JOINTS))]) for t in range(3))
        moving: list[bool] = []
        for b in self.bodies:
            moving.append(b.joint >= 0 or (b.parent >= 0 and moving[b.parent]))
        # the links: bodies a joint moves that carry collision geometry, in model order
        self.links: tuple[str, ...] = tuple(dict.fromkeys(
            self.bodies[g.body].name for g in self.geoms if moving[g.body]))
        self._link_shapes: dict[tuple[str, ...], LinkShapes] = {}

    # ------------------------------------------------------------------ parsing
    def _walk(self, el: ET.Element, parent: int, cls: str) -> None:
        name = el.get("name") or f"body{len(self.bodies)}"
        where = f"arm model {self.path}, body {name!r}"
        bad = [a for a in _ORIENTATION_ATTRS if a in el.attrib]
        if bad:
            raise ConfigError(f"{where}: has an orientation ({', '.join(bad)}); this FK needs bodies "
                              "parallel to their parent at q = 0, as hardware/sim/so101.xml is written")
        cls = el.get("childclass", cls)
        joints = el.findall("joint")
        if len(joints) > 1:
            raise ConfigError(f"{where}: {len(joints)} joints (this FK handles one hinge per body)")
        joint, axis = -1, np.zeros(3)
        if joints:
            j = joints[0]
            attrs = self._attrs("joint", j, cls)
            jname = j.get("name", "")
            if attrs.get("type", "hinge") != "hinge" or jname not in JOINTS:
                raise ConfigError(f"{where}: joint {jname!r} must be a hinge named one of {', '.join(JOINTS)}")
            if np.any(_vec(attrs.get("pos", "0 0 0"), 3, where)):
                raise ConfigError(f"{where}: joint {jname!r} is off the body origin (this FK needs pos 0)")
            axis = _vec(attrs.get("axis", "0 0 1"), 3, where)
            axis = axis / np.linalg.norm(axis)
            lo, hi = _vec(attrs.get("range", "0 0"), 2, where)
            self.ranges[jname] = (float(lo), float(hi))
            joint = JOINTS.index(jname)
        index = len(self.bodies)
        self.bodies.append(Body(name, parent, _vec(el.get("pos", "0 0 0"), 3, where), joint, axis))
        for site in el.findall("site"):
            if any(a in site.attrib for a in _ORIENTATION_ATTRS):
                raise ConfigError(f"{where}: site {site.get('name')!r} has an orientation (this FK needs none)")
            self.sites[site.get("name", f"site{len(self.sites)}")] = (index, _vec(site.get("pos", "0 0 0"), 3, where))
        for geom in el.findall("geom"):
            attrs = self._attrs("geom", geom, cls)
            kind = attrs.get("type", "sphere")
            gname = geom.get("name", f"geom{len(self.geoms)}")
            if any(a in attrs for a in _ORIENTATION_ATTRS):
                raise ConfigError(f"{where}: geom {gname!r} has an orientation (this FK needs none; "
                                  "a capsule or cylinder may use fromto)")
            if kind == "box":
                self.boxes[gname] = (index, _vec(attrs.get("pos", "0 0 0"), 3, where),
                                     _vec(attrs.get("size", "0 0 0"), 3, where))
            if _collides(attrs):
                self.geoms.append(self._collision_geom(gname, kind, index, attrs, where))
        for child in el.findall("body"):
            self._walk(child, index, cls)

    def _collision_geom(self, name: str, kind: str, body: int, attrs: dict[str, str], where: str) -> CollisionGeom:
        """One geom as a box core swept by a ball (COLLISION_SHAPES); refused when it has no such form."""
        where = f"{where}, geom {name!r}"
        if kind not in COLLISION_SHAPES:
            raise ConfigError(f"{where}: type {kind!r} has no closed form for the envelope "
                              f"(allowed: {', '.join(COLLISION_SHAPES)}; give the link a primitive collision geom)")
        needs, shape = COLLISION_SHAPES[kind]
        size = [float(v) for v in _floats(attrs.get("size", ""), where)]
        centre, axes, half_length = _vec(attrs.get("pos", "0 0 0"), 3, where), np.eye(3), None
        if "fromto" in attrs:
            if kind not in _FROMTO_TYPES:
                raise ConfigError(f"{where}: fromto on a {kind} (this FK reads it on {', '.join(_FROMTO_TYPES)})")
            ends = _vec(attrs["fromto"], 6, where)
            axis = ends[3:] - ends[:3]
            length = float(np.linalg.norm(axis))
            if length <= 0.0:
                raise ConfigError(f"{where}: fromto has zero length")
            centre, axes, half_length = (ends[:3] + ends[3:]) / 2.0, _frame_with_z(axis / length), length / 2.0
            needs = 1
        if len(size) < needs or any(v < 0 for v in size[:needs]):
            raise ConfigError(f"{where}: size {attrs.get('size', '')!r} (a {kind} needs {needs} sizes >= 0)")
        half, radius = shape(size, half_length)
        return CollisionGeom(name, kind, body, centre, axes, half, float(radius))

    def link_shapes(self, links: Sequence[str] | None = None) -> LinkShapes:
        """The collision geoms of `links` (None: every link, self.links), stacked once and kept."""
        key = self.links if links is None else tuple(links)
        if key not in self._link_shapes:
            unknown = [name for name in key if name not in self.links]
            if unknown:
                raise ConfigError(f"arm model {self.path}: no link(s) {unknown} with collision geometry "
                                  f"(links: {', '.join(self.links)})")
            self._link_shapes[key] = LinkShapes(self, [g for g in self.geoms if self.bodies[g.body].name in key])
        return self._link_shapes[key]

    def _attrs(self, tag: str, el: ET.Element, cls: str) -> dict[str, str]:
        return {**self._defaults.get(el.get("class", cls), {}).get(tag, {}), **el.attrib}

    def _box_corners_local(self, name: str) -> tuple[int, np.ndarray]:
        body, centre, half = self.boxes[name]
        return body, centre + _CORNER_SIGNS * half

    # ------------------------------------------------------------------ forward kinematics
    def frames(self, q_rad) -> tuple[np.ndarray, np.ndarray]:
        """(positions (n, 3), rotations (n, 3, 3)) of every body for joint radians q (6,) in JOINTS order."""
        q = np.asarray(q_rad, dtype=np.float64)
        n = len(self.bodies)
        pos = np.zeros((n, 3))
        rot = np.zeros((n, 3, 3))
        for i, b in enumerate(self.bodies):
            if b.parent < 0:
                p, r = b.anchor, np.eye(3)
            else:
                pr = rot[b.parent]
                p, r = pos[b.parent] + pr @ b.anchor, pr
            if b.joint >= 0:
                r = r @ _axis_rotation(b.axis, q[b.joint])
            pos[i], rot[i] = p, r
        return pos, rot

    def site_pose(self, q_rad, site: str = "tcp") -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation (3, 3)) of a site; sites carry their body's orientation."""
        body, local = self._site(site)
        pos, rot = self.frames(q_rad)
        return pos[body] + rot[body] @ local, rot[body].copy()

    def body_pos(self, q_rad, body: str) -> np.ndarray:
        pos, _ = self.frames(q_rad)
        return pos[self._body(body)].copy()

    def box_corners(self, q_rad, names) -> np.ndarray:
        """(8 k, 3) world corners of the named box geoms (unknown names are an error)."""
        pos, rot = self.frames(q_rad)
        out = []
        for name in names:
            if name not in self.boxes:
                raise KeyError(f"arm model {self.path}: no box geom {name!r}")
            body, local = self._box_corners_local(name)
            out.append(pos[body] + local @ rot[body].T)
        return np.vstack(out)

    def gripper_points(self, q_rad) -> np.ndarray:
        """(k, 3) world positions of the gripper's points: the corners of every box geom on the
        gripper and moving-jaw bodies (housing, fixed jaw and finger, moving jaw and finger)."""
        return self.gripper_points_many(np.asarray(q_rad, dtype=np.float64)[None, :])[0]

    def frames_many(self, q_rad) -> tuple[np.ndarray, np.ndarray]:
        """(positions (B, n, 3), rotations (B, n, 3, 3)) of every body for n joint vectors (n, 6) at
        once: the envelope's search along a step places many poses per tick, and one batched pass
        costs about as much as one pose."""
        q = np.asarray(q_rad, dtype=np.float64)
        n = len(q)
        pos = np.empty((len(self.bodies), n, 3))
        rot = np.empty((len(self.bodies), n, 3, 3))
        # every hinge's rotation in one pass: A + cos(q) B + sin(q) K per joint (n, J, 3, 3)
        a, b, k = self._hinge_terms
        hinge = a + np.cos(q)[:, :, None, None] * b + np.sin(q)[:, :, None, None] * k
        for i, body in enumerate(self.bodies):
            if body.parent < 0:
                pos[i] = body.anchor
                r = hinge[:, body.joint] if body.joint >= 0 else np.broadcast_to(np.eye(3), (n, 3, 3))
            else:
                r = rot[body.parent]
                pos[i] = pos[body.parent] + r @ body.anchor
                if body.joint >= 0:
                    r = r @ hinge[:, body.joint]
            rot[i] = r
        return pos, rot

    def gripper_points_many(self, q_rad) -> np.ndarray:
        """(n, k, 3) gripper points for n joint vectors (n, 6) at once."""
        pos, rot = self.frames_many(q_rad)
        return np.concatenate([pos[b][:, None, :] + local @ rot[b].transpose(0, 2, 1)
                               for b, local in self._gripper_points], axis=1)

    def gripper_points_units(self, values) -> np.ndarray:
        """gripper_points for a target in bench units (degrees, gripper 0..100); (n, 6) targets
        give (n, k, 3)."""
        q = to_radians(values, self.gripper_range)
        return self.gripper_points_many(q) if q.ndim == 2 else self.gripper_points(q)

    def _site(self, site: str) -> tuple[int, np.ndarray]:
        if site not in self.sites:
            raise KeyError(f"arm model {self.path}: no site {site!r}")
        return self.sites[site]

    def _body(self, body: str) -> int:
        if body not in self._index:
            raise KeyError(f"arm model {self.path}: no body {body!r}")
        return self._index[body]


def default_arm_model() -> Path:
    """hardware/sim/so101.xml of the data root (spabench.paths.repo_root)."""
    from spabench.paths import repo_root

    return repo_root() / "hardware" / "sim" / "so101.xml"


@lru_cache(maxsize=8)
def arm_model(mjcf: str | None = None) -> ArmModel:
    """One parsed ArmModel per model file (parsing costs ~1 ms; the model never changes in a run)."""
    return ArmModel(mjcf)


def _axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix of `angle` radians about the unit `axis` (Rodrigues)."""
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array([[t * x * x + c, t * x * y - s * z, t * x * z + s * y],
                     [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
                     [t * x * z - s * y, t * y * z + s * x, t * z * z + c]])


def _rodrigues_terms(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(k k^T, I - k k^T, [k]x) of a unit axis: a rotation by a about it is A + cos(a) B + sin(a) K."""
    outer = np.outer(axis, axis)
    skew = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return outer, np.eye(3) - outer, skew


def _collides(attrs: dict[str, str]) -> bool:
    """MuJoCo's rule: a geom with contype and conaffinity both 0 is visual only (both default to 1)."""
    return any(int(attrs.get(key, "1")) != 0 for key in ("contype", "conaffinity"))


def _frame_with_z(z: np.ndarray) -> np.ndarray:
    """A rotation whose third column is the unit vector z (the other two complete it)."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def _floats(text: str, where: str) -> list[float]:
    try:
        values = [float(v) for v in str(text).split()]
    except ValueError:
        values = [math.nan]
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{where}: {text!r} is not finite numbers")
    return values


def _vec(text: str, n: int, where: str) -> np.ndarray:
    try:
        values = [float(v) for v in str(text).split()]
    except ValueError:
        values = []
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{where}: {text!r} is not {n} finite numbers")
    return np.array(values)


def _defaults(root: ET.Element) -> dict[str, dict[str, dict[str, str]]]:
    """MJCF default classes: class -> tag -> attributes, each class inheriting its parent's."""
    out: dict[str, dict[str, dict[str, str]]] = {}

    def visit(el: ET.Element, inherited: dict[str, dict[str, str]]) -> None:
        name = el.get("class", "main")
        own = {tag: dict(attrs) for tag, attrs in inherited.items()}
        for child in el:
            if child.tag != "default":
                own[child.tag] = {**own.get(child.tag, {}), **child.attrib}
        out[name] = own
        for child in el.findall("default"):
            visit(child, own)

    for top in root.findall("default"):
        visit(top, {})
    return out
