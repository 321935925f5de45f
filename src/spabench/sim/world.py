"""The twin's physics state: one compiled scene, its MjData, joint I/O in bench units, object poses.

`SimWorld` knows nothing about LeRobot or policies: `SimRobot` (the LeRobot face), the benchmark and
the tests drive it directly. A control period is `substeps` physics steps (1/fps seconds of sim time).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from spabench.bench.kinematics import to_radians, to_units
from spabench.errors import SpabenchError
from spabench.sim.scene_builder import BODY_PREFIX, BuiltScene, SceneOptions, compile_scene
from spabench.suite.model import BenchGeometry, ObjectSpec, SceneSpec
from spabench.suite.vocabulary import JOINTS


class SimError(SpabenchError):
    """The twin was used out of order (no scene, unknown object) or its physics diverged."""


class SimWorld:
    """Physics of one scene at a time; `load()` swaps the scene and keeps the arm where it was."""

    def __init__(self, objects: Mapping[str, ObjectSpec], geometry: BenchGeometry,
                 options: SceneOptions | None = None):
        self.objects = dict(objects)
        self.geometry = geometry
        self.options = options or SceneOptions()
        self.built: BuiltScene | None = None
        # mujoco.MjModel / MjData once a scene is loaded; typed Any (mujoco ships no type
        # information), so "loaded" is checked at run time by _need()
        self.model: Any = None
        self.data: Any = None
        self.generation = 0          # bumps on every load(): renderers rebind when it changes

    # ------------------------------------------------------------------ scene
    def load(self, scene: SceneSpec | None, arm_units=None, settle_s: float = 0.25) -> None:
        """Compile `scene` (None: empty bench), put the arm at `arm_units` (default: as before, else
        the model's zero) and let objects settle for `settle_s` seconds with the arm held."""
        previous = self.joint_units() if self.data is not None else None
        built = compile_scene(scene, self.objects, self.geometry, self.options)
        self.built, self.model = built, built.model
        self.data = mujoco.MjData(self.model)
        m = self.model
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in JOINTS]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._dadr = np.array([m.jnt_dofadr[j] for j in jids])
        self._act = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, j) for j in JOINTS])
        if np.any(self._act < 0):
            raise SimError("the twin model needs one position actuator per joint named like the joint")
        self.gripper_range = (float(m.jnt_range[jids[5]][0]), float(m.jnt_range[jids[5]][1]))
        self._ctrl_lo = m.actuator_ctrlrange[self._act, 0].copy()
        self._ctrl_hi = m.actuator_ctrlrange[self._act, 1].copy()
        self._body_ids = {oid: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, BODY_PREFIX + oid)
                          for oid in built.shapes}
        self._obj_of_body = {bid: oid for oid, bid in self._body_ids.items()}
        self._finger_geoms = {
            "fixed": mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "fixed_finger"),
            "moving": mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "moving_finger"),
        }
        base = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "base")
        self._robot_bodies = {b for b in range(m.nbody) if m.body_rootid[b] == base}
        start = arm_units if arm_units is not None else previous
        if start is not None:
            self.set_joint_units(np.asarray(start, float))
        else:
            mujoco.mj_forward(m, self.data)
        self.hold()
        self.generation += 1
        if settle_s > 0:
            self.run(settle_s)
        self.initial_poses = self.object_poses()

    @property
    def scene(self) -> SceneSpec | None:
        return self.built.scene if self.built else None

    def _need(self) -> BuiltScene:
        """The loaded scene; a clear error when there is none."""
        if self.data is None or self.built is None:
            raise SimError("the twin has no scene loaded: call load(scene) (or connect()) first")
        return self.built

    # ------------------------------------------------------------------ joints
    def joint_units(self) -> np.ndarray:
        """Measured joints in bench units (degrees, gripper 0..100), JOINTS order."""
        self._need()
        return to_units(self.data.qpos[self._qadr], self.gripper_range)

    def set_joint_units(self, values) -> None:
        """Teleport the arm (scene resets only; control goes through set_targets)."""
        self._need()
        q = to_radians(values, self.gripper_range)
        self.data.qpos[self._qadr] = q
        self.data.qvel[self._dadr] = 0.0
        self.data.ctrl[self._act] = np.clip(q, self._ctrl_lo, self._ctrl_hi)
        mujoco.mj_forward(self.model, self.data)

    def target_units(self) -> np.ndarray:
        self._need()
        return to_units(self.data.ctrl[self._act], self.gripper_range)

    def set_targets(self, values) -> np.ndarray:
        """Position targets in bench units (clamped to the actuator ranges); returns what was set."""
        self._need()
        q = np.clip(to_radians(values, self.gripper_range), self._ctrl_lo, self._ctrl_hi)
        self.data.ctrl[self._act] = q
        return to_units(q, self.gripper_range)

    def hold(self) -> None:
        """Targets = measured positions (the arm holds still)."""
        self._need()
        self.data.ctrl[self._act] = np.clip(self.data.qpos[self._qadr], self._ctrl_lo, self._ctrl_hi)

    def step(self, n: int | None = None) -> None:
        """Advance n physics steps (default: one control period)."""
        built = self._need()
        mujoco.mj_step(self.model, self.data, nstep=int(n if n is not None else built.substeps))
        if not np.all(np.isfinite(self.data.qpos)):
            raise SimError("the twin's physics diverged (non-finite state)")

    def run(self, seconds: float) -> None:
        self.step(max(1, int(round(seconds / self.model.opt.timestep))))

    @property
    def control_dt(self) -> float:
        return float(self.model.opt.timestep) * self._need().substeps

    # ------------------------------------------------------------------ objects
    def object_poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{object_id: (position (3,) metres, quaternion wxyz (4,))} of every scene object."""
        self._need()
        return {oid: (self.data.xpos[bid].copy(), self.data.xquat[bid].copy())
                for oid, bid in self._body_ids.items()}

    def object_xy_cm(self) -> dict[str, np.ndarray]:
        return {oid: pos[:2] * 100.0 for oid, (pos, _) in self.object_poses().items()}

    def set_object_pose(self, object_id: str, pos_m, quat=None) -> None:
        """Place an object (tests, hand-placed poses); velocities are zeroed."""
        self._need()
        if object_id not in self._body_ids:
            raise SimError(f"no object {object_id!r} in this scene (have: {sorted(self._body_ids)})")
        jid = self.model.body_jntadr[self._body_ids[object_id]]
        adr, dadr = self.model.jnt_qposadr[jid], self.model.jnt_dofadr[jid]
        self.data.qpos[adr:adr + 3] = pos_m
        if quat is not None:
            self.data.qpos[adr + 3:adr + 7] = quat
        self.data.qvel[dadr:dadr + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def gripper_contacts(self) -> dict[str, list[str]]:
        """Objects touching each finger: {"fixed": [...], "moving": [...], "arm": [...]} (arm: any
        other robot geom)."""
        self._need()
        out: dict[str, set[str]] = {"fixed": set(), "moving": set(), "arm": set()}
        m, d = self.model, self.data
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom1), int(c.geom2)
            for g, other in ((g1, g2), (g2, g1)):
                oid = self._obj_of_body.get(int(m.geom_bodyid[other]))
                if oid is None:
                    continue
                if g == self._finger_geoms["fixed"]:
                    out["fixed"].add(oid)
                elif g == self._finger_geoms["moving"]:
                    out["moving"].add(oid)
                elif int(m.geom_bodyid[g]) in self._robot_bodies:
                    out["arm"].add(oid)
        return {k: sorted(v) for k, v in out.items()}

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        self._need()
        site = self.data.site("tcp")
        return site.xpos.copy(), site.xmat.reshape(3, 3).copy()


def yaw_deg_of(quat) -> float:
    """Heading of an object's x axis in the table plane (degrees)."""
    w, x, y, z = (float(v) for v in quat)
    return math.degrees(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
