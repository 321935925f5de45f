"""SO-101 inverse kinematics over the twin's own MJCF (damped least squares on MuJoCo's Jacobians)
for the scripted stand-in policy (in the server process, which has no scene: it loads the arm alone).
Forward kinematics is the bench's (spabench.bench.kinematics, the same MJCF read without MuJoCo).

Joint values here are MuJoCo radians in JOINTS order (the gripper is carried along untouched);
`spabench.bench.kinematics` converts to the degrees / 0..100 the bench speaks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from spabench.bench.kinematics import arm_model, default_arm_model
from spabench.suite.vocabulary import JOINTS

ARM = JOINTS[:5]
IK_RANGE_MARGIN_RAD = math.radians(2.0)   # the five joints that place the gripper; JOINTS[5] is the gripper itself
# IK stops once no joint moves more than this per iteration (1e-5 rad: the result matches running
# all iterations to ~0.001 deg, at a quarter of the cost)
IK_STALL_RAD = 1e-5
# solve_grasp's iteration cap: the solves that succeed stall within ~30 iterations; the rest are
# poses a pitch cannot reach, where more iterations only confirm the failure
IK_GRASP_ITERS = 60


@dataclass(frozen=True)
class IkResult:
    q: np.ndarray              # (6,) radians, gripper copied from the seed
    pos_err_m: float
    axis_err_deg: float        # angle between the achieved and requested tool axis
    jaw_err_deg: float         # angle between the achieved and requested jaw axis
    ok: bool


def tool_rotation(tool_axis, jaw_axis) -> np.ndarray:
    """Rotation of the gripper frame whose +x (pointing) is tool_axis and +z (towards the moving
    jaw) is jaw_axis made orthogonal to it."""
    x = np.asarray(tool_axis, float)
    x = x / np.linalg.norm(x)
    z = np.asarray(jaw_axis, float)
    z = z - (z @ x) * x
    n = np.linalg.norm(z)
    if n < 1e-6:
        raise ValueError("jaw axis is parallel to the tool axis")
    z /= n
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


class ArmKinematics:
    """FK/IK of the `tcp` site (grasp point on the fixed finger's inner face)."""

    def __init__(self, robot_xml: str | Path | None = None, site: str = "tcp"):
        if robot_xml is None:
            robot_xml = default_arm_model()
        self.arm = arm_model(str(robot_xml))
        self.site = site
        self.model = mujoco.MjModel.from_xml_path(str(robot_xml))
        self.data = mujoco.MjData(self.model)
        self.site_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, site)
        if self.site_id < 0:
            raise ValueError(f"{robot_xml}: no site {site!r}")
        jids = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in JOINTS]
        self.qadr = np.array([self.model.jnt_qposadr[j] for j in jids])
        self.dadr = np.array([self.model.jnt_dofadr[j] for j in jids])
        self.lo = np.array([self.model.jnt_range[j][0] for j in jids])
        self.hi = np.array([self.model.jnt_range[j][1] for j in jids])
        self.gripper_range = (float(self.lo[5]), float(self.hi[5]))
        # IK keeps clear of the hard stops (the bench envelope may be a little tighter)
        self.lo[:5] += IK_RANGE_MARGIN_RAD
        self.hi[:5] -= IK_RANGE_MARGIN_RAD
        self._jacp = np.zeros((3, self.model.nv))
        self._jacr = np.zeros((3, self.model.nv))

    # ------------------------------------------------------------------ forward
    def fk(self, q) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation (3,3)) of the grasp point for joint radians q (6,)."""
        return self.arm.site_pose(q, self.site)

    def body_pos(self, q, body: str) -> np.ndarray:
        return self.arm.body_pos(q, body)

    # ------------------------------------------------------------------ inverse
    def ik(self, pos, rot=None, q0=None, *, rot_weight: float = 0.15, iters: int = 150,
           damping: float = 0.02, tol_m: float = 0.002, tol_deg: float = 4.0,
           stall_rad: float = IK_STALL_RAD) -> IkResult:
        """Joint radians that put the grasp point at `pos` (m) with orientation `rot` (3x3 or None).

        Damped least squares over the five arm joints, clamped to their ranges; rot_weight trades
        metres of position error for radians of orientation error. Five joints cannot meet every
        position and orientation exactly, so most solves end at a least-squares compromise: the
        iteration stops once no joint moves more than `stall_rad` per step (the answer no longer
        changes), not after all `iters`.
        """
        target = np.asarray(pos, float)
        q = np.array(q0 if q0 is not None else np.zeros(6), float)
        lo, hi = self.lo[:5], self.hi[:5]
        q[:5] = np.clip(q[:5], lo, hi)
        m, d, sid, qadr = self.model, self.data, self.site_id, self.qadr
        cols = self.dadr[:5]
        n = 3 if rot is None else 6
        damp = (damping ** 2) * np.eye(n)
        jac = np.zeros((n, 5))
        e = np.zeros(n)
        pos_tol = tol_m * 0.25
        for _ in range(iters):
            d.qpos[qadr] = q
            mujoco.mj_kinematics(m, d)
            e[:3] = target - d.site_xpos[sid]
            if rot is not None:
                e[3:] = rot_weight * _rotation_error(rot, d.site_xmat[sid].reshape(3, 3))
            if math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]) < pos_tol \
                    and (rot is None or np.linalg.norm(e[3:]) < 1e-3):
                break
            mujoco.mj_comPos(m, d)
            mujoco.mj_jacSite(m, d, self._jacp, self._jacr, sid)
            jac[:3] = self._jacp[:, cols]
            if rot is not None:
                jac[3:] = rot_weight * self._jacr[:, cols]
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damp, e)
            step = np.linalg.norm(dq)
            if step > 0.3:
                dq *= 0.3 / step
            moved = np.clip(q[:5] + dq, lo, hi)
            stalled = np.max(np.abs(moved - q[:5])) < stall_rad
            q[:5] = moved
            if stalled:
                break
        p, r = self.fk(q)
        pos_err = float(np.linalg.norm(target - p))
        axis_err = jaw_err = 0.0
        if rot is not None:
            axis_err = _angle_deg(r[:, 0], rot[:, 0])
            jaw_err = _angle_deg(r[:, 2], rot[:, 2])
        ok = pos_err <= tol_m and (rot is None or axis_err <= tol_deg)
        return IkResult(q, pos_err, axis_err, jaw_err, ok)

    def pan_towards(self, xy) -> float:
        """shoulder_pan radians that turn the arm's plane towards a table point (pan axis is -z)."""
        return -math.atan2(float(xy[1]), float(xy[0]))

    def solve_grasp(self, pos, jaw_axis, q_seed, pitches_deg=(90, 80, 70, 60, 50, 40, 30),
                    jaw_symmetric: bool = True) -> IkResult | None:
        """IK for a grasp at `pos` with the tool pointing down as steeply as the arm reaches.

        The tool axis leans from straight down (90 deg) towards the horizontal, in the vertical
        plane through the pan axis and the target; the jaws close along `jaw_axis` projected
        perpendicular to the tool axis (either sign when jaw_symmetric, whichever needs less roll).
        """
        pos = np.asarray(pos, float)
        radial = np.array([pos[0], pos[1], 0.0])
        radial = radial / max(np.linalg.norm(radial), 1e-9)
        best: IkResult | None = None
        for pitch in pitches_deg:
            p = math.radians(pitch)
            tool = math.cos(p) * radial + np.array([0.0, 0.0, -math.sin(p)])
            candidates = []
            jaws = [np.asarray(jaw_axis, float)]
            if jaw_symmetric:
                jaws.append(-jaws[0])
            for jaw in jaws:
                try:
                    rot = tool_rotation(tool, jaw)
                except ValueError:
                    rot = tool_rotation(tool, np.cross(tool, radial) + 1e-3)
                seed = np.array(q_seed, float)
                seed[0] = self.pan_towards(pos)
                found = False
                for s in (seed, self._canonical_seed(pos, seed)):
                    res = self.ik(pos, rot, s, iters=IK_GRASP_ITERS)
                    if res.ok:
                        candidates.append(res)
                        found = True
                if not found:
                    # the seed's wrist roll may sit against a stop: try it half a turn round, and level
                    for roll in (seed[4] - math.pi, seed[4] + math.pi, 0.0):
                        if not self.lo[4] <= roll <= self.hi[4]:
                            continue
                        s = self._canonical_seed(pos, seed)
                        s[4] = roll
                        res = self.ik(pos, rot, s, iters=IK_GRASP_ITERS)
                        if res.ok:
                            candidates.append(res)
                            break
            if candidates:
                # least roll travel from the seed, then least error
                best = min(candidates, key=lambda r: (abs(r.q[4] - q_seed[4]) + 0.1 * r.jaw_err_deg / 57.3))
                return best
        return best

    def _canonical_seed(self, pos, seed) -> np.ndarray:
        s = np.array(seed, float)
        s[1], s[2], s[3] = math.radians(20), math.radians(40), math.radians(60)
        return s


def _rotation_error(target, current) -> np.ndarray:
    """World-frame rotation vector taking `current` to `target`."""
    r_err = np.asarray(target) @ np.asarray(current).T
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, r_err.reshape(-1))
    if quat[0] < 0:
        quat = -quat
    vec = np.zeros(3)
    mujoco.mju_quat2Vel(vec, quat, 1.0)
    return vec


def _angle_deg(a, b) -> float:
    c = float(np.clip(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0))
    return math.degrees(math.acos(c))


def jaw_aperture_table(kin: ArmKinematics, n: int = 111) -> tuple[np.ndarray, np.ndarray]:
    """(gripper values 0..100, aperture metres): the gap between the fixed finger's inner face and
    the nearest corner of the moving finger, measured along the jaw axis, for each gripper value."""
    values = np.linspace(0.0, 100.0, n)
    apertures = np.zeros(n)
    lo, hi = kin.gripper_range
    for i, v in enumerate(values):
        q = np.zeros(6)
        q[5] = lo + v / 100.0 * (hi - lo)
        face, rot = kin.arm.site_pose(q, "fixed_finger_face")
        corners = kin.arm.box_corners(q, ["moving_finger"])
        apertures[i] = float(np.min((corners - face) @ rot[:, 2]))
    return values, apertures


def gripper_value_for(aperture_m: float, table: tuple[np.ndarray, np.ndarray]) -> float:
    """Smallest gripper value (0..100) whose aperture reaches `aperture_m` (100 if none does)."""
    values, apertures = table
    idx = np.nonzero(apertures >= aperture_m)[0]
    return float(values[idx[0]]) if len(idx) else 100.0
