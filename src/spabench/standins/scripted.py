"""The twin's scripted stand-in policy. NOT a VLA: a hand-written controller with privileged state.

It exists so the harness can run end to end without a learned policy: served over the openpi
websocket protocol like any real policy, it reads the prompt, the joint state and the twin's
privileged scene state (`observation/privileged`, which only the sim bench provides and only the
scripted policy cards forward), grounds the instruction (spabench.standins.grounding: compositional or
memorising), and returns joint-target chunks from a closed-loop pick-and-place planner
(spabench.standins.planner). It never sees the scene's goal or targets.

Request keys: `observation/state` (6 joints, bench units), `prompt`, `observation/privileged`
(spabench.sim.privileged schema). Reply: `actions` (horizon, 6) joint targets in bench units and
`scripted` (a small dict: decision, phase, grounded) for the logs.
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

import numpy as np

from spabench.standins.grounding import MODES, Decision, Grounder
from spabench.standins.planner import Job, Planner
from spabench.suite.vocabulary import JOINTS

log = logging.getLogger(__name__)

STATE_KEYS = ("observation/state", "state")
PRIVILEGED_KEYS = ("observation/privileged", "privileged")
PROMPT_KEYS = ("prompt", "instruction", "task")


def _first(obs: dict, keys: tuple[str, ...], what: str):
    for key in keys:
        if key in obs and obs[key] is not None:
            return obs[key]
    raise ValueError(f"scripted policy: the request has no {what} (looked for {', '.join(keys)}; "
                     f"got {', '.join(sorted(obs))})")


def _load_suite(tasks_root: str, hardware_root: str):
    from spabench.paths import resolve
    from spabench.suite.loader import load_suite

    return load_suite(resolve(tasks_root), resolve(hardware_root))


class ScriptedPolicy:
    """Scripted stand-in policy for the MuJoCo twin (not a VLA); `infer(obs) -> {"actions": ...}`."""

    def __init__(self, mode: str = "compositional", seed: int = 0, grasp_noise_cm: float = 0.0,
                 horizon: int = 30, suite=None, tasks_root: str = "tasks", hardware_root: str = "hardware",
                 robot_xml: str | None = None):
        if mode not in MODES:
            raise ValueError(f"scripted policy: mode {mode!r} (allowed: {', '.join(MODES)})")
        self.mode = mode
        self.seed = int(seed)
        self.grasp_noise_cm = float(grasp_noise_cm)
        self.horizon = int(horizon)
        self.suite = suite if suite is not None else _load_suite(tasks_root, hardware_root)
        from spabench.standins.kinematics import ArmKinematics

        self.kin = ArmKinematics(robot_xml)
        self.episode_key: tuple | None = None
        self.decision: Decision | None = None
        self.planner: Planner | None = None
        self._last_t = -1.0
        self.episodes = 0

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "policy": f"scripted_{self.mode}",
            "kind": "scripted_stand_in",
            "is_vla": False,
            "description": ("Scripted stand-in policy for the spabench MuJoCo twin; NOT a VLA. It reads "
                            "privileged simulator state and plans pick-and-place motions by inverse kinematics."),
            "mode": self.mode,
            "seed": self.seed,
            "grasp_noise_cm": self.grasp_noise_cm,
            "horizon": self.horizon,
            "action": "absolute joint targets, degrees (gripper 0..100)",
            "joints": list(JOINTS),
            "needs": ["observation/state", "prompt", "observation/privileged"],
        }

    def reset(self) -> None:
        """Forget the episode; the next request starts a new one."""
        self.episode_key = None
        self.decision = None
        self.planner = None

    def _rng(self, key: tuple) -> np.random.Generator:
        """Chance picks depend on the seed and the episode (scene, prompt), not on episode order."""
        return np.random.default_rng([self.seed, zlib.crc32(repr(key).encode())])

    def _start_episode(self, key: tuple, prompt: str, state: np.ndarray, privileged: dict) -> None:
        rng = self._rng(key)
        grounder = Grounder(self.suite, self.mode, rng)
        self.decision = grounder.decide(prompt, privileged)
        envelope = self.suite.geometry.arm_envelope   # the bench's Cartesian floor: stay above it
        self.planner = Planner(self.kin, horizon=self.horizon, grasp_noise_cm=self.grasp_noise_cm, rng=rng,
                               floor_cm=envelope.table_z_cm + envelope.table_margin_cm)
        self.planner.reset(home_units=state)
        self.planner.set_jobs(self._jobs(self.decision))
        self.episode_key = key
        self.episodes += 1
        log.debug("scripted %s: %r -> %s %s (%s)", self.mode, prompt, self.decision.action,
                 list(self.decision.targets), self.decision.reason)

    @staticmethod
    def _jobs(decision: Decision) -> list[Job]:
        if decision.action == "to_bowl":
            return [Job(t, alternatives=decision.alternatives) for t in decision.targets]
        if decision.action == "to_table":
            return [Job(t, "table", xy, alternatives=decision.alternatives)
                    for t, xy in zip(decision.targets, decision.place_xy_cm, strict=True)]
        if decision.action == "relation":
            return [Job(t, "relation", reference=decision.reference, direction=decision.direction)
                    for t in decision.targets]
        return []

    def infer(self, obs: dict) -> dict:
        state = np.asarray(_first(obs, STATE_KEYS, "joint state"), dtype=np.float64).reshape(-1)
        if state.shape != (len(JOINTS),):
            raise ValueError(f"scripted policy: state has shape {state.shape}; expected ({len(JOINTS)},)")
        privileged = _first(obs, PRIVILEGED_KEYS, "privileged scene state (only the sim bench provides "
                            "it, and only the scripted policy cards forward it)")
        prompt = str(_first(obs, PROMPT_KEYS, "prompt"))
        scene_id = (privileged.get("scene") or {}).get("scene_id")
        t_sim = float(privileged.get("t_sim_s", 0.0))
        key = (scene_id, prompt)
        if self.planner is None or key != self.episode_key or t_sim < self._last_t:
            self._start_episode(key, prompt, state, privileged)
        self._last_t = t_sim
        planner, d = self.planner, self.decision
        if planner is None or d is None:
            raise RuntimeError("scripted policy: the episode did not start")   # _start_episode sets both
        actions = planner.chunk(state, privileged)
        return {
            "actions": actions.astype(np.float64),
            "scripted": {"action": d.action, "targets": list(d.targets), "grounded": bool(d.grounded),
                         "cell": d.cell or "", "phase": planner.phase.name if planner.phase else "",
                         "reason": d.reason},
        }
