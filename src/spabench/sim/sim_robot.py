"""The MuJoCo twin as a LeRobot `Robot`: same features and units as SO101Follower(use_degrees=True).

observation_features: `<joint>.pos` (float) for the six joints + one (H, W, 3) image per configured
camera; action_features: `<joint>.pos`. send_action takes position targets, bounds each joint's
step by max_relative_target (relative to the measured position, as SOFollower does), sets them and
advances the physics by one control period (1/fps s of sim time); it returns what was sent.

Twin extras (not part of LeRobot's Robot): load_scene(scene), begin_episode(), end_episode(),
sim_time, privileged_state(), episode_trace(), evaluate(scene), evaluation(scene).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cached_property

import numpy as np
from lerobot.robots.robot import Robot
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from spabench.errors import ConfigError
from spabench.sim.config_sim_robot import SimRobotConfig
from spabench.sim.evaluator import EpisodeTrace, Evaluation, evaluate
from spabench.sim.home import DEFAULT_SIM_HOME
from spabench.sim.privileged import Snapshot, privileged_state, snapshot
from spabench.sim.render import CameraRig
from spabench.sim.scene_builder import SceneOptions
from spabench.sim.world import SimError, SimWorld
from spabench.suite.model import BenchGeometry, ObjectSpec, SceneSpec
from spabench.suite.vocabulary import JOINTS

logger = logging.getLogger(__name__)


def _load_suite_data(config: SimRobotConfig):
    """(objects, geometry, suite or None) from the suite loader."""
    try:
        from spabench.paths import resolve
        from spabench.suite import load_suite
    except ImportError as exc:  # the suite loader ships with spabench; guard against partial installs
        raise ConfigError(f"sim robot: cannot import the suite loader ({exc}); pass objects= and "
                          "geometry= to SimRobot") from exc
    suite = load_suite(str(resolve(config.tasks_root)), str(resolve(config.hardware_root)))
    return dict(suite.objects), suite.geometry, suite


class SimRobot(Robot):
    _frozen: EpisodeTrace | None               # the trace frozen when the timer stopped
    _trace_initial: dict[str, np.ndarray] | None
    _max_z: dict[str, float]
    _states: list[np.ndarray]
    """LeRobot robot type "spabench_sim": the Spa-Bench bench in MuJoCo."""

    config_class = SimRobotConfig
    name = "spabench_sim"

    def __init__(self, config: SimRobotConfig, *, objects: Mapping[str, ObjectSpec] | None = None,
                 geometry: BenchGeometry | None = None, suite=None):
        super().__init__(config)
        self.config = config
        self._objects = dict(objects) if objects is not None else None
        self._geometry = geometry
        self._suite = suite
        self.relation_rule = None   # None: the rule of the suite the twin loaded (spabench.suite.success)
        self.world: SimWorld | None = None
        self._rig: CameraRig | None = None
        self._rig_generation = -1
        self._frames: dict[str, np.ndarray] = {}
        self._since_render = 0
        self._connected = False
        self._reset_trace()

    # ------------------------------------------------------------------ LeRobot features
    @property
    def _motors_ft(self) -> dict[str, type]:
        return {f"{joint}.pos": float for joint in JOINTS}

    @property
    def _cameras_ft(self) -> dict[str, tuple]:
        return {name: (cam.height, cam.width, 3) for name, cam in self.config.cameras.items()}

    @cached_property
    def observation_features(self) -> dict[str, type | tuple]:
        return {**self._motors_ft, **self._cameras_ft}

    @cached_property
    def action_features(self) -> dict[str, type]:
        return self._motors_ft

    # ------------------------------------------------------------------ connection
    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self, calibrate: bool = True) -> None:
        if self._connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        if self._objects is None or self._geometry is None:
            objects, geometry, suite = _load_suite_data(self.config)
            self._objects = self._objects if self._objects is not None else objects
            self._geometry = self._geometry or geometry
            self._suite = self._suite or suite
        options = SceneOptions(robot_xml=self.config.robot_xml, fps=self.config.fps,
                               max_timestep_s=float(self.config.max_timestep_s), shadows=self.config.shadows, offsamples=self.config.offsamples,
                               offscreen_size=self._offscreen_size())
        self.world = SimWorld(self._objects, self._geometry, options)
        home = self.config.initial_joints or DEFAULT_SIM_HOME
        scene = None
        if self.config.scene_id is not None:
            scene = self._scene_by_id(self.config.scene_id)
        self.world.load(scene, arm_units=np.array([home[j] for j in JOINTS], float),
                        settle_s=self.config.settle_s)
        self._connected = True
        self.configure()
        self._reset_trace()
        logger.info("%s connected (MuJoCo twin, %d fps)", self, self.config.fps)

    def _offscreen_size(self) -> tuple[int, int]:
        cams = self.config.cameras.values()
        return (max([640, *(c.width for c in cams)]), max([480, *(c.height for c in cams)]))

    def _scene_by_id(self, scene_id: str) -> SceneSpec:
        if self._suite is None:
            raise ConfigError(f"sim robot config, field 'scene_id': {scene_id!r} needs the suite "
                              "(tasks/) to be loaded")
        return self._suite.scene(scene_id)

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        """Nothing to calibrate: the twin's joint zero is exact."""

    def configure(self) -> None:
        """Nothing to write to motors; the physics options were set when the scene compiled."""

    def disconnect(self) -> None:
        if not self._connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        if self._rig is not None:
            self._rig.close()
            self._rig = None
        self._connected = False
        logger.info("%s disconnected", self)

    def _need(self) -> SimWorld:
        if not self._connected or self.world is None:
            raise DeviceNotConnectedError(f"{self} is not connected; call connect() first")
        return self.world

    # ------------------------------------------------------------------ I/O
    def get_observation(self) -> dict:
        world = self._need()
        values = world.joint_units()
        obs: dict = {f"{j}.pos": float(v) for j, v in zip(JOINTS, values, strict=True)}
        obs.update(self._images())
        return obs

    def _images(self) -> dict[str, np.ndarray]:
        world = self._need()
        if self._rig is None or self._rig_generation != world.generation:
            if self._rig is not None:
                self._rig.close()
            sizes = {n: (c.width, c.height) for n, c in self.config.cameras.items()}
            self._rig = CameraRig(world.model, sizes)
            self._rig_generation = world.generation
        if self._frames and self._since_render + 1 < self.config.render_every:
            self._since_render += 1
        else:
            self._since_render = 0
            for name in self.config.rendered:
                self._frames[name] = self._rig.render(world.data, name)
        out = {}
        for name, cam in self.config.cameras.items():
            frame = self._frames.get(name)
            if frame is None:
                frame = np.zeros((cam.height, cam.width, 3), np.uint8)
            out[name] = frame
        return out

    def send_action(self, action: dict) -> dict:
        """Position targets {"<joint>.pos": value}; missing joints keep their current target."""
        world = self._need()
        measured = world.joint_units()
        target = world.target_units()
        for i, joint in enumerate(JOINTS):
            key = f"{joint}.pos"
            if key in action:
                value = float(action[key])
                if not np.isfinite(value):
                    raise ValueError(f"send_action: {key} = {value} is not finite")
                target[i] = value
        mrt = self.config.max_relative_target
        if mrt is not None:
            cap = np.array([float(mrt[j]) for j in JOINTS]) if isinstance(mrt, dict) \
                else np.full(len(JOINTS), float(mrt))
            target = measured + np.clip(target - measured, -cap, cap)
        sent = world.set_targets(target)
        world.step()
        self._track()
        return {f"{j}.pos": float(v) for j, v in zip(JOINTS, sent, strict=True)
                if f"{j}.pos" in action}

    # ------------------------------------------------------------------ twin extras
    def load_scene(self, scene: SceneSpec | None) -> None:
        """Swap in a scene (objects at their specified poses); the arm stays where it is."""
        world = self._need()
        world.load(scene, settle_s=self.config.settle_s)
        self._frames.clear()
        self._since_render = 0
        self.begin_episode()

    def begin_episode(self) -> None:
        """Start collecting the evaluator's trace from the current state (call when the timer starts)."""
        self._reset_trace()
        if self.world is not None and self.world.data is not None:
            self._trace_initial = {o: p * 100.0 for o, (p, _) in self.world.object_poses().items()}
            self._max_z = {o: p[2] for o, p in self._trace_initial.items()}
            self._states.append(self.world.joint_units())

    def end_episode(self) -> None:
        """Freeze the trace here (the timer stopped): later motion (homing) is not scored."""
        if self.world is not None and self.world.data is not None and self._frozen is None:
            self._frozen = self.episode_trace()

    @property
    def sim_time(self) -> float:
        """Seconds of simulated time since the scene loaded."""
        return float(self._need().data.time)

    def _reset_trace(self) -> None:
        self._frozen = None
        self._trace_initial = None
        self._max_z = {}
        self._states = []

    def _track(self) -> None:
        if self._frozen is not None:
            return
        if self._trace_initial is None:
            self.begin_episode()
            return
        world = self._need()
        self._states.append(world.joint_units())
        for oid, (pos, _) in world.object_poses().items():
            z = pos[2] * 100.0
            if z > self._max_z.get(oid, -np.inf):
                self._max_z[oid] = z

    def privileged_state(self) -> dict:
        """The privileged scene state (spabench.sim.privileged schema)."""
        return privileged_state(self._need())

    def privileged_snapshot(self) -> Snapshot:
        """What privileged_state() is built from, copied now (cheap); privileged.payload_of() builds it."""
        return snapshot(self._need())

    def episode_trace(self) -> EpisodeTrace:
        """What happened since begin_episode() (or since the scene loaded) until end_episode()."""
        world = self._need()
        if self._frozen is not None:
            return self._frozen
        if self._trace_initial is None:
            self.begin_episode()
        initial = self._trace_initial
        if initial is None:   # begin_episode() sets it whenever a scene is loaded, as it is here
            raise RuntimeError("the twin has no episode trace")
        final = {o: p * 100.0 for o, (p, _) in world.object_poses().items()}
        contacts = world.gripper_contacts()
        held = frozenset(set(contacts["fixed"]) & set(contacts["moving"]))
        lift = {o: float(self._max_z.get(o, final[o][2]) - initial[o][2]) for o in final}
        states = np.array(self._states) if self._states else np.zeros((0, len(JOINTS)))
        return EpisodeTrace(initial_cm=dict(initial), final_cm=final, max_lift_cm=lift,
                            held_at_end=held, states=states)

    def evaluate(self, scene: SceneSpec | None = None, states: np.ndarray | None = None) -> tuple[bool, str | None]:
        """(success, suggested failure mode) of the episode so far against `scene`'s goal
        (default: the loaded scene). `states` overrides the twin's own joint trajectory."""
        ev = self.evaluation(scene, states)
        return ev.success, ev.failure_mode

    def evaluation(self, scene: SceneSpec | None = None, states: np.ndarray | None = None) -> Evaluation:
        world = self._need()
        scene = scene or world.scene
        if scene is None:
            raise SimError("evaluate: no scene loaded and none given")
        trace = self.episode_trace()
        if states is not None:
            trace.states = np.asarray(states, float)
        rule = self.relation_rule or getattr(self._suite, "relation_rule", None)
        return evaluate(scene, trace, world.geometry, self._objects, relation_rule=rule)
