"""Closed-loop pick-and-place motions for the scripted stand-in policy.

Jobs ("object X into the bowl", "X onto table point P", "X beside Y in direction D") become phases
(approach, descend, close, lift, transport, lower, release, retreat, then home). Every call returns
the next `horizon` joint targets (bench units): the phases run on into each other within a chunk,
and every call checks the *measured* state and the privileged object poses, so partly executed
chunks, slips and failed grasps are handled (an object not in the jaws while carrying is picked up
again from the next-best jaw axis, up to `max_attempts` times per job, then an alternative object
when the job has one). Jaw axes are chosen so the fingers clear the bowl wall and the
neighbouring objects, checked in 3-D with the arm's own kinematics (ArmKinematics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from spabench.bench.kinematics import to_radians, to_units
from spabench.standins.kinematics import ArmKinematics, gripper_value_for, jaw_aperture_table

CARRY_Z_M = 0.13           # grasp point height while carrying
PREGRASP_DZ_M = 0.07       # approach this far above the grasp point
MIN_GRASP_Z_M = 0.0155     # grasp point never lower: the fixed finger's tip stays at the table top
FLOOR_CLEARANCE_M = 0.001  # low poses keep the gripper this far above the bench's workspace floor
GRASP_CLEARANCE_M = 0.004  # fixed finger face this far from the object's side
APERTURE_MARGIN_M = 0.006  # jaw opens this much wider than object + clearance
ARM_TOL_DEG = 4.0
# Per control step (30 Hz): arm joints up to 6 deg (180 deg/s, within the STS3215's no-load speed;
# descents and lowering at 0.6 of it), jaws 6 gripper units while closing on or releasing an object
MAX_STEP_DEG = 6.0
GRIPPER_STEP = 6.0
# Phases a chunk runs straight on from into the next one (open loop); only home/idle wait. The grasp
# is checked on every call while carrying: an object that is not in the jaws any more is picked
# up again (a new attempt).
CHAINED = frozenset({"approach", "descend", "close", "lift", "transport", "lower", "release", "retreat"})
CARRYING = frozenset({"transport", "lower"})
SETTLE_STEPS = 3           # hold the end of a descent this many steps before the jaws move
GRIPPER_TOL = 5.0


@dataclass(frozen=True)
class Job:
    """One pick-and-place of `object_id`.

    place: "bowl" (into the bowl), "table" (onto the table point place_xy_cm) or "relation"
    (onto the table beside `reference`, inside the `direction` sector, with the object turned so
    that its narrow side faces the reference).
    """

    object_id: str
    place: str = "bowl"
    place_xy_cm: tuple[float, float] | None = None
    reference: str | None = None
    direction: str | None = None
    alternatives: tuple[str, ...] = ()     # any of these will do instead (counting), tried in order


@dataclass
class _Phase:
    name: str
    path: list[np.ndarray]                    # per-step joint targets (bench units)
    sent: int = 0                             # how many steps of path were handed out
    waits: int = 0                            # calls since the whole path was handed out
    info: dict = field(default_factory=dict)


def densify(points: list[np.ndarray], max_step: float, gripper_step: float = 6.0) -> list[np.ndarray]:
    """Per-step samples along joint-space segments, no joint moving more than max_step per step."""
    out: list[np.ndarray] = []
    for a, b in zip(points[:-1], points[1:], strict=False):
        diff = np.abs(b - a)
        n = int(max(1, math.ceil(max(diff[:5].max() / max_step, diff[5] / gripper_step))))
        for i in range(1, n + 1):
            out.append(a + (b - a) * i / n)
    return out or [points[-1].copy()]


def _turn(v, degrees: float) -> np.ndarray:
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def _quat_mat(quat) -> np.ndarray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, float))
    return mat.reshape(3, 3)


# A pick-and-place job's phases in order: the method that starts the next phase once one is reached.
_NEXT_PHASE = {"approach": "_descend", "descend": "_close", "close": "_lift", "lift": "_transport",
               "transport": "_lower", "lower": "_release", "release": "_retreat"}


class Planner:
    """Turns jobs into joint-target chunks, one call per policy request."""

    def __init__(self, kin: ArmKinematics | None = None, horizon: int = 30, max_step_deg: float = MAX_STEP_DEG,
                 grasp_noise_cm: float = 0.0, rng: np.random.Generator | None = None,
                 max_attempts: int = 2, floor_cm: float | None = None):
        self.kin = kin or ArmKinematics()
        # the bench's workspace floor (table top + margin): low poses are raised until every gripper
        # point clears it, so the bench's envelope never has to cut the stand-in's targets
        self.floor_m = None if floor_cm is None else float(floor_cm) / 100.0
        self.horizon = int(horizon)
        self.max_step = float(max_step_deg)
        self.grasp_noise_m = float(grasp_noise_cm) / 100.0
        self.rng = rng or np.random.default_rng(0)
        self.max_attempts = int(max_attempts)
        self._apertures = jaw_aperture_table(self.kin)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self, home_units=None) -> None:
        self.home = None if home_units is None else np.asarray(home_units, float).copy()
        self.jobs: list[Job] = []
        self.job: Job | None = None
        self.phase: _Phase | None = None
        self.attempts = 0
        self.log: list[str] = []
        self.done: set[str] = set()
        self._grasp: dict = {}
        self._last_gripper: float | None = None

    @property
    def _job(self) -> Job:
        """The job in hand: the phases after 'approach' only run while there is one."""
        if self.job is None:
            raise RuntimeError("the stand-in planner has no job in hand")
        return self.job

    @property
    def _phase(self) -> _Phase:
        """The phase under way: chunk() starts one before it hands out targets."""
        if self.phase is None:
            raise RuntimeError("the stand-in planner has no phase under way")
        return self.phase

    @property
    def _home(self) -> np.ndarray:
        """The home pose: given at reset, else the first measured state."""
        if self.home is None:
            raise RuntimeError("the stand-in planner has no home pose yet")
        return self.home

    def set_jobs(self, jobs: list[Job]) -> None:
        self.jobs = list(jobs)

    @property
    def idle(self) -> bool:
        return self.job is None and not self.jobs and (self.phase is None or self.phase.name == "idle")

    # ------------------------------------------------------------------ main entry
    def chunk(self, state_units, privileged: dict) -> np.ndarray:
        """The next `horizon` joint targets (bench units) from the measured state."""
        state = np.asarray(state_units, float)
        self.observe_bowl(privileged)
        if self.home is None:
            self.home = state.copy()
        objects = {o["object_id"]: o for o in privileged.get("objects", [])}
        if self.phase is not None and self.phase.name in CARRYING and not self._held(state, privileged, objects):
            self.log.append(f"dropped:{self._job.object_id}")
            try:
                self._retry(state, objects)
            except _NoSolution as exc:
                self.log.append(f"unreachable:{exc}")
                self._finish_job(state, objects)
        for _ in range(12):                      # a few instantaneous phase changes per call at most
            if self.phase is None or self._phase_done(state, privileged, objects):
                self._advance(state, privileged, objects)
                continue
            break
        self._last_gripper = float(state[5])
        if self._phase.sent >= len(self._phase.path):
            self._phase.waits += 1
        out: list[np.ndarray] = []
        for _ in range(12):
            ph = self._phase
            steps = ph.path[ph.sent:ph.sent + self.horizon - len(out)]
            ph.sent += len(steps)
            out.extend(steps)
            if len(out) >= self.horizon or ph.name not in CHAINED:
                break
            # open-loop hand-over: the next phase starts where this one's path ends
            self._advance(state, privileged, objects)
        last = self._phase.path[-1] if self._phase.path else state
        out += [last] * (self.horizon - len(out))
        return np.array(out, float)

    # ------------------------------------------------------------------ phases
    def _phase_done(self, state, privileged, objects) -> bool:
        ph = self._phase
        if ph.name == "idle":
            return bool(self.jobs)
        if ph.sent < len(ph.path):
            return False
        end = ph.path[-1]
        arm_ok = np.max(np.abs(state[:5] - end[:5])) <= ARM_TOL_DEG
        grip_ok = abs(state[5] - end[5]) <= GRIPPER_TOL
        stalled = self._last_gripper is not None and abs(state[5] - self._last_gripper) < 1.0
        if ph.name in ("close", "release"):
            return arm_ok and (grip_ok or stalled) or ph.waits >= 3
        return (arm_ok and grip_ok) or ph.waits >= 3

    def _set(self, name: str, path: list[np.ndarray], **info) -> None:
        self.phase = _Phase(name, path, info=info)
        self.log.append(name if self.job is None else f"{name}:{self._job.object_id}")

    def _advance(self, state, privileged, objects) -> None:
        ph = self.phase
        name = ph.name if ph else None
        try:
            if name is None or name in ("idle", "home"):
                if self.jobs:
                    return self._next_job(state, objects)
                return self._set("idle", [self._home.copy()])
            if name in _NEXT_PHASE:
                return getattr(self, _NEXT_PHASE[name])(state, objects)
            if name == "retreat":
                self.done.add(self._job.object_id)
                return self._finish_job(state, objects)
        except _NoSolution as exc:
            self.log.append(f"unreachable:{exc}")
            return self._finish_job(state, objects)
        raise RuntimeError(f"unknown phase {name}")

    def _substitute(self, objects) -> None:
        """After giving up on an object, queue the first alternative still where it started."""
        job = self._job
        busy = {j.object_id for j in self.jobs} | self.done
        for alt in job.alternatives:
            o = objects.get(alt)
            if alt in busy or o is None or bool(o.get("in_bowl")) != (job.place != "bowl"):
                continue
            rest = tuple(a for a in job.alternatives if a != alt)
            self.jobs.insert(0, Job(alt, job.place, job.place_xy_cm, job.reference, job.direction, rest))
            self.log.append(f"instead:{alt}")
            return

    def _next_job(self, state, objects) -> None:
        """Start the next job that has a motion; skip unreachable ones; home when none is left."""
        while self.jobs:
            self.job, self.attempts = self.jobs.pop(0), 0
            try:
                return self._approach(state, objects)
            except _NoSolution as exc:
                self.log.append(f"unreachable:{exc}")
        self.job = None
        self._set("home", densify([self._start(state), self._home.copy()], self.max_step))

    def _finish_job(self, state, objects) -> None:
        self.job = None
        if self.jobs:
            return self._next_job(state, objects)
        self._set("home", densify([self._start(state), self._home.copy()], self.max_step))

    def _start(self, state) -> np.ndarray:
        """Where a new path starts: the last target handed out (the arm is heading there)."""
        ph = self.phase
        if ph is not None and ph.path and ph.sent > 0:
            return ph.path[min(ph.sent, len(ph.path)) - 1].copy()
        return state.copy()

    # -------------------------------------------------------------- grasp geometry
    def _grasp_points(self, obj: dict) -> list[np.ndarray]:
        """Where the object may be held (world frame, m): its grasp point, then the alternatives."""
        rot = _quat_mat(obj["quat_wxyz"])
        pos = np.asarray(obj["pos_cm"], float) / 100.0
        grasp = obj["grasp"]
        offsets = [grasp["offset_cm"], *grasp.get("alt_offsets_cm", [])]
        return [pos + rot @ (np.asarray(o, float) / 100.0) for o in offsets]

    def _grasp_options(self, obj: dict, objects: dict, point=None) -> tuple[np.ndarray, list[np.ndarray], float]:
        """(grasp point m, candidate horizontal jaw axes best first, object width m).

        The jaws may close along the object's grasp axis (either way round), any side of a square
        footprint, any direction for a round object. Candidates are ranked by how far the fingers
        stay from the neighbouring objects and, inside the bowl, from its wall; ties go to the
        axis tangential to the arm (reachable at any tool pitch)."""
        rot = _quat_mat(obj["quat_wxyz"])
        grasp = obj["grasp"]
        point = self._grasp_points(obj)[0] if point is None else point
        axis = rot @ np.asarray(grasp["axis"], float)
        axis[2] = 0.0
        dims = obj.get("twin_dims_cm") or [0.0, 0.0, 0.0]
        width = float(grasp["width_cm"]) / 100.0
        if bool(grasp.get("symmetric")) or np.linalg.norm(axis) < 1e-6:
            options = [np.array([math.cos(a), math.sin(a), 0.0]) for a in np.radians(np.arange(0, 360, 15))]
        else:
            axis = axis / np.linalg.norm(axis)
            turns = 4 if abs(dims[0] - dims[1]) < 0.5 else 2     # square footprint: any side
            a0 = math.atan2(axis[1], axis[0])
            options = [np.array([math.cos(a0 + k * 2 * math.pi / turns),
                                 math.sin(a0 + k * 2 * math.pi / turns), 0.0]) for k in range(turns)]
        radial = np.array([point[0], point[1], 0.0]) / max(np.linalg.norm(point[:2]), 1e-9)
        others = [o for oid, o in objects.items() if oid != obj["object_id"]]
        in_bowl = bool(obj.get("in_bowl"))

        def score(a: np.ndarray) -> float:
            clear = self._finger_clearance(point, a, width, others)
            if in_bowl:
                clear = min(clear, self._wall_clearance(point, a, width))
            else:
                clear = min(clear, self._bowl_clearance(point, a, width))
            return min(clear, 0.03) - 0.01 * abs(float(a @ radial))
        return point, sorted(options, key=score, reverse=True), width

    @staticmethod
    def _finger_points(point, jaw, width) -> list[np.ndarray]:
        """Table-plane points the fingers occupy: the fixed finger on the -jaw side, the opened
        moving finger (aperture: object + clearance + margin) and its thickness on the +jaw side,
        each with its width across."""
        side = np.array([-jaw[1], jaw[0]])
        face = point[:2] - jaw[:2] * (width / 2 + GRASP_CLEARANCE_M)
        fixed = face - jaw[:2] * 0.006
        moving = face + jaw[:2] * (width + GRASP_CLEARANCE_M + APERTURE_MARGIN_M + 0.011)
        return [f + s * side * 0.011 for f in (fixed, moving) for s in (-1.0, 0.0, 1.0)]

    def _pose_clearance(self, pose_units, obj: dict, objects: dict) -> float:
        """Smallest 3-D gap between the jaws (fingers and moving jaw, opened as in `pose_units`)
        and the bowl (its wall from inside or outside) or a neighbouring object, at that pose."""
        kin = self.kin
        names = [n for n in ("fixed_finger", "moving_finger", "moving_jaw_arm") if n in kin.arm.boxes]
        pts = kin.arm.box_corners(to_radians(pose_units, kin.gripper_range), names)
        bowl = self._bowl
        centre = np.asarray(bowl["pos_cm"][:2], float) / 100.0
        rim = float(bowl.get("height_cm", 5.0)) / 100.0
        low = pts[pts[:, 2] < rim + 0.005]
        best = 0.05
        if len(low):
            r = np.linalg.norm(low[:, :2] - centre, axis=1)
            if obj.get("in_bowl"):
                best = min(best, float(np.min(float(bowl.get("inner_radius_cm", 6.5)) / 100.0 - r)))
            else:
                best = min(best, float(np.min(r - float(bowl.get("outer_radius_cm", 7.5)) / 100.0)))
        for o in objects.values():
            if o["object_id"] == obj["object_id"]:
                continue
            dims = np.asarray(o.get("twin_dims_cm") or [4.0, 4.0, 4.0], float) / 100.0
            top = float(o["pos_cm"][2]) / 100.0 + dims[2] / 2
            near = pts[pts[:, 2] < top + 0.005]
            if not len(near):
                continue
            c = np.asarray(o["pos_cm"][:2], float) / 100.0
            yaw = math.radians(float(o.get("yaw_deg", 0.0)))
            along = np.array([math.cos(yaw), math.sin(yaw)])
            half_len = max(0.0, dims[0] / 2 - dims[1] / 2)
            rel = near[:, :2] - c
            t = np.clip(rel @ along, -half_len, half_len)
            gap = np.linalg.norm(rel - t[:, None] * along, axis=1) - dims[1] / 2
            best = min(best, float(np.min(gap)))
        return best

    def _bowl_clearance(self, point, jaw, width) -> float:
        """On the table: how far the fingers stay from the bowl's outside."""
        centre = np.asarray(self._bowl["pos_cm"][:2], float) / 100.0
        outer = float(self._bowl.get("outer_radius_cm", 7.5)) / 100.0
        return float(min(np.linalg.norm(f - centre) for f in self._finger_points(point, jaw, width))) - outer

    def _finger_clearance(self, point, jaw, width, others: list[dict]) -> float:
        """Smallest gap between a finger point and a neighbour's footprint (a disc, radius half
        its larger side; a long neighbour is checked along its length)."""
        best = 1.0
        for o in others:
            centre = np.asarray(o["pos_cm"][:2], float) / 100.0
            dims = np.asarray(o.get("twin_dims_cm") or [4.0, 4.0, 4.0], float) / 100.0
            yaw = math.radians(float(o.get("yaw_deg", 0.0)))
            along = np.array([math.cos(yaw), math.sin(yaw)])
            half_len = max(0.0, dims[0] / 2 - dims[1] / 2)
            for f in self._finger_points(point, jaw, width):
                t = float(np.clip((f - centre) @ along, -half_len, half_len))
                gap = float(np.linalg.norm(f - (centre + t * along))) - dims[1] / 2
                best = min(best, gap)
        return best

    def _wall_clearance(self, point, jaw, width) -> float:
        """Inside the bowl: how far the fingers stay from its wall."""
        centre = np.asarray(self._bowl["pos_cm"][:2], float) / 100.0
        inner = float(self._bowl.get("inner_radius_cm", 6.5)) / 100.0
        return inner - float(max(np.linalg.norm(f - centre) for f in self._finger_points(point, jaw, width)))

    def _solve(self, pos, jaw_axis, seed_units, symmetric=True):
        seed = to_radians(seed_units, self.kin.gripper_range)
        res = self.kin.solve_grasp(pos, jaw_axis, seed, jaw_symmetric=symmetric)
        if res is None:
            raise _NoSolution(f"({pos[0]*100:.1f}, {pos[1]*100:.1f}, {pos[2]*100:.1f}) cm")
        return res

    def _pose_units(self, res, gripper: float) -> np.ndarray:
        out = to_units(res.q, self.kin.gripper_range)
        out[5] = gripper
        return out

    def _fixed_finger_target(self, centre, jaw_axis, half_width, seed_units, symmetric=True):
        """IK putting the fixed finger's face beside the object (moving jaw on the far side)."""
        res = self._solve(centre, jaw_axis, seed_units, symmetric=symmetric)
        _, rot = self.kin.fk(res.q)
        jaw = rot[:, 2]
        target = centre - jaw * (half_width + GRASP_CLEARANCE_M)
        return self._solve(target, jaw, to_units(res.q, self.kin.gripper_range), symmetric=False)

    # -------------------------------------------------------------- phase builders
    def _approach(self, state, objects, open_first: bool = False) -> None:
        obj = objects.get(self._job.object_id)
        if obj is None:
            raise _NoSolution(f"{self._job.object_id} not in the scene")
        in_bowl = bool(obj.get("in_bowl"))
        margin = APERTURE_MARGIN_M / 2 if in_bowl else APERTURE_MARGIN_M   # the wall is close
        start = self._start(state)
        noise = np.append(self.rng.normal(0.0, self.grasp_noise_m, 2), 0.0) if self.grasp_noise_m > 0 \
            else np.zeros(3)
        # per place to hold it, the best few jaw axes by the quick estimate, checked in 3-D at the
        # grasp pose itself; a retry starts from the next candidate, so a failed grasp is not
        # repeated as it was
        scored: list[tuple[Any, ...]] = []   # (clearance, -order, solution, point, z, width, opening, dz)
        for candidate in self._grasp_points(obj):
            point, axes, width = self._grasp_options(obj, objects, candidate + noise)
            z = max(point[2], MIN_GRASP_Z_M)
            opening = gripper_value_for(width + GRASP_CLEARANCE_M + margin, self._apertures)
            for axis in axes[:6]:
                for dz in (PREGRASP_DZ_M, PREGRASP_DZ_M / 2):      # lower approach near the base
                    try:
                        above = np.array([point[0], point[1], z + dz])
                        res = self._fixed_finger_target(above, axis, width / 2, start, symmetric=False)
                        _, rot = self.kin.fk(res.q)
                        face = np.array([point[0], point[1], z]) - rot[:, 2] * (width / 2 + GRASP_CLEARANCE_M)
                        low = self._solve(face, rot[:, 2], self._pose_units(res, opening), symmetric=False)
                    except _NoSolution:
                        continue
                    clear = self._pose_clearance(self._pose_units(low, opening), obj, objects)
                    scored.append((min(clear, 0.02), -len(scored), res, point, z, width, opening, dz))
                    break
        if not scored:
            raise _NoSolution(f"no grasp of {self._job.object_id} reachable")
        scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
        _, _, res, point, z, width, opening, dz = scored[min(self.attempts, len(scored) - 1)]
        pre = self._pose_units(res, opening)
        _, rot = self.kin.fk(res.q)
        dims = np.asarray(obj.get("twin_dims_cm") or [width * 100] * 3, float) / 100.0
        axis_obj = np.abs(np.asarray(obj["grasp"]["axis"], float))
        length = float(dims[1] if axis_obj[0] > axis_obj[1] else dims[0])   # the other horizontal side
        self._grasp = {"point": point, "z": z, "dz": dz, "width": width, "opening": opening, "length": length,
                       "jaw": rot[:, 2].copy(), "pre": pre, "obj_z0": float(obj["pos_cm"][2]) / 100.0}
        lifted = start.copy()
        waypoints = [start]
        if open_first:
            lifted[5] = opening
            waypoints.append(lifted)
        waypoints.append(pre)
        self._set("approach", densify(waypoints, self.max_step))

    def _cartesian(self, start_units, z_from, z_to, xy, jaw, gripper, step_m=0.01, partial=False):
        """Joint waypoints for a vertical line of the fixed finger's face (jaw direction kept).

        partial: stop at the last reachable height instead of failing (lifting near the base,
        where the wrist cannot bend far enough to keep the tool down at full carry height)."""
        n = max(1, int(math.ceil(abs(z_to - z_from) / step_m)))
        seed = start_units
        points = [start_units]
        for i in range(1, n + 1):
            z = z_from + (z_to - z_from) * i / n
            try:
                res = self._solve(np.array([xy[0], xy[1], z]), jaw, seed, symmetric=False)
                for _ in range(2):
                    under = self._under_floor(res, gripper)
                    if under <= 0.0:
                        break
                    res = self._solve(np.array([xy[0], xy[1], z + under + FLOOR_CLEARANCE_M]), jaw, seed,
                                      symmetric=False)
            except _NoSolution:
                if partial and i > 1:
                    break
                raise
            seed = self._pose_units(res, gripper)
            points.append(seed)
        return points

    def _under_floor(self, res, gripper: float) -> float:
        """How far (m) the lowest gripper point of IK result `res` lies under the floor, the jaws
        anywhere from closed to the wider of `gripper` and the grasp's opening (a low pose is held
        while they close or open, and the moving jaw's corners dip lowest part-way)."""
        if self.floor_m is None:
            return 0.0
        widest = max(float(gripper), float(self._grasp.get("opening", gripper)))
        lowest = min(float(self.kin.arm.gripper_points_units(self._pose_units(res, value))[:, 2].min())
                     for value in np.linspace(0.0, widest, 9))
        return self.floor_m - lowest

    def _face_xy(self) -> np.ndarray:
        g = self._grasp
        return g["point"][:2] - g["jaw"][:2] * (g["width"] / 2 + GRASP_CLEARANCE_M)

    def _descend(self, state, objects=None) -> None:
        g = self._grasp
        pts = self._cartesian(g["pre"], g["z"] + g["dz"], g["z"], self._face_xy(), g["jaw"], g["opening"])
        path = densify(pts, self.max_step * 0.6)
        self._set("descend", path + [path[-1]] * SETTLE_STEPS)

    def _close(self, state, objects=None) -> None:
        start = self._start(state)
        closed = start.copy()
        closed[5] = 0.0
        path = densify([start, closed], self.max_step, gripper_step=GRIPPER_STEP)
        path += [closed] * 8
        self._set("close", path)

    def _lift(self, state, objects=None) -> None:
        g = self._grasp
        start = self._start(state)
        start[5] = 0.0
        pts = self._cartesian(start, g["z"], CARRY_Z_M, self._face_xy(), g["jaw"], 0.0, step_m=0.01,
                              partial=True)
        self._set("lift", densify(pts, self.max_step))

    def _held(self, state, privileged, objects) -> bool:
        """Is the job's object still in the jaws (touching both fingers, or off the table with
        the jaws not shut on nothing)?"""
        obj = objects.get(self._job.object_id, {})
        holding = (privileged.get("gripper") or {}).get("holding")
        return holding == self._job.object_id or (obj.get("lift_cm", 0.0) > 1.5 and float(state[5]) > 1.0)

    def _retry(self, state, objects) -> None:
        """The grasp failed or the object slipped out: pick it up again, or give up on it."""
        self.attempts += 1
        if self.attempts >= self.max_attempts:
            self.log.append(f"gave_up:{self._job.object_id}")
            self._substitute(objects)
            return self._finish_job(state, objects)
        return self._approach(state, objects, open_first=True)

    def _release_z(self) -> float:
        """Grasp-point height at release: just over the bowl's rim, or just over the table."""
        g = self._grasp
        if self._job.place == "bowl":
            return self._bowl["height_cm"] / 100.0 + g["z"] + 0.02
        return g["z"] + 0.008

    def _place_options(self, objects) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Where the object's centre goes and with which jaw axis, best first: [(xy, jaw or None)]
        (None: keep the jaw's heading relative to the arm)."""
        job, g = self._job, self._grasp
        if job.place == "bowl":
            return [(np.asarray(self._bowl["pos_cm"][:2], float) / 100.0, None)]
        if job.place == "relation":
            from spabench.suite.geometry import DIRECTION_VECTORS

            ref = objects.get(job.reference or "")
            if ref is None or job.direction is None:
                raise _NoSolution(f"reference {job.reference} not in the scene")
            d = np.asarray(DIRECTION_VECTORS[job.direction], float)
            dims = np.asarray(ref.get("twin_dims_cm") or [4.0, 4.0, 4.0], float) / 100.0
            yaw = math.radians(float(ref.get("yaw_deg", 0.0)))
            u, v = np.array([math.cos(yaw), math.sin(yaw)]), np.array([-math.sin(yaw), math.cos(yaw)])
            along = abs(dims[0] / 2 * (u @ d)) + abs(dims[1] / 2 * (v @ d))   # reference's reach towards d
            ref_xy = np.asarray(ref["pos_cm"][:2], float) / 100.0
            out: list[tuple[np.ndarray, np.ndarray | None]] = []
            # straight along d first, then turned towards the robot (still inside the +-45 sector)
            # for a drop the arm cannot reach; per heading: jaw along +d (fixed finger between
            # object and reference, the opening jaw away from it), across d (fingers beside),
            # along -d (the opening jaw between: last resort)
            turns = sorted((0.0, 25.0, -25.0), key=lambda a: np.linalg.norm(_turn(d, a) * 0.05 + ref_xy))
            for turn in [0.0] + [t for t in turns if t != 0.0]:
                dd = _turn(d, turn)
                perp = np.array([-dd[1], dd[0]])
                for jaw, reach, gap in ((dd, g["width"] / 2, 0.022), (perp, g["length"] / 2, 0.012),
                                        (-perp, g["length"] / 2, 0.012), (-dd, g["width"] / 2, 0.03)):
                    dist = along + reach + gap
                    if dist <= 0.064:
                        out.append((ref_xy + dd * max(dist, 0.03), np.array([jaw[0], jaw[1], 0.0])))
                if not out or turn != 0.0:
                    out.append((ref_xy + dd * 0.06, np.array([perp[0], perp[1], 0.0])))
            return out
        xy = np.asarray(job.place_xy_cm, float) / 100.0
        return [(xy, np.array([math.cos(a), math.sin(a), 0.0])) for a in np.radians((0, 90, 180, 270))]

    def _transport(self, state, objects) -> None:
        g = self._grasp
        start = self._start(state)
        start[5] = 0.0
        z_release = self._release_z()
        others = {k: o for k, o in objects.items() if k != self._job.object_id}
        carried = {"object_id": self._job.object_id, "in_bowl": False}
        best: tuple[Any, ...] | None = None     # (key, above, face_xy, jaw)
        for rank, (xy, jaw) in enumerate(self._place_options(objects)):
            try:
                above, face_xy, jaw_now = self._carry_pose(start, xy, jaw)
                release = self._cartesian(above, CARRY_Z_M, z_release, face_xy, jaw_now, 0.0)[-1].copy()
            except _NoSolution:
                continue
            release[5] = g["opening"]
            clear = self._pose_clearance(release, carried, others) if jaw is not None else 1.0
            key = (min(clear, 0.008), -rank)           # the first option with room enough wins
            if best is None or key > best[0]:
                best = (key, above, face_xy, jaw_now)
        if best is None:
            # nowhere reachable to put it: set it back down where it was picked up
            self.log.append(f"no_place:{self._job.object_id}")
            try:
                above, face_xy, jaw_now = self._carry_pose(start, g["point"][:2], None)
            except _NoSolution:
                raise _NoSolution(f"no place for {self._job.object_id}") from None
            self.job = Job(self._job.object_id, "table", tuple(g["point"][:2] * 100.0))
            best = (None, above, face_xy, jaw_now)
        _, above, face_xy, jaw = best
        self._carry = {"xy": face_xy, "jaw": jaw, "above": above}
        self._set("transport", densify([start, above], self.max_step))

    def _carry_pose(self, start, xy, jaw):
        """(joint pose above the drop, fixed-finger face xy, jaw axis) for the object centre at xy."""
        g = self._grasp
        symmetric = False
        if jaw is None:
            # keep the jaw's heading relative to the arm: rotate it with the change of pan angle
            tcp_now, rot_now = self.kin.fk(to_radians(start, self.kin.gripper_range))
            jaw = rot_now[:, 2].copy()
            dpan = math.atan2(xy[1], xy[0]) - math.atan2(tcp_now[1], tcp_now[0])
            c, s = math.cos(dpan), math.sin(dpan)
            jaw = np.array([c * jaw[0] - s * jaw[1], s * jaw[0] + c * jaw[1], 0.0])
            if np.linalg.norm(jaw) < 1e-3:
                jaw = np.array([-xy[1], xy[0], 0.0])
            symmetric = True
        jaw = jaw / np.linalg.norm(jaw)
        res = self._solve(np.array([xy[0], xy[1], CARRY_Z_M]), jaw, start, symmetric=symmetric)
        _, rot = self.kin.fk(res.q)
        jaw = rot[:, 2].copy()
        # the object hangs on the moving-jaw side of the face: aim the object, not the face, at xy
        face_xy = xy - jaw[:2] * (g["width"] / 2 + GRASP_CLEARANCE_M)
        res = self._solve(np.array([face_xy[0], face_xy[1], CARRY_Z_M]), jaw,
                          self._pose_units(res, 0.0), symmetric=False)
        return self._pose_units(res, 0.0), face_xy, jaw

    def _lower(self, state, objects=None) -> None:
        c = self._carry
        z_release = self._release_z()
        pts = self._cartesian(c["above"], CARRY_Z_M, z_release, c["xy"], c["jaw"], 0.0)
        path = densify(pts, self.max_step * 0.6)
        self._set("lower", path + [path[-1]] * SETTLE_STEPS)

    def _release(self, state, objects=None) -> None:
        start = self._start(state)
        opened = start.copy()
        opened[5] = self._grasp["opening"]
        self._set("release", densify([start, opened], self.max_step, gripper_step=GRIPPER_STEP) + [opened] * 6)

    def _retreat(self, state, objects=None) -> None:
        c = self._carry
        start = self._start(state)
        z_release = self._release_z()
        pts = self._cartesian(start, z_release, CARRY_Z_M, c["xy"], c["jaw"], start[5], step_m=0.01,
                              partial=True)
        self._set("retreat", densify(pts, self.max_step))

    # the bowl comes from the privileged state on every call
    _bowl: dict = {"pos_cm": [20.0, -19.0, 0.0], "height_cm": 5.0}

    def observe_bowl(self, privileged: dict) -> None:
        if privileged.get("bowl"):
            self._bowl = privileged["bowl"]


class _NoSolution(Exception):
    """No IK solution for a waypoint: the job is skipped."""
