"""Build the twin's MuJoCo model for any scene specification.

The SO-101 model (hardware/sim/so101.xml) is the base; the builder adds the table, the bowl at its
bench.yaml pose, the five cameras, the lights, and one free body per placed object at its
specified position, yaw and state (open/closed lid, upright/upside-down; location "bowl" puts the
object inside the bowl). Everything is generated in code (MjSpec), so any scene spec builds.

Names in the compiled model: bodies and free joints `obj:<object_id>`, the static body `bowl`, the
geom `table`, cameras named as vocabulary.CAMERAS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from spabench.bench.kinematics import default_arm_model
from spabench.errors import DataError
from spabench.sim import shapes
from spabench.sim.shapes import ShapeModel
from spabench.suite.model import BenchGeometry, ObjectSpec, SceneSpec
from spabench.suite.vocabulary import CAMERAS, JOINTS

BODY_PREFIX = "obj:"
TABLE_THICKNESS_M = 0.05
TABLE_CONTYPE = 4             # arm links collide with it (conaffinity 5), fingertips do not
DROP_CLEARANCE_M = 0.0005     # objects start this far above their support, then settle
_GEOM_TYPES = {
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
    "ellipsoid": mujoco.mjtGeom.mjGEOM_ELLIPSOID,
}


@dataclass
class SceneOptions:
    """Knobs of the compiled model that do not come from the scene spec."""

    robot_xml: str | Path | None = None     # None: hardware/sim/so101.xml
    fps: int = 30                          # control rate; the physics timestep divides 1/fps
    max_timestep_s: float = 0.002
    shadows: bool = False                   # shadows cost ~10x render time under llvmpipe
    offsamples: int = 0                     # multisample anti-aliasing (0 = off)
    offscreen_size: tuple[int, int] = (640, 480)   # largest (width, height) any camera renders


@dataclass
class BuiltScene:
    """A compiled twin: the model plus what the builder knows about each object."""

    model: mujoco.MjModel
    scene: SceneSpec | None
    shapes: dict[str, ShapeModel]
    specs: dict[str, ObjectSpec]
    substeps: int                           # physics steps per control period
    placed: dict[str, np.ndarray] = field(default_factory=dict)  # object -> spec (x, y, z) metres


def _quat_mul(a, b) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, np.asarray(a, float), np.asarray(b, float))
    return out


def yaw_quat(yaw_rad: float) -> np.ndarray:
    return np.array([math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2)])


FLIP_QUAT = np.array([0.0, 1.0, 0.0, 0.0])     # 180 degrees about the object's x axis


def look_at_quat(pos, target) -> np.ndarray:
    """Quaternion of a MuJoCo camera at `pos` looking at `target` with the image up as close to +z."""
    pos, target = np.asarray(pos, float), np.asarray(target, float)
    forward = target - pos
    forward /= np.linalg.norm(forward)
    up_hint = np.array([0.0, 0.0, 1.0])
    if abs(forward @ up_hint) > 0.99:           # looking straight down: image up = +x (away from robot)
        up_hint = np.array([1.0, 0.0, 0.0])
    right = np.cross(forward, up_hint)
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    mat = np.column_stack([right, up, -forward])  # camera x, y, z axes (camera looks along -z)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.reshape(-1))
    return quat


def physics_substeps(fps: int, max_timestep_s: float) -> int:
    return max(1, math.ceil((1.0 / fps) / max_timestep_s - 1e-9))


def _add_parts(body, parts, prefix: str, *, friction, movable: bool, mass: float | None = None,
               condim: int = 4):
    collide_parts = [p for p in parts if p.collide]
    for part in parts:
        geom = body.add_geom()
        geom.name = f"{prefix}:{part.name}" if part.name else ""
        geom.type = _GEOM_TYPES[part.kind]
        size = list(part.size) + [0.0] * (3 - len(part.size))
        geom.size = size
        geom.pos = list(part.pos)
        geom.quat = list(part.quat)
        geom.rgba = list(part.rgba)
        geom.group = 0 if part.collide else 2
        if part.collide:
            geom.contype, geom.conaffinity = 1, 1
            geom.condim = condim if movable else 3
            geom.friction = list(friction)
            if mass is not None:
                geom.mass = mass / len(collide_parts)
        else:
            geom.contype, geom.conaffinity = 0, 0
            geom.mass = 0.0
            geom.density = 0.0


def _bowl_slot(index: int, count: int) -> tuple[float, float]:
    """Offsets (m) from the bowl centre for the index-th of `count` objects starting in the bowl."""
    if count <= 1:
        return 0.0, 0.0
    angle = 2 * math.pi * index / count + math.pi / 2
    return 0.028 * math.cos(angle), 0.028 * math.sin(angle)


def build_spec(scene: SceneSpec | None, objects: Mapping[str, ObjectSpec], geometry: BenchGeometry,
               options: SceneOptions | None = None) -> tuple[mujoco.MjSpec, BuiltScene]:
    """The MjSpec of a scene (not yet compiled) and the builder's bookkeeping."""
    options = options or SceneOptions()
    robot_xml = Path(options.robot_xml) if options.robot_xml else default_arm_model()
    spec = _load_arm(robot_xml)
    substeps = physics_substeps(options.fps, options.max_timestep_s)
    spec.option.timestep = 1.0 / (options.fps * substeps)
    _set_rendering(spec, options)
    _add_room_and_table(spec, geometry, options)
    bowl_xy = _add_bowl(spec, objects, geometry)
    _add_cameras(spec, geometry, robot_xml)
    built = BuiltScene(model=None, scene=scene, shapes={}, specs={}, substeps=substeps, placed={})
    if scene is not None:
        _add_objects(spec, scene, objects, geometry, bowl_xy, built)
    return spec, built


def _load_arm(robot_xml: Path) -> mujoco.MjSpec:
    """The arm's MJCF, checked to have the follower's joints."""
    if not robot_xml.is_file():
        raise DataError(robot_xml, "the SO-101 twin model is missing", field="robot_xml",
                        allowed="a MuJoCo MJCF file (default hardware/sim/so101.xml)")
    spec = mujoco.MjSpec.from_file(str(robot_xml))
    missing = [j for j in JOINTS if spec.joint(j) is None]
    if missing:
        raise DataError(robot_xml, f"joints {missing} are missing", field="joint",
                        allowed=", ".join(JOINTS))
    return spec


def _set_rendering(spec: mujoco.MjSpec, options: SceneOptions) -> None:
    """Cheap by default (no shadows, no multisampling); a grey gradient sky."""
    spec.visual.quality.shadowsize = 2048 if options.shadows else 0
    spec.visual.quality.offsamples = int(options.offsamples)
    spec.visual.global_.offwidth = int(options.offscreen_size[0])
    spec.visual.global_.offheight = int(options.offscreen_size[1])
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.headlight.diffuse = [0.45, 0.45, 0.45]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]

    sky = spec.add_texture()
    sky.name, sky.type, sky.builtin = "sky", mujoco.mjtTexture.mjTEXTURE_SKYBOX, mujoco.mjtBuiltin.mjBUILTIN_GRADIENT
    sky.rgb1, sky.rgb2, sky.width, sky.height = [0.42, 0.42, 0.44], [0.16, 0.16, 0.18], 32, 192


def _add_room_and_table(spec: mujoco.MjSpec, geometry: BenchGeometry, options: SceneOptions) -> None:
    """A windowless room: a grey floor under the table, one overhead light; the table top at z = 0."""
    world = spec.worldbody
    floor = world.add_geom()
    floor.name, floor.type = "floor", mujoco.mjtGeom.mjGEOM_PLANE
    floor.size, floor.pos = [3.0, 3.0, 0.1], [0.0, 0.0, -0.75]
    floor.rgba, floor.contype, floor.conaffinity = [0.32, 0.32, 0.34, 1.0], 0, 0
    light = world.add_light()
    light.name, light.pos, light.dir = "ceiling", [0.3, 0.0, 1.5], [0.0, 0.0, -1.0]
    light.diffuse, light.specular = [0.55, 0.55, 0.55], [0.05, 0.05, 0.05]
    light.castshadow = bool(options.shadows)

    tx, ty = (v / 100.0 for v in geometry.table_size_cm)
    x_near = -0.08
    table = world.add_geom()
    table.name, table.type = "table", mujoco.mjtGeom.mjGEOM_BOX
    table.size = [tx / 2, ty / 2, TABLE_THICKNESS_M / 2]
    table.pos = [x_near + tx / 2, 0.0, -TABLE_THICKNESS_M / 2]
    table.rgba = [0.78, 0.70, 0.58, 1.0]
    table.contype, table.conaffinity, table.condim = TABLE_CONTYPE, 1, 3   # see hardware/sim/so101.xml
    table.friction = [0.9, 0.005, 0.0001]


def _add_bowl(spec: mujoco.MjSpec, objects: Mapping[str, ObjectSpec],
             geometry: BenchGeometry) -> tuple[float, float]:
    """The fixed bowl at its hardware/bench.yaml pose; returns its centre (m)."""
    bx, by = (v / 100.0 for v in geometry.bowl_xy_cm)
    bowl_spec = objects.get("bowl")
    bowl_rgba = shapes.colours(bowl_spec)[0] if bowl_spec is not None else (0.82, 0.86, 0.90, 1.0)
    bowl = spec.worldbody.add_body()
    bowl.name, bowl.pos = "bowl", [bx, by, 0.0]
    _add_parts(bowl, shapes.bowl_parts(geometry.bowl_inner_radius_cm / 100.0,
                                       geometry.bowl_outer_radius_cm / 100.0,
                                       geometry.bowl_height_cm / 100.0, bowl_rgba),
               "bowl", friction=(0.8, 0.005, 0.0001), movable=False)
    floor_geom = spec.geom("bowl:bowl_floor")
    floor_geom.contype = TABLE_CONTYPE          # like the table top: fingertips pass, objects rest
    return bx, by


def _add_cameras(spec: mujoco.MjSpec, geometry: BenchGeometry, robot_xml: Path) -> None:
    """The fixed cameras from hardware/bench.yaml; the gripper camera is the MJCF's own."""
    for name in CAMERAS:
        cam_geo = geometry.cameras.get(name, {})
        if cam_geo.get("mount", "fixed") == "gripper" or name == "wrist":
            cam = spec.camera(name)
            if cam is None:
                raise DataError(robot_xml, f"the gripper camera {name!r} is missing", field="camera")
            if "fovy_deg" in cam_geo:
                cam.fovy = float(cam_geo["fovy_deg"])
            continue
        if "pos_cm" not in cam_geo or "look_at_cm" not in cam_geo:
            raise DataError("hardware/bench.yaml", f"camera {name!r} needs pos_cm and look_at_cm",
                            field=f"cameras.{name}")
        cam = spec.worldbody.add_camera()
        cam.name = name
        pos = np.asarray(cam_geo["pos_cm"], float) / 100.0
        cam.pos = pos.tolist()
        cam.quat = look_at_quat(pos, np.asarray(cam_geo["look_at_cm"], float) / 100.0).tolist()
        cam.fovy = float(cam_geo.get("fovy_deg", 55.0))


def _add_objects(spec: mujoco.MjSpec, scene: SceneSpec, objects: Mapping[str, ObjectSpec],
                 geometry: BenchGeometry, bowl_xy: tuple[float, float], built: BuiltScene) -> None:
    """Each placed object as a free body of its twin shape, recorded in `built` (shapes, specs, placed)."""
    bx, by = bowl_xy
    seen: set[str] = set()
    in_bowl = [p for p in scene.objects if p.location == "bowl"]
    for placed_obj in scene.objects:
        oid = placed_obj.object_id
        if oid not in objects:
            raise DataError(f"scene {scene.scene_id}", f"unknown object {oid!r}", field="objects",
                            allowed=sorted(k for k in objects if k != "bowl"))
        if oid in seen:
            raise DataError(f"scene {scene.scene_id}", f"object {oid!r} is placed twice",
                            field="objects")
        seen.add(oid)
        ospec = objects[oid]
        shape = shapes.shape_for(ospec, placed_obj.state)
        quat = yaw_quat(math.radians(placed_obj.yaw_deg))
        if shape.flipped:
            quat = _quat_mul(quat, FLIP_QUAT)
        if placed_obj.location == "bowl":
            # the spec's point when it lies inside the bowl, else an even spread around the centre
            px, py = placed_obj.x_cm / 100.0, placed_obj.y_cm / 100.0
            if math.hypot(px - bx, py - by) > geometry.bowl_inner_radius_cm / 100.0 - 0.01:
                dx, dy = _bowl_slot(in_bowl.index(placed_obj), len(in_bowl))
                px, py = bx + dx, by + dy
            pos = np.array([px, py, shapes.BOWL_FLOOR_TOP_M + shape.half_height_m + 0.002])
        else:
            pos = np.array([placed_obj.x_cm / 100.0, placed_obj.y_cm / 100.0,
                            shape.half_height_m + DROP_CLEARANCE_M])
        body = spec.worldbody.add_body()
        body.name = BODY_PREFIX + oid
        body.pos, body.quat = pos.tolist(), quat.tolist()
        joint = body.add_freejoint()
        joint.name = BODY_PREFIX + oid
        _add_parts(body, shape.parts, BODY_PREFIX + oid, friction=shape.friction, movable=True,
                   mass=shape.mass_kg, condim=shape.condim)
        built.shapes[oid] = shape
        built.specs[oid] = ospec
        built.placed[oid] = pos


def compile_scene(scene: SceneSpec | None, objects: Mapping[str, ObjectSpec], geometry: BenchGeometry,
                  options: SceneOptions | None = None) -> BuiltScene:
    """Compile a scene (None: the empty bench) into a model with its bookkeeping."""
    spec, built = build_spec(scene, objects, geometry, options)
    try:
        built.model = spec.compile()
    except Exception as exc:  # mujoco raises ValueError with the compiler's message
        where = f"scene {scene.scene_id}" if scene is not None else "empty bench"
        raise DataError(where, f"the twin model does not compile: {exc}") from exc
    return built


def build_scene(scene: SceneSpec, objects: Mapping[str, ObjectSpec], geometry: BenchGeometry,
                options: SceneOptions | None = None) -> mujoco.MjModel:
    """The compiled MuJoCo model of one scene specification (objects at their specified poses)."""
    return compile_scene(scene, objects, geometry, options).model
