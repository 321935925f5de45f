"""Scene builder: any scene spec compiles, every object lands where its spec puts it, states show."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from spabench.errors import DataError
from spabench.sim import shapes
from spabench.sim.evaluator import in_bowl
from spabench.sim.scene_builder import build_scene, compile_scene
from spabench.sim.world import SimWorld
from spabench.suite.model import Cell, Goal, Instructions, ObjectState, PlacedObject, SceneSpec


def scene_of(*placed, scene_id="t-001") -> SceneSpec:
    return SceneSpec(scene_id=scene_id, task="object_state", condition="id", cell=Cell("open", "white_cup"),
                     withheld=False, objects=tuple(placed), instructions=Instructions("test"),
                     goal=Goal("in_bowl", (placed[0].object_id,)))


def inventory_scenes(objects) -> list[SceneSpec]:
    """Every inventory object, four per scene on a spread-out grid, states varied."""
    ids = sorted(o for o in objects if o != "bowl")
    spots = [(14.0, -6.0), (14.0, 12.0), (27.0, -4.0), (27.0, 14.0)]
    states = [ObjectState("open", "upright"), ObjectState("closed", "upright"),
              ObjectState("open", "upside_down"), ObjectState("closed", "upside_down")]
    out = []
    for k in range(0, len(ids), 4):
        placed = []
        for i, oid in enumerate(ids[k:k + 4]):
            spec = objects[oid]
            state = states[(k // 4 + i) % 4] if spec.has_lid else ObjectState()
            x, y = spots[i]
            placed.append(PlacedObject(oid, x, y, yaw_deg=30.0 * i, state=state))
        out.append(scene_of(*placed, scene_id=f"inventory-{k // 4:02d}"))
    return out


def test_every_inventory_object_lands_within_1cm(world_data):
    objects, geometry = world_data
    world = SimWorld(objects, geometry)
    scenes = inventory_scenes(objects)
    assert sum(len(s.objects) for s in scenes) == len(objects) - 1
    for scene in scenes:
        world.load(scene, arm_units=[0, -45, -45, 90, 0, 10], settle_s=0.5)
        poses = world.object_poses()
        for placed in scene.objects:
            pos, quat = poses[placed.object_id]
            err = math.hypot(pos[0] * 100 - placed.x_cm, pos[1] * 100 - placed.y_cm)
            assert err < 1.0, f"{placed.object_id} is {err:.2f} cm from its spec"
            assert 0.0 < pos[2] < 0.1                          # resting on the table
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, quat)
            up = rot[8]
            if placed.state.pose == "upside_down":
                assert up < -0.9, placed.object_id
            else:
                assert up > 0.9, placed.object_id
            heading = math.degrees(math.atan2(rot[3], rot[0]))
            if shapes.shape_for(objects[placed.object_id]).symmetric is False:
                d = (heading - placed.yaw_deg + 180) % 360 - 180
                assert abs(d) < 3.0 or abs(abs(d) - 180) < 3.0, (placed.object_id, heading)


def test_suite_scene_objects_land_within_1cm(suite):
    world = SimWorld(suite.objects, suite.geometry)
    picked = [suite.scenes_for(task, "id")[0] for task in suite.tasks]
    picked.append(suite.scenes_for("counting", "ood")[0])          # objects starting in the bowl
    for scene in picked:
        world.load(scene, arm_units=[0, -45, -45, 90, 0, 10], settle_s=0.5)
        poses = world.object_poses()
        for placed in scene.objects:
            pos = poses[placed.object_id][0] * 100.0
            assert math.hypot(pos[0] - placed.x_cm, pos[1] - placed.y_cm) < 1.0, (scene.scene_id, placed)
            assert in_bowl(pos, suite.geometry) == (placed.location == "bowl"), (scene.scene_id, placed)


def test_objects_in_the_bowl_without_a_bowl_point_are_spread_inside(world_data):
    objects, geometry = world_data
    scene = scene_of(*(PlacedObject(o, 0.0, 0.0, location="bowl") for o in ("red_block", "blue_block", "green_block")))
    world = SimWorld(objects, geometry)
    world.load(scene, arm_units=[0, -45, -45, 90, 0, 10], settle_s=0.5)
    xy = [p[:2] * 100 for p, _ in world.object_poses().values()]
    for p in world.object_poses().values():
        assert in_bowl(p[0] * 100, geometry)
    assert min(np.linalg.norm(a - b) for i, a in enumerate(xy) for b in xy[i + 1:]) > 3.0


def test_lid_and_pose_change_the_model(world_data):
    objects, geometry = world_data
    open_up = compile_scene(scene_of(PlacedObject("white_cup_a", 20, 5, state=ObjectState("open", "upright"))),
                            objects, geometry)
    closed = compile_scene(scene_of(PlacedObject("white_cup_a", 20, 5, state=ObjectState("closed", "upright"))),
                           objects, geometry)
    names = lambda m: {m.geom(i).name for i in range(m.ngeom)}  # noqa: E731
    assert "obj:white_cup_a:lid" in names(closed.model) and "obj:white_cup_a:lid" not in names(open_up.model)
    assert closed.model.ngeom == open_up.model.ngeom + 1


def test_twin_sizes_keep_the_size_ranks(world_data):
    objects, _ = world_data
    ranked = sorted((o for o in objects.values() if o.size_rank), key=lambda o: o.size_rank)
    assert len(ranked) >= 4
    volumes = [np.prod(shapes.shape_for(o).dims_m) for o in ranked]
    longest = [max(shapes.shape_for(o).dims_m) for o in ranked]
    assert volumes == sorted(volumes) and len(set(volumes)) == len(volumes)
    assert longest == sorted(longest)
    for o in objects.values():   # every object fits between the jaws (aperture ~7 cm)
        if o.object_id != "bowl":
            assert shapes.shape_for(o).grasp_width_m < 0.062, o.object_id


def test_colours_follow_the_inventory(world_data):
    objects, geometry = world_data
    model = build_scene(scene_of(PlacedObject("red_block", 15, 0), PlacedObject("blue_pen", 25, 8, yaw_deg=90)),
                        objects, geometry)
    red = model.geom("obj:red_block:body").rgba
    blue = model.geom("obj:blue_pen:barrel").rgba
    assert red[0] > 0.6 and red[1] < 0.2 and red[2] < 0.2
    assert blue[2] > 0.6 and blue[0] < 0.2


def test_bad_scene_is_one_clear_error(world_data):
    objects, geometry = world_data
    with pytest.raises(DataError, match=r"scene t-001.*unknown object 'purple_unicorn'.*allowed"):
        build_scene(scene_of(PlacedObject("purple_unicorn", 15, 0)), objects, geometry)
    with pytest.raises(DataError, match="placed twice"):
        build_scene(scene_of(PlacedObject("red_block", 15, 0), PlacedObject("red_block", 20, 0)), objects, geometry)
