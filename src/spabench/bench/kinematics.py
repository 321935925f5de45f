"""SO-101 forward kinematics in numpy, read from the arm's MJCF (hardware/sim/so101.xml).

The bench needs to know where the gripper is for a joint target (the Cartesian workspace envelope
in bench/safety.py) without MuJoCo or the twin, so this module parses the same MJCF the twin
simulates: body anchors, hinge axes, joint ranges, sites and the box geoms. One model file is the
only source of the arm's geometry; the scripted stand-in's planner and IK use this FK too (standins/kinematics.py).

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


@dataclass(frozen=True)
class Body:
    name: str
    parent: int                 # index into ArmModel.bodies; -1 for a child of the world
    anchor: np.ndarray          # (3,) position in the parent frame
    joint: int                  # index into JOINTS; -1 for a body fixed to its parent
    axis: np.ndarray            # (3,) unit hinge axis in the body frame


class ArmModel:
    """The SO-101's kinematic tree from its MJCF: FK of bodies, sites and box-geom corners."""

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
            if attrs.get("type", "sphere") != "box":
                continue
            gname = geom.get("name", f"geom{len(self.boxes)}")
            if any(a in attrs for a in _ORIENTATION_ATTRS):
                raise ConfigError(f"{where}: box geom {gname!r} has an orientation (this FK needs none)")
            self.boxes[gname] = (index, _vec(attrs.get("pos", "0 0 0"), 3, where),
                                 _vec(attrs.get("size", "0 0 0"), 3, where))
        for child in el.findall("body"):
            self._walk(child, index, cls)

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

    def gripper_points_many(self, q_rad) -> np.ndarray:
        """(n, k, 3) gripper points for n joint vectors (n, 6) at once: the envelope's search along
        a step places many poses per tick, and one batched pass costs about as much as one pose."""
        q = np.asarray(q_rad, dtype=np.float64)
        n = len(q)
        pos = np.zeros((len(self.bodies), n, 3))
        rot = np.empty((len(self.bodies), n, 3, 3))
        for i, b in enumerate(self.bodies):
            if b.parent < 0:
                pos[i], r = b.anchor, np.broadcast_to(np.eye(3), (n, 3, 3))
            else:
                r = rot[b.parent]
                pos[i] = pos[b.parent] + r @ b.anchor
            if b.joint >= 0:
                a, bb, k = self._hinges[i]
                angle = q[:, b.joint][:, None, None]
                r = r @ (a + np.cos(angle) * bb + np.sin(angle) * k)
            rot[i] = r
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
    """hardware/sim/so101.xml of the spabench root (or of the source tree)."""
    try:
        from spabench.paths import repo_root

        candidate = repo_root() / "hardware" / "sim" / "so101.xml"
        if candidate.is_file():
            return candidate
    except ConfigError:
        pass
    return Path(__file__).resolve().parents[3] / "hardware" / "sim" / "so101.xml"


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
