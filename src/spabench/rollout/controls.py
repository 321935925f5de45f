"""Stop requests of a run session: operator keys, console buttons, Ctrl-C, or code.

Any thread (the key reader, the console's web thread, a signal handler, a test) calls
`request(kind)`; the control loop polls `pending()` once per tick and waits for its next tick in
`wait()`, which a request ends at once (a stop acts when it arrives, not up to a period later), and
blocking motions (going home) poll `estopped()` once per step. The strongest request wins: estop > console_lost > abort > operator_stop.

operator_stop and abort end one rollout, so `clear()` (before the next one) forgets them. An e-stop
is latched for the life of the control: whenever it was pressed (scene reset, homing, rollout,
scoring), `clear()` keeps it, the session sees it at its next check and ends with the arm held.
`stage` is what the session is doing; each e-stop records it (the ledger says when it came).

`console_lost` (the browser console's dead-man: no heartbeat from the bench page during homing or a
rollout) latches the same way: the arm holds, nothing moves again, the session ends. `estopped()` and
`estop()` answer for both latching stops; `estop()["kind"]` says which one it was.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STOP_REQUESTS: tuple[str, ...] = ("operator_stop", "abort", "console_lost", "estop")
# Stops that latch for the life of the control: the arm holds where it is (no homing) and the session ends.
LATCHING_STOPS: tuple[str, ...] = ("console_lost", "estop")
_RANK = {kind: i for i, kind in enumerate(STOP_REQUESTS)}


class StopControl:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kind: str | None = None
        self._source = ""
        self.sigint_count = 0
        self._interruptible = False
        self.stage = ""                       # what the session is doing now (set by the session and the loop)
        self._estop: dict | None = None       # the first latching stop: kind, source, stage, wall time
        self._estop_at: float | None = None   # time.monotonic() when it was latched
        self._arrived = threading.Event()     # set while a request is pending: ends wait()

    def request(self, kind: str, source: str = "code", detail: dict | None = None) -> None:
        """`detail`: facts kept with a latching stop (the ledger's event gets them)."""
        if kind not in _RANK:
            raise ValueError(f"stop request {kind!r} (allowed: {', '.join(STOP_REQUESTS)})")
        with self._lock:
            if self._kind is None or _RANK[kind] > _RANK[self._kind]:
                self._kind, self._source = kind, source
            if kind in LATCHING_STOPS and self._estop is None:
                self._estop = {**(detail or {}), "kind": kind, "source": source, "during": self.stage,
                               "wall_time": time.time()}
                self._estop_at = time.monotonic()
            self._arrived.set()   # under the lock: a clear() racing it must not leave it set with nothing pending

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, less if a stop is requested meanwhile; True when one is pending."""
        return self._arrived.wait(seconds)

    def pending(self) -> tuple[str, str] | None:
        """(kind, source) of the strongest request so far, or None."""
        with self._lock:
            return None if self._kind is None else (self._kind, self._source)

    def estopped(self) -> bool:
        """True once a latching stop (an e-stop, or the console's dead-man) was requested (cheap: polled
        every step of a blocking motion)."""
        return self._estop is not None

    def estop(self) -> dict | None:
        """The first latching stop (kind, source, during = the stage it came in, wall_time), or None."""
        with self._lock:
            return None if self._estop is None else dict(self._estop)

    def estop_latched_at(self) -> float | None:
        """time.monotonic() at which the first e-stop was latched: what a reaction is measured from."""
        return self._estop_at

    def estop_message(self) -> str:
        """What the operator reads after an e-stop or a lost console (terminal output and the bench page
        alike)."""
        info = self.estop() or {}
        during = info.get("during") or "the session"
        if info.get("kind") == "console_lost":
            return (f"CONSOLE LOST during {during}: {info.get('source', '?')}; the arm holds where it is; "
                    "session stopped. Check the bench, then resume with the same command and keep the bench "
                    "page open")
        return (f"E-STOP ({info.get('source', '?')}) during {during}: the arm "
                "holds where it is; session stopped. Check the bench, then resume with the same command")

    def clear(self) -> None:
        """Forget operator_stop / abort before the next rollout; a latching stop stays."""
        with self._lock:
            if self._estop is None:
                self._kind, self._source = None, ""
                self._arrived.clear()
            elif self._kind is None or _RANK[self._kind] < _RANK[self._estop["kind"]]:
                self._kind, self._source = self._estop["kind"], self._estop["source"]

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Inside: Ctrl-C raises KeyboardInterrupt at once (used around blocking motions)."""
        self._interruptible = True
        try:
            yield
        finally:
            self._interruptible = False

    @contextmanager
    def sigint_aborts(self) -> Iterator[None]:
        """While inside: Ctrl-C requests an abort (a second one an e-stop) instead of raising
        KeyboardInterrupt in the middle of a motion command. Only the main thread can install it."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame) -> None:
            self.sigint_count += 1
            self.request("abort" if self.sigint_count == 1 else "estop", "ctrl-c")
            if self._interruptible:  # a blocking motion (going home): stop it now
                raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
