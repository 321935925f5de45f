"""The pre-rollout assist a policy card may declare (protocol: one policy got a fixed ~10 mm upward
displacement before execution). Done before the timer starts and recorded as an event.

The lift is APPROXIMATE: a joint-space move of shoulder_lift alone, by the angle that raises a point
`LIFT_REACH_MM` from the shoulder axis by `dz_mm` (small-angle arc: dtheta = dz / reach). It does
not solve inverse kinematics, so the gripper also moves slightly in x and tilts by the same angle;
for a 10 mm lift that is about 3 degrees.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from spabench.suite.vocabulary import JOINTS

LIFT_JOINT = "shoulder_lift"
LIFT_REACH_MM = 200.0     # typical shoulder-to-gripper horizontal reach of an SO-101 over the workspace
LIFT_DIRECTION = -1.0     # sign of a shoulder_lift change that raises the forearm (LeRobot degrees)
RAMP_S = 0.5
SETTLE_S = 0.3


@dataclass
class AssistOutcome:
    kind: str
    dz_mm: float
    joint: str
    delta_deg: float
    start_state: list[float]
    end_state: list[float]


def lift_delta_deg(dz_mm: float, reach_mm: float = LIFT_REACH_MM) -> float:
    return LIFT_DIRECTION * math.degrees(dz_mm / reach_mm)


def run_assist(bench, assist: dict, control_hz: float, emit) -> AssistOutcome | None:
    """Execute the card's assist through `bench.act` (so the safety envelope applies)."""
    if not assist:
        return None
    if assist.get("type") != "lift":
        raise ValueError(f"pre_rollout_assist.type {assist.get('type')!r} (allowed: lift)")
    dz = float(assist["dz_mm"])
    start = np.asarray(bench.observe().state, dtype=float)
    delta = lift_delta_deg(dz)
    j = JOINTS.index(LIFT_JOINT)
    period = 1.0 / control_hz
    n = max(1, int(round(RAMP_S * control_hz)))
    for k in range(1, n + 1):
        target = start.copy()
        target[j] += delta * k / n
        result = bench.act(target)
        for clamp in getattr(result, "clamps", []) or []:
            emit("clamp", {"phase": "assist", **_clamp_dict(clamp)})
        time.sleep(period)
    time.sleep(SETTLE_S)
    end = np.asarray(bench.observe().state, dtype=float)
    outcome = AssistOutcome("lift", dz, LIFT_JOINT, delta, start.tolist(), end.tolist())
    emit("pre_rollout_assist", {"type": "lift", "dz_mm": dz, "joint": LIFT_JOINT, "delta_deg": round(delta, 4),
                                "approximate": True, "start_state": outcome.start_state,
                                "end_state": outcome.end_state})
    return outcome


def _clamp_dict(clamp) -> dict:
    if isinstance(clamp, dict):
        return dict(clamp)
    if hasattr(clamp, "__dataclass_fields__"):
        from dataclasses import asdict

        return {k: (v.item() if hasattr(v, "item") else v) for k, v in asdict(clamp).items()}
    return {"clamp": str(clamp)}
