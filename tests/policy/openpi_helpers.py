"""Shared pieces for the openpi client / server / broker tests (real servers on loopback)."""

from __future__ import annotations

import threading
import time

import numpy as np

from spabench.bench.bench import Observation
from spabench.policy.card import PolicyCard
from spabench.serve.openpi_server import OpenPiServer

Obs = Observation  # the real record the bench hands the policy side


def make_obs(marker: float = 1.0, height: int = 480, width: int = 640) -> Obs:
    state = np.array([marker, -60.0, 60.0, 60.0, 0.0, 10.0])
    images = {cam: np.full((height, width, 3), 200, np.uint8) for cam in ("middle", "wrist", "left")}
    return Obs(time.monotonic(), state, images)


def make_card(port: int, **overrides) -> PolicyCard:
    fields = dict(name="test_openpi", protocol="openpi", host="127.0.0.1", port=port, horizon=10,
                  execute_steps=8, timeout_s=3.0, image_size=[224, 224],
                  cameras={"observation/image": "middle", "observation/wrist_image": "wrist"})
    fields.update(overrides)
    return PolicyCard(**fields)


def chunk_for(request: dict, horizon: int = 10) -> np.ndarray:
    """The server's answer: row i is the state with shoulder_pan replaced by marker*100 + i."""
    state = np.asarray(request["observation/state"], dtype=np.float64)
    rows = np.tile(state, (horizon, 1))
    rows[:, 0] = state[0] * 100.0 + np.arange(horizon)
    return rows.astype(np.float32)


class RecordingPolicy:
    """infer_fn that records requests; optional per-prompt behaviour for fault injection."""

    def __init__(self, horizon: int = 10) -> None:
        self.horizon = horizon
        self.requests: list[dict] = []
        self.arrivals = 0
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()

    def __call__(self, request: dict) -> dict:
        with self.lock:
            self.arrivals += 1
            self.requests.append(request)
        prompt = request.get("prompt", "")
        if prompt == "explode":
            raise ValueError("boom: the policy exploded")
        if prompt == "nan":
            actions = chunk_for(request, self.horizon)
            actions[3, 2] = np.nan
            return {"actions": actions}
        if prompt == "narrow":
            return {"actions": chunk_for(request, self.horizon)[:, :5]}
        if prompt == "text":
            return {"actions": np.array([["a"] * 6] * self.horizon)}
        if prompt == "no_actions":
            return {"action": chunk_for(request, self.horizon)}
        if prompt.startswith("gated"):
            self.gate.wait(10.0)
        return {"actions": chunk_for(request, self.horizon)}


def start_server(policy=None, **kwargs) -> tuple[OpenPiServer, RecordingPolicy]:
    policy = policy or RecordingPolicy()
    server = OpenPiServer(policy, metadata={"policy": "recording", "action_horizon": policy.horizon},
                          host="127.0.0.1", port=0, **kwargs)
    return server.start(), policy


def wait_until(predicate, timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)
