"""The meeting point of the run's Session (main thread) and the web server (its own thread).

The session publishes what the bench page shows (`set_phase`) and waits for the operator's answer
(`wait_command`); the page polls `snapshot()` and posts commands. Stop requests bypass the queue:
they go straight to the session's StopControl (attached for the session's whole life), which the
control loop polls every tick and a motion going home every step. An e-stop is taken at any moment
and also wakes the session if it is waiting for the operator; stop and abort end a rollout, so
they are refused when none is running.

Two pages (tabs) may answer one question, e.g. both score the attempt: the session takes the first
answer it accepts (`accept`); every other command for that question is refused with CommandConflict
naming that answer, never dropped unsaid. A page's command waits (`outcome`) until the session
accepted it, refused it (`update(error=...)`) or took another answer.

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
from dataclasses import dataclass, field
from typing import Any

PHASES = ("starting", "camera_check", "reset", "homing", "rollout", "stopping", "score", "cooling", "estop_cause",
          "ended")
MAX_PAGES = 64   # pages whose last fetch is remembered (ids come from the pages)
MAX_TICKETS = 64  # commands whose verdict is kept for the page that posted them
# Which commands each phase accepts (anything else is refused with a clear message).
COMMANDS = {"camera_check": ("confirm_cameras", "end"), "reset": ("ready", "end"), "score": ("score", "leave"),
            "estop_cause": ("estop_cause",)}


class CommandRefused(ValueError):
    pass


class NoSession(CommandRefused):
    """No run session is attached to this console (the `spabench console` review server)."""


class CommandConflict(CommandRefused):
    """Another page answered this question first; `answer` is that answer (what, by whom, when)."""

    def __init__(self, message: str, answer: dict[str, Any]):
        super().__init__(message)
        self.answer = answer


def answer_text(answer: dict[str, Any]) -> str:
    """One answer as a person reads it: "Ada scored failure (grasp_failure) at 15:02:11"."""
    payload, who, at = answer.get("payload") or {}, answer.get("rater") or "the operator", answer.get("at", "")
    if answer.get("command") == "score":
        what = "success" if payload.get("success") else \
            "failure" + (f" ({payload['failure_mode']})" if payload.get("failure_mode") else "")
        note = f" with the note “{payload['note']}”" if payload.get("note") else ""
        return f"{who} scored {what}{note} at {at}"
    return f"{who} answered {answer.get('command')!r} at {at}"


@dataclass
class _Ticket:
    """One command a page posted: pending until the session accepts or refuses it."""

    command: str
    payload: dict
    verdict: str | None = None     # "accepted" | "refused" | "conflict"
    error: str = ""
    answer: dict[str, Any] = field(default_factory=dict)


class BenchChannel:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._state: dict[str, Any] = {"phase": "starting"}
        self._version = 0
        self._commands: deque[int] = deque()            # tickets, in the order the pages posted them
        self._tickets: dict[int, _Ticket] = {}
        self._next_ticket = 0
        self._taken: int | None = None                   # the ticket the session read last, until it decides
        self._answers: dict[int, dict[str, Any]] = {}    # question (version) -> the answer the session accepted
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
            # a command meant for the earlier question must not answer this one: each is told why
            answer = self._answers.get(self._version)
            for ticket in ([self._taken] if self._taken is not None else []) + list(self._commands):
                if answer is not None:
                    self._conflict(ticket, answer)
                else:
                    self._decide(ticket, "refused", f"not done: the session moved on to {phase} before "
                                                    "it took this command")
            self._taken = None
            self._commands.clear()
            self._version += 1
            self._state = {"phase": phase, "version": self._version, **data}
            self._cond.notify_all()

    @property
    def phase(self) -> str:
        with self._cond:
            return self._state["phase"]

    def update(self, **data: Any) -> None:
        """Merge `data` into the shown state; an `error` refuses the command the session read last."""
        with self._cond:
            self._state.update(data)
            if data.get("error") and self._taken is not None:
                self._decide(self._taken, "refused", str(data["error"]))
                self._taken = None
                self._cond.notify_all()   # wakes the page's request waiting in `outcome`

    def wait_command(self, timeout: float) -> tuple[str, dict] | None:
        with self._cond:
            if not self._commands:
                self._cond.wait(timeout)
            if not self._commands:
                return None
            self._taken = self._commands.popleft()
            ticket = self._tickets[self._taken]
            return ticket.command, dict(ticket.payload)

    def accept(self, rater: str | None = None) -> None:
        """The session takes the command it read last as the answer to the current question (call
        before moving on); `rater`: who answered (default: the state's rater). Every other command
        for this question is then refused, naming this answer."""
        with self._cond:
            if self._taken is None:
                return
            ticket = self._tickets[self._taken]
            answer = {"command": ticket.command, "payload": dict(ticket.payload),
                      "rater": rater or self._state.get("rater") or "", "at": time.strftime("%H:%M:%S")}
            self._answers[self._version] = answer
            while len(self._answers) > MAX_TICKETS:
                del self._answers[min(self._answers)]
            self._decide(self._taken, "accepted")
            self._taken = None
            for other in self._commands:
                self._conflict(other, answer)
            self._commands.clear()
            self._cond.notify_all()

    def _decide(self, ticket: int, verdict: str, error: str = "", answer: dict | None = None) -> None:
        t = self._tickets.get(ticket)
        if t is not None and t.verdict is None:
            t.verdict, t.error, t.answer = verdict, error, dict(answer or {})

    def _conflict(self, ticket: int, answer: dict[str, Any]) -> None:
        self._decide(ticket, "conflict", f"not saved: another page answered first: {answer_text(answer)}", answer)

    def outcome(self, ticket: int, timeout: float) -> bool:
        """Wait until the session decided on `ticket`: True when it accepted the command, False when
        it has not decided within `timeout` (the command stays queued). Raises CommandConflict (another
        page's answer was taken) or CommandRefused (the session's reason)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (t := self._tickets.get(ticket)) is not None and t.verdict is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            if t is None:   # forgotten (MAX_TICKETS newer ones): no verdict to give
                return False
            del self._tickets[ticket]
        if t.verdict == "conflict":
            raise CommandConflict(t.error, t.answer)
        if t.verdict == "refused":
            raise CommandRefused(t.error)
        return True

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

    def post(self, command: str, payload: dict | None = None, version: int | None = None) -> int:
        """Queue a page's command; returns its ticket (see `outcome`). A command for a question
        another page already answered is refused with CommandConflict naming that answer."""
        with self._cond:
            answer = self._answers.get(version) if version is not None else None
            if answer is not None and version != self._version:
                raise CommandConflict(f"not saved: another page answered first: {answer_text(answer)}", answer)
            phase = self._state["phase"]
            if command not in COMMANDS.get(phase, ()):
                raise CommandRefused(f"command {command!r} is not accepted now (phase {phase}; accepted: "
                                     f"{', '.join(COMMANDS.get(phase, ())) or 'none'})")
            if version is not None and version != self._version:
                raise CommandRefused(f"the page showed an older state (version {version}, now {self._version}); reload")
            self._next_ticket += 1
            ticket = self._next_ticket
            self._tickets[ticket] = _Ticket(command, dict(payload or {}))
            decided = [k for k, t in self._tickets.items() if t.verdict is not None]
            for k in decided[:max(0, len(self._tickets) - MAX_TICKETS)]:   # verdicts nobody waited for
                del self._tickets[k]
            self._commands.append(ticket)
            self._cond.notify_all()
            return ticket

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
