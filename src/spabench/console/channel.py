"""The meeting point of the run's Session (main thread) and the web server (its own thread).

The session publishes what the bench page shows (`set_phase`) and waits for the operator's answer
(`wait_command`); the page polls `snapshot()` and posts commands. Stop requests bypass the queue:
they go straight to the session's StopControl (attached for the session's whole life), which the
control loop polls every tick and a motion going home every step. An e-stop is taken at any moment
and also wakes the session if it is waiting for the operator; stop and abort end a rollout, so
they are refused when none is running.

Every request of a bench page (its state polls, commands, stop requests; console.app calls `beat`)
is a heartbeat: `last_beat` is when the latest one arrived, which the session's dead-man
(WebOperator) watches during homing and rollouts. Each page polls with its own id, so the closing
console can wait until every page that is watching fetched the end (wait_seen).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

PHASES = ("starting", "camera_check", "reset", "homing", "rollout", "stopping", "score", "cooling", "estop_cause",
          "ended")
MAX_PAGES = 64   # pages whose last fetch is remembered (ids come from the pages)
# Which commands each phase accepts (anything else is refused with a clear message).
COMMANDS = {"camera_check": ("confirm_cameras", "end"), "reset": ("ready", "end"), "score": ("score", "leave"),
            "estop_cause": ("estop_cause",)}


class CommandRefused(ValueError):
    pass


class NoSession(CommandRefused):
    """No run session is attached to this console (the `spabench console` review server)."""


class BenchChannel:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._state: dict[str, Any] = {"phase": "starting"}
        self._version = 0
        self._commands: deque[tuple[str, dict]] = deque()
        # the session's StopControl (rollout.controls; duck-typed here) while a session is attached, else None
        self.controls: Any = None
        self.live: dict[str, Any] = {}  # cheap live numbers (alignment) merged into snapshots
        self.live_fn: Callable[[], dict] | None = None   # during a rollout: () -> dict of loop statistics
        self.stop_log: list[dict] = []
        self._seen: dict[str, tuple[int, float]] = {}  # page id -> (version, monotonic time) of its last poll
        self.last_beat = float("-inf")    # time.monotonic() of the latest request from a bench page

    # ---- session side ------------------------------------------------------------------------
    def set_phase(self, phase: str, **data: Any) -> None:
        if phase not in PHASES:
            raise ValueError(f"phase {phase!r} (allowed: {', '.join(PHASES)})")
        with self._cond:
            self._version += 1
            self._state = {"phase": phase, "version": self._version, **data}
            self._commands.clear()  # an answer meant for an earlier question must not answer this one
            self._cond.notify_all()

    @property
    def phase(self) -> str:
        with self._cond:
            return self._state["phase"]

    def update(self, **data: Any) -> None:
        with self._cond:
            self._state.update(data)

    def wait_command(self, timeout: float) -> tuple[str, dict] | None:
        with self._cond:
            if not self._commands:
                self._cond.wait(timeout)
            return self._commands.popleft() if self._commands else None

    def wait_seen(self, timeout: float, watching_s: float) -> bool:
        """Before the console stops: wait (up to `timeout`) until every page that fetched anything in
        the last `watching_s` fetched the current state, so each shows why the session ended; at once
        False when none did (nobody is watching). A page polls every 0.2 s, seconds apart on a loaded
        machine."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                watching = [v for v, at in self._seen.values() if now - at <= watching_s]
                if watching and min(watching) >= self._version:
                    return True
                if not watching or now >= deadline:
                    return False
                self._cond.wait(min(0.1, deadline - now))

    def beat(self) -> None:
        """A bench page's request arrived (see the module doc)."""
        self.last_beat = time.monotonic()

    def watched(self, within_s: float) -> bool:
        """True when some page fetched the state in the last `within_s` seconds."""
        with self._cond:
            now = time.monotonic()
            return any(now - at <= within_s for _, at in self._seen.values())

    # ---- web side ----------------------------------------------------------------------------
    def snapshot(self, page: str | None = None) -> dict[str, Any]:
        """The state to show; `page`: the id of the page that fetched it (see wait_seen), None when the
        console itself reads it."""
        with self._cond:
            state = dict(self._state)
            if page is not None:
                self.last_beat = now = time.monotonic()
                if page not in self._seen and len(self._seen) >= MAX_PAGES:   # forget the longest silent
                    del self._seen[min(self._seen, key=lambda v: self._seen[v][1])]
                self._seen[page] = (self._version, now)
                self._cond.notify_all()   # wakes wait_seen
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

    def estopped(self) -> bool:
        controls = self.controls
        return controls is not None and controls.estopped()

    def stop(self, kind: str, source: str) -> None:
        """E-stop now, whatever the session is doing; stop / abort the running rollout. Raises
        NoSession without a session, CommandRefused for stop / abort outside a rollout."""
        controls = self.controls
        if controls is None:
            raise NoSession("no session is attached to this console (start one with "
                            "`spabench run campaign=DIR operator=web`)")
        if kind == "estop":
            controls.request(kind, source)  # first: nothing may delay it
        with self._cond:
            phase = self._state["phase"]
            if kind != "estop":
                if phase != "rollout":
                    raise CommandRefused(f"no rollout is running (phase {phase}): {kind} ends a rollout; "
                                         "the e-stop works at any time")
                controls.request(kind, source)
            self.stop_log.append({"kind": kind, "source": source, "wall": time.time(), "phase": phase})
            self._cond.notify_all()  # a session waiting for the operator sees the e-stop at once
