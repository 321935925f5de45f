"""The twin's picture of a scene specification: what the fixed cameras would see, for the operator.

Before an evaluation's first real attempt nobody has photographed its scene, so the operator places
it from numbers alone, and that first placement becomes every later policy's reference. This renders
the specification instead: the twin's scene (objects at their specified positions, yaws and
states, the arm at home), let settle briefly as the objects would on the table, seen from the bench
cameras (overhead and middle by default) at their bench.yaml poses. Twin side only: it uses the scene
builder, the world and the headless renderer, nothing of the stand-in policies.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from spabench.sim.home import DEFAULT_SIM_HOME
from spabench.sim.render import CameraRig
from spabench.sim.scene_builder import SceneOptions
from spabench.sim.world import SimWorld
from spabench.suite.model import BenchGeometry, ObjectSpec, SceneSpec
from spabench.suite.vocabulary import JOINTS

os.environ.setdefault("MUJOCO_GL", "egl")

REFERENCE_VIEWS: tuple[str, ...] = ("overhead", "middle")
REFERENCE_SIZE: tuple[int, int] = (640, 480)
SETTLE_S = 0.25          # objects drop the builder's clearance and come to rest, as SimWorld.load does


def render_scene(scene: SceneSpec, objects: Mapping[str, ObjectSpec], geometry: BenchGeometry, *,
                 views: Sequence[str] = REFERENCE_VIEWS, size: tuple[int, int] = REFERENCE_SIZE,
                 home: Mapping[str, float] | None = None) -> dict[str, np.ndarray]:
    """{camera: HxWx3 uint8} of `scene` as the twin's fixed cameras see it, the arm at `home`
    (joint -> bench units; default the twin's home pose). Shadows on: this is a still, not a loop."""
    options = SceneOptions(shadows=True, offsamples=4, offscreen_size=size)
    world = SimWorld(objects, geometry, options)
    pose = {**DEFAULT_SIM_HOME, **(home or {})}
    world.load(scene, arm_units=np.array([float(pose[j]) for j in JOINTS]), settle_s=SETTLE_S)
    assert world.model is not None and world.data is not None
    rig = CameraRig(world.model, {view: size for view in views})
    try:
        return {view: rig.render(world.data, view) for view in views}
    finally:
        rig.close()
