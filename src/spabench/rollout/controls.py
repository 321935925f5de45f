"""Stop requests reaching a running rollout: operator keys, Ctrl-C, or code.

Any thread (the key reader, a signal handler, a test) calls `request(kind)`; the control loop polls
`pending()` once per tick. The strongest request wins: estop > abort > operator_stop.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

STOP_REQUESTS: tuple[str, ...] = ("operator_stop", "abort", "estop")
_RANK = {kind: i for i, kind in enumerate(STOP_REQUESTS)}


class StopControl:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kind: str | None = None
        self._source = ""
        self.sigint_count = 0
        self._interruptible = False

    def request(self, kind: str, source: str = "code") -> None:
        if kind not in _RANK:
            raise ValueError(f"stop request {kind!r} (allowed: {', '.join(STOP_REQUESTS)})")
        with self._lock:
            if self._kind is None or _RANK[kind] > _RANK[self._kind]:
                self._kind, self._source = kind, source

    def pending(self) -> tuple[str, str] | None:
        """(kind, source) of the strongest request so far, or None."""
        with self._lock:
            return None if self._kind is None else (self._kind, self._source)

    def clear(self) -> None:
        with self._lock:
            self._kind, self._source = None, ""

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
