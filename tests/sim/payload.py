"""A privileged payload straight from a scene spec (no physics): for grounding tests."""

from __future__ import annotations

import math

from spabench.sim.evaluator import in_bowl
from spabench.sim.shapes import shape_for


def payload_from_spec(scene, objects, geometry) -> dict:
    out = []
    for p in scene.objects:
        spec = objects[p.object_id]
        shape = shape_for(spec, p.state)
        z = shape.half_height_m * 100.0
        pos = [p.x_cm, p.y_cm, z]
        yaw = math.radians(p.yaw_deg)
        out.append({
            "object_id": p.object_id, "family": spec.family, "category": spec.category,
            "display_name": spec.display_name, "colour": spec.colour, "size_cm": list(spec.size_cm),
            "size_rank": spec.size_rank, "novel": spec.novel,
            "state": {"lid": p.state.lid, "pose": p.state.pose},
            "pos_cm": pos, "quat_wxyz": [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)],
            "yaw_deg": p.yaw_deg, "in_bowl": p.location == "bowl" or in_bowl(pos, geometry),
            "lift_cm": 0.0, "twin_dims_cm": [d * 100 for d in shape.dims_m],
            "grasp": {"offset_cm": [v * 100 for v in shape.grasp_offset_m],
                      "alt_offsets_cm": [[v * 100 for v in o] for o in shape.alt_grasp_offsets_m],
                      "axis": list(shape.grasp_axis),
                      "width_cm": shape.grasp_width_m * 100, "symmetric": shape.symmetric},
        })
    g = geometry
    return {"schema": "spabench.sim.privileged/1", "t_sim_s": 0.0,
            "scene": {"scene_id": scene.scene_id, "task": scene.task, "condition": scene.condition},
            "objects": out,
            "bowl": {"pos_cm": [g.bowl_xy_cm[0], g.bowl_xy_cm[1], 0.0], "inner_radius_cm": g.bowl_inner_radius_cm,
                     "outer_radius_cm": g.bowl_outer_radius_cm, "height_cm": g.bowl_height_cm},
            "gripper": {"tcp_cm": [0, 0, 20], "contacts": {"fixed": [], "moving": [], "arm": []}, "holding": None}}
