"""Shared pieces for the GR00T / MolmoAct2 / VLA-0 / LeRobot-gRPC client tests."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np

from spabench.bench.bench import Observation
from spabench.policy.card import PolicyCard

# A distinct fill value per camera, so a server-side frame tells which camera it came from.
CAMERA_FILL = {"wrist": 11, "middle": 22, "left": 33, "right": 44, "overhead": 55}


def make_obs(state=None, height: int = 48, width: int = 64) -> Observation:
    """A real bench Observation with small constant frames (value = CAMERA_FILL[camera])."""
    if state is None:
        state = [10.0, -20.0, 30.0, -40.0, 5.0, 60.0]
    images = {cam: np.full((height, width, 3), fill, np.uint8) for cam, fill in CAMERA_FILL.items()}
    return Observation(t=time.monotonic(), state=np.asarray(state, dtype=np.float64), images=images)


def make_card(protocol: str, port: int, **overrides) -> PolicyCard:
    fields = dict(name=f"test_{protocol}", protocol=protocol, host="127.0.0.1", port=port,
                  horizon=16, execute_steps=8, timeout_s=10.0, extra={"connect_attempts": 1})
    fields.update(overrides)
    return PolicyCard(**fields)


def expected_actions(state, horizon: int, groups=None) -> np.ndarray:
    """The test servers' reference actions, laid out in joint order (groups: [[joint indices]])."""
    from tests.support.servers.common import reference_actions

    state = np.asarray(state, dtype=np.float64)
    if groups is None:
        return reference_actions(state, horizon).astype(np.float64)
    out = np.zeros((horizon, 6))
    for idx in groups:
        out[:, idx] = reference_actions(state[idx], horizon, len(idx))
    return out


def wait_until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def interrupt_main_when(predicate, timeout_s: float = 30.0) -> threading.Thread:
    """Deliver a real SIGINT (Ctrl-C) to the main thread as soon as `predicate()` holds (e.g. the
    server has the request), not after a fixed delay a loaded machine may spend before the request
    is even sent. The timeout only bounds a hang: then no SIGINT is sent and the test fails."""
    main_id = threading.main_thread().ident

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                signal.pthread_kill(main_id, signal.SIGINT)
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread
