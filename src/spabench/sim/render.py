"""Headless camera rendering for the twin (MuJoCo's offscreen renderer; MUJOCO_GL=egl).

One `mujoco.Renderer` per distinct image size, shared by the cameras of that size. Cheap by
default: the scene builder turns shadows and multisampling off (see SceneOptions), which is what
keeps a 320x240 view at a few milliseconds under Mesa's software rasteriser.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")


class CameraRig:
    """Renders named model cameras at their configured sizes; `close()` frees the GL contexts."""

    def __init__(self, model: mujoco.MjModel, sizes: dict[str, tuple[int, int]]):
        """sizes: {camera name: (width, height)}; every name must be a camera of the model."""
        self.model = model
        self.sizes = dict(sizes)
        missing = [c for c in sizes if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, c) < 0]
        if missing:
            raise ValueError(f"the twin model has no camera(s) {missing}")
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self._option = mujoco.MjvOption()

    def _renderer(self, size: tuple[int, int]) -> mujoco.Renderer:
        r = self._renderers.get(size)
        if r is None:
            width, height = size
            r = mujoco.Renderer(self.model, height=height, width=width)
            self._renderers[size] = r
        return r

    def render(self, data: mujoco.MjData, name: str) -> np.ndarray:
        """An HxWx3 uint8 frame of camera `name` for the current state of `data`."""
        renderer = self._renderer(self.sizes[name])
        renderer.update_scene(data, camera=name, scene_option=self._option)
        return renderer.render().copy()

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
