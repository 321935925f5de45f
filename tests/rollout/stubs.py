"""Stand-ins for the loop's unit tests.

StubBench and ScriptedClient are stand-ins ON PURPOSE: these tests check the loop's own logic
(stop conditions, EMA, events, pacing, SIGINT) in milliseconds, with fault injection at exact
ticks. The real stack (SO101Follower on the emulated Feetech bus, replay cameras, an openpi server
on loopback) is exercised end to end in tests/integration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from spabench.bench.bench import Observation
from spabench.bench.errors import BenchFault
from spabench.bench.safety import Clamp
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault

Obs = Observation  # the real record the bench hands the rollout loop


@dataclass
class Act:
    sent: np.ndarray
    clamps: list


class StubBench:
    def __init__(self, cameras=("wrist", "middle"), max_step=5.0, fail_observe_at=None, fault=None):
        self.state = np.array([0.0, -60.0, 60.0, 60.0, 0.0, 10.0])
        self.cameras = cameras
        self.max_step = max_step
        self.sent: list[np.ndarray] = []
        self.calls: list[str] = []
        self.observes = 0
        self.fail_observe_at = fail_observe_at
        self.fault = fault or BenchFault("bus silent", component="bus")

    def observe(self):
        self.observes += 1
        if self.fail_observe_at is not None and self.observes >= self.fail_observe_at:
            raise self.fault
        images = {c: np.zeros((8, 8, 3), np.uint8) for c in self.cameras}
        return Obs(time.monotonic(), self.state.copy(), images)

    def act(self, target):
        target = np.asarray(target, float)
        step = np.clip(target - self.state, -self.max_step, self.max_step)
        sent = self.state + step
        clamps = [Clamp(j, float(target[i]), float(sent[i]), "max_relative_target")
                  for i, j in enumerate(("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex",
                                         "wrist_roll", "gripper")) if sent[i] != target[i]]
        self.state = sent
        self.sent.append(sent.copy())
        self.calls.append("act")
        return Act(sent, clamps)

    def hold(self):
        self.calls.append("hold")

    def go_home(self, should_stop=None):
        self.calls.append("go_home")

    # the Bench's optional twin methods, as a real bench answers them (spabench.bench.bench.Bench)
    camera_fps: dict[str, float] = {}   # none given: the loop takes the control rate

    def begin_episode(self):
        self.calls.append("begin_episode")


class ScriptedClient(PolicyClient):
    """Deterministic in-process client: chunk n moves the shoulder_pan to 10 * (n + 1) degrees."""

    def __init__(self, card, fail_after=None, delay_s=0.0):
        self.card, self.metadata = card, {}
        self.n = 0
        self.fail_after = fail_after
        self.delay_s = delay_s
        self.resets = 0

    def connect(self):
        return {}

    def reset(self):
        self.resets += 1

    def infer(self, obs, instruction):
        if self.fail_after is not None and self.n >= self.fail_after:
            raise PolicyFault("server went away")
        t = time.monotonic()
        time.sleep(self.delay_s)
        actions = np.tile(np.asarray(obs.state, float), (self.card.horizon, 1))
        actions[:, 0] = 10.0 * (self.n + 1)
        self.n += 1
        now = time.monotonic()
        return ActionChunk(actions[: self.card.execute_steps], self.n - 1, t, now, now - t, 1.5)

    def close(self):
        pass
