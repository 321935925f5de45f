"""The embedded MuJoCo twin of the Spa-Bench bench (imported only by the sim bench config and tests).
It holds no policy: the scripted stand-in policy that drives it in the demo is spabench.standins,
which imports nothing from here (tests/config/test_import_graph.py checks it).

Importing this package registers the bench type "sim" (SimBenchConfig) with spabench's bench
registry, importing neither MuJoCo nor LeRobot; the LeRobot robot type "spabench_sim"
(SimRobotConfig) registers when the twin's robot is first built. The heavier parts load on first use:

  SimRobot             spabench.sim.sim_robot      the twin as a LeRobot Robot
  build_scene          spabench.sim.scene_builder  SceneSpec -> mujoco.MjModel
  evaluate             spabench.sim.evaluator      success + suggested failure mode from poses
  privileged_state     spabench.sim.privileged     the privileged payload (schema documented there)
  make_sim_bench       spabench.sim.bench          a spabench Bench wired to the twin
"""

from __future__ import annotations

import importlib
import os

# Headless rendering: MuJoCo picks its GL backend when it is first imported.
os.environ.setdefault("MUJOCO_GL", "egl")

from spabench.sim.bench_config import SimBenchConfig, SimOptions  # noqa: E402  (registers bench type "sim")

_LAZY = {
    "SimCameraConfig": "spabench.sim.config_sim_robot",
    "SimRobotConfig": "spabench.sim.config_sim_robot",
    "SimRobot": "spabench.sim.sim_robot",
    "SimWorld": "spabench.sim.world",
    "build_scene": "spabench.sim.scene_builder",
    "compile_scene": "spabench.sim.scene_builder",
    "evaluate": "spabench.sim.evaluator",
    "privileged_state": "spabench.sim.privileged",
    "make_sim_bench": "spabench.sim.bench",
}

__all__ = ["SimBenchConfig", "SimOptions", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spabench.sim' has no attribute {name!r}")
