"""The twin's privileged scene state: what only a simulator can know, as a plain dict.

The sim bench puts it in Observation.extras["privileged"]; the scripted policy card forwards it
as `observation/privileged`. Plain Python types only (str, float, bool, list, dict, None), so it
crosses any wire codec. It deliberately carries no goal and no target: the scripted stand-in
policy must ground the instruction itself.

Schema "spabench.sim.privileged/1":
  schema       "spabench.sim.privileged/1"
  t_sim_s      sim time (s) since the scene loaded
  scene        null, or {scene_id, task, condition, cell: {concept, argument, key}, withheld,
               instructions: {spatial, direct, paraphrase_spatial, paraphrase_direct}}
  objects      list, one per scene object:
               {object_id, family, category, display_name, colour, size_cm [l,w,h], size_rank,
                novel, state: {lid, pose}, pos_cm [x,y,z], quat_wxyz [4], yaw_deg, in_bowl,
                lift_cm (height above its start), twin_dims_cm [l,w,h],
                grasp: {offset_cm [3] (and alt_offsets_cm, other places to hold it) and axis [3]
                        in the object frame, width_cm, symmetric}}
               pose is "upright" / "upside_down" from the current orientation ("tipped" when
               lying on its side), null for objects that cannot invert.
  bowl         {pos_cm [x,y,z], inner_radius_cm, outer_radius_cm, height_cm}
  gripper      {tcp_cm [3], tool_axis [3], jaw_axis [3],
                contacts: {fixed: [ids], moving: [ids], arm: [ids]}, holding: id or null}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from spabench.sim.evaluator import in_bowl
from spabench.sim.world import SimWorld, yaw_deg_of

SCHEMA = "spabench.sim.privileged/1"


def _pose_word(quat, can_invert: bool) -> str | None:
    if not can_invert:
        return None
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(quat, float))
    up = rot[8]                     # z component of the object's z axis
    return "upright" if up > 0.5 else "upside_down" if up < -0.5 else "tipped"


def _round(values, nd: int = 3) -> list[float]:
    return [round(float(v), nd) for v in values]


@dataclass(frozen=True)
class Snapshot:
    """Copies of what the payload is built from, taken in microseconds at one instant; the payload
    itself (dicts and rounding, most of the cost) is built from it later, and only when asked for,
    possibly in another thread while the physics runs on."""

    t_sim_s: float
    built: Any
    poses: dict
    initial: dict
    contacts: dict
    tcp: np.ndarray
    rot: np.ndarray
    geometry: Any


def snapshot(world: SimWorld) -> Snapshot:
    poses = world.object_poses()
    tcp, rot = world.tcp_pose()
    return Snapshot(float(world.data.time), world.built, poses, getattr(world, "initial_poses", poses),
                    world.gripper_contacts(), tcp, rot, world.geometry)


def privileged_state(world: SimWorld) -> dict:
    """The privileged payload (schema above) for the world's current state."""
    return payload_of(snapshot(world))


def payload_of(snap: Snapshot) -> dict:
    """The privileged payload (schema above) of a snapshot."""
    built = snap.built
    scene = built.scene if built else None
    poses = snap.poses
    contacts = snap.contacts
    holding = sorted(set(contacts["fixed"]) & set(contacts["moving"]))
    initial = snap.initial
    objects = []
    for placed in (scene.objects if scene is not None else ()):
        oid = placed.object_id
        spec, shape = built.specs[oid], built.shapes[oid]
        pos, quat = poses[oid]
        pos_cm = pos * 100.0
        objects.append({
            "object_id": oid,
            "family": spec.family,
            "category": spec.category,
            "display_name": spec.display_name,
            "colour": spec.colour,
            "size_cm": _round(spec.size_cm, 2),
            "size_rank": spec.size_rank,
            "novel": bool(spec.novel),
            "state": {"lid": placed.state.lid,
                      "pose": _pose_word(quat, spec.can_invert)},
            "pos_cm": _round(pos_cm),
            "quat_wxyz": _round(quat, 5),
            "yaw_deg": round(yaw_deg_of(quat), 2),
            "in_bowl": bool(in_bowl(pos_cm, snap.geometry)) and oid not in holding,
            "lift_cm": round(float(pos_cm[2] - initial[oid][0][2] * 100.0), 3),
            "twin_dims_cm": _round(np.asarray(shape.dims_m) * 100.0),
            "grasp": {"offset_cm": _round(np.asarray(shape.grasp_offset_m) * 100.0),
                      "alt_offsets_cm": [_round(np.asarray(o) * 100.0) for o in shape.alt_grasp_offsets_m],
                      "axis": _round(shape.grasp_axis, 4),
                      "width_cm": round(shape.grasp_width_m * 100.0, 3),
                      "symmetric": bool(shape.symmetric)},
        })
    tcp, rot = snap.tcp, snap.rot
    g = snap.geometry
    payload = {
        "schema": SCHEMA,
        "t_sim_s": round(snap.t_sim_s, 4),
        "scene": None,
        "objects": objects,
        "bowl": {"pos_cm": [float(g.bowl_xy_cm[0]), float(g.bowl_xy_cm[1]), 0.0],
                 "inner_radius_cm": float(g.bowl_inner_radius_cm),
                 "outer_radius_cm": float(g.bowl_outer_radius_cm),
                 "height_cm": float(g.bowl_height_cm)},
        "gripper": {"tcp_cm": _round(tcp * 100.0), "tool_axis": _round(rot[:, 0], 4),
                    "jaw_axis": _round(rot[:, 2], 4), "contacts": contacts,
                    "holding": holding[0] if holding else None},
    }
    if scene is not None:
        ins = scene.instructions
        payload["scene"] = {
            "scene_id": scene.scene_id, "task": scene.task, "condition": scene.condition,
            "cell": {"concept": scene.cell.concept, "argument": scene.cell.argument,
                     "key": scene.cell.key},
            "withheld": bool(scene.withheld),
            "instructions": {"spatial": ins.spatial, "direct": ins.direct,
                             "paraphrase_spatial": ins.paraphrase_spatial,
                             "paraphrase_direct": ins.paraphrase_direct},
        }
    return payload
