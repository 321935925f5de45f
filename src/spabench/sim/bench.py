"""The sim bench: spabench's `Bench` wired to the MuJoCo twin (`make_bench` calls make_sim_bench).

Everything a real bench does (envelope, observe/act/hold/go_home) runs unchanged on the twin's
LeRobot robot; the twin adds the privileged scene state to every Observation
(`extras["privileged"]`) and overrides the Bench's optional twin methods (load_scene, lockstep_clock,
begin_episode, evaluate) that the session, the rollout loop and the auto operator call on every bench.

Config: spabench.sim.bench_config.SimBenchConfig (bench type "sim", registered by the twin): fps,
max_relative_target, cameras (only width/height), home_pose (the arm starts there), robot_id, and
the typed `sim:` options (SimOptions; `privileged` adds extras["privileged"] to observations, built
lazily, only for the observations a policy request reads).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np

from spabench.bench.bench import Bench, CameraFeed
from spabench.bench.config import BenchConfig
from spabench.errors import ConfigError
from spabench.sim.bench_config import SimBenchConfig


class LazyExtras(Mapping):
    """Observation extras whose values are built on first access (then kept): the privileged
    payload costs about a millisecond to build but is read only when an observation becomes a
    policy request. Each value is a function of a snapshot taken at observation time, so building it
    later (in the policy client's thread) sees the same instant."""

    def __init__(self, builders: dict[str, Callable[[], Any]]):
        self._builders = dict(builders)
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> Any:
        with self._lock:
            if key not in self._values:
                self._values[key] = self._builders[key]()
            return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)

    def __contains__(self, key: object) -> bool:
        return key in self._builders


class SimBench(Bench):
    """A Bench whose robot is spabench.sim.SimRobot."""

    kind = "sim"
    cfg: SimBenchConfig
    paced = False
    rendered_cameras = True

    def __init__(self, cfg: SimBenchConfig, *, objects=None, geometry=None, suite=None, workspace=None):
        if not isinstance(cfg, SimBenchConfig):
            raise ConfigError(f"bench config, field 'type': {cfg.type!r} (the sim bench needs 'sim')")
        if workspace is None and geometry is not None:
            workspace = geometry.arm_envelope     # the envelope of the bench the twin builds
        super().__init__(cfg, workspace=workspace)
        self._world_data = {"objects": objects, "geometry": geometry, "suite": suite}
        self.with_privileged = cfg.sim.privileged

    @contextlib.contextmanager
    def open_cameras(self) -> Iterator[CameraFeed]:
        """The twin renders its cameras from the model: the bench connects (no servo to torque) and
        every read is one rendered observation."""
        self.connect()
        try:
            yield CameraFeed(tuple(self.camera_names), reader=lambda: dict(self.observe().images))
        finally:
            self.disconnect()

    def _default_arm_envelope(self):
        from spabench.paths import resolve
        from spabench.suite.loader import load_geometry

        return load_geometry(resolve(self.cfg.sim.hardware_root) / "bench.yaml").arm_envelope

    def _arm_model_file(self) -> str | None:
        return self.cfg.sim.robot_xml and str(self.cfg.sim.robot_xml)

    def robot_config(self):
        from spabench.sim.config_sim_robot import SimCameraConfig, SimRobotConfig

        sim = self.cfg.sim.robot_options()
        cams = {name: SimCameraConfig(width=c.width, height=c.height, fps=c.fps)
                for name, c in self.cfg.cameras.items()}
        return SimRobotConfig(id=self.cfg.robot_id, fps=self.cfg.fps,
                              max_relative_target=self.cfg.max_relative_target, cameras=cams,
                              initial_joints=dict(self.cfg.home_pose), **sim)

    def _make_robot(self):
        from spabench.sim.sim_robot import SimRobot

        return SimRobot(self.robot_config(), **self._world_data)

    def _read_state(self) -> np.ndarray:
        return self.robot.world.joint_units()          # no rendering for a joint reading

    def _extras(self, raw: dict) -> Mapping[str, Any]:
        if not self.with_privileged:
            return {}
        from spabench.sim.privileged import payload_of

        return LazyExtras({"privileged": partial(payload_of, self.robot.privileged_snapshot())})

    # ------------------------------------------------------------------ twin hooks
    def load_scene(self, scene) -> bool:
        """Set up a scene spec (objects at their poses); the arm stays where it is."""
        self._require_connected()
        self.robot.load_scene(scene)
        self._observed_state = None
        return True

    def begin_episode(self) -> None:
        """Start the evaluator's trace now (call when the rollout timer starts)."""
        self._require_connected()
        self.robot.begin_episode()

    def end_episode(self) -> None:
        """Freeze the evaluator's trace (the timer stopped); go_home() does this by itself."""
        self._require_connected()
        self.robot.end_episode()

    def sim_time(self) -> float:
        """The twin's clock (s): advances one control period per act(), so a rollout can run in
        lockstep with the simulation instead of the wall clock."""
        return self.robot.sim_time

    def lockstep_clock(self) -> Callable[[], float]:
        return self.sim_time

    def go_home(self, **kwargs):
        """Homing after an episode is not part of it: the trace is frozen first."""
        if self._connected and self.robot.is_connected:
            self.robot.end_episode()
        return super().go_home(**kwargs)

    def privileged_state(self) -> dict:
        self._require_connected()
        return self.robot.privileged_state()

    def adopt_suite(self, suite) -> None:
        """Score with the success rules of the suite the session evaluates (its configured
        Relational Placement bound), not those of the suite the twin loaded its world from."""
        self.robot.relation_rule = suite.relation_rule

    def evaluate(self, scene=None, states=None) -> tuple[bool, str | None]:
        """(success, suggested failure mode) since begin_episode(); `states` (T, 6) overrides the
        twin's own joint trajectory (e.g. the recorded one)."""
        self._require_connected()
        return self.robot.evaluate(scene, states)

    def evaluation(self, scene=None, states=None):
        self._require_connected()
        return self.robot.evaluation(scene, states)


def make_sim_bench(cfg: BenchConfig | Any, **world) -> SimBench:
    """Build (not connect) the sim bench. `world` may inject objects=, geometry=, suite= (tests)."""
    built = cfg if isinstance(cfg, BenchConfig) else BenchConfig.from_mapping(cfg)
    if not isinstance(built, SimBenchConfig):
        raise ConfigError(f"bench config, field 'type': {built.type!r} (the sim bench needs 'sim')")
    return SimBench(built, **world)
