"""The meeting point of the run's Session (main thread) and the web server (its own thread).

The session publishes what the bench page shows (`set_phase`) and waits for the operator's answer
(`wait_command`); the page polls `snapshot()` and posts commands. Stop requests bypass the queue:
they go straight to the rollout's StopControl, which the control loop polls every tick.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

PHASES = ("starting", "camera_check", "reset", "homing", "rollout", "stopping", "score", "ended")
# Which commands each phase accepts (anything else is refused with a clear message).
COMMANDS = {"camera_check": ("confirm_cameras", "end"), "reset": ("ready", "end"), "score": ("score", "leave")}


class CommandRefused(ValueError):
    pass


class BenchChannel:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._state: dict[str, Any] = {"phase": "starting"}
        self._version = 0
        self._commands: deque[tuple[str, dict]] = deque()
        self.controls = None           # the running rollout's StopControl, else None
        self.live: dict[str, Any] = {}  # cheap live numbers (alignment) merged into snapshots
        self.live_fn = None             # during a rollout: () -> dict of loop statistics
        self.stop_log: list[dict] = []

    # ---- session side ------------------------------------------------------------------------
    def set_phase(self, phase: str, **data: Any) -> None:
        if phase not in PHASES:
            raise ValueError(f"phase {phase!r} (allowed: {', '.join(PHASES)})")
        with self._cond:
            self._version += 1
            self._state = {"phase": phase, "version": self._version, **data}
            self._commands.clear()  # an answer meant for an earlier question must not answer this one
            self._cond.notify_all()

    def update(self, **data: Any) -> None:
        with self._cond:
            self._state.update(data)

    def wait_command(self, timeout: float) -> tuple[str, dict] | None:
        with self._cond:
            if not self._commands:
                self._cond.wait(timeout)
            return self._commands.popleft() if self._commands else None

    # ---- web side ----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            state = dict(self._state)
        state.update(self.live)
        fn = self.live_fn
        if fn is not None:
            state["live"] = fn()
        return state

    def post(self, command: str, payload: dict | None = None, version: int | None = None) -> None:
        with self._cond:
            phase = self._state["phase"]
            if command not in COMMANDS.get(phase, ()):
                raise CommandRefused(f"command {command!r} is not accepted now (phase {phase}; accepted: "
                                     f"{', '.join(COMMANDS.get(phase, ())) or 'none'})")
            if version is not None and version != self._version:
                raise CommandRefused(f"the page showed an older state (version {version}, now {self._version}); reload")
            self._commands.append((command, dict(payload or {})))
            self._cond.notify_all()

    def stop(self, kind: str, source: str) -> bool:
        """Stop / abort / e-stop the running rollout now; False when none is running."""
        controls = self.controls
        if controls is None:
            return False
        controls.request(kind, source)
        self.stop_log.append({"kind": kind, "source": source, "wall": time.time()})
        return True
