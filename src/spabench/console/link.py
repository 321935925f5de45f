"""The local channel between the session (control process) and its console process: one Unix
socket pair, pickled tuples (multiprocessing.connection), both ends ours.

Console -> session: calls on the session's BenchChannel (`snapshot`, `post`, `outcome`, `stop`)
answered by id, and one-way heartbeats (`beat`). Session -> console: the answers, and what the
pages show besides the channel's state (`ctx`: the rater, the trial's reference images, the
rendered scene reference).

The session's side reads the socket on its own thread at normal priority and acts on a stop
request as it reads it (BenchChannel.stop latches an e-stop on the StopControl before anything
else), so the e-stop's path is: the page's request, the console's handler, one socket write, this
thread, the latch. Only `outcome` (which waits up to seconds for the session's verdict) runs on a
thread of its own, so nothing queues behind it. The console process's side is ChannelProxy, which
answers to the BenchChannel calls console.app makes.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

from spabench.console.channel import BenchChannel, CommandConflict, CommandRefused, NoSession

CALL_TIMEOUT_S = 10.0   # a call the session has not answered by then fails (the page says so and retries)
CALLS = ("snapshot", "post", "outcome", "stop")


class _Sender:
    def __init__(self, conn: Connection):
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, message: tuple) -> bool:
        try:
            with self._lock:
                self.conn.send(message)
            return True
        except (OSError, ValueError, EOFError):   # the other side is gone
            return False


class ControlLink(_Sender):
    """The session's end: serves the console process's calls on `channel` (see the module doc)."""

    def __init__(self, conn: Connection, channel: BenchChannel, on_message: Callable[[tuple], None] | None = None):
        super().__init__(conn)
        self.channel = channel
        self.on_message = on_message     # anything else the console process says (e.g. "ready")
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spabench-console-link", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    return
                kind = message[0]
                if kind == "beat":
                    self.channel.beat()
                elif kind == "call":
                    _, call_id, method, args = message
                    if method == "outcome":   # waits for the session's verdict: never in the reader's way
                        threading.Thread(target=self._answer, args=(call_id, method, args), daemon=True).start()
                    else:
                        self._answer(call_id, method, args)
                elif self.on_message is not None:
                    self.on_message(message)
        finally:
            self.closed.set()

    def _answer(self, call_id: int, method: str, args: tuple) -> None:
        if method not in CALLS:
            self.send(("reply", call_id, False, ("error", f"unknown call {method!r}", None)))
            return
        try:
            value = getattr(self.channel, method)(*args)
        except CommandConflict as exc:
            self.send(("reply", call_id, False, ("conflict", str(exc), exc.answer)))
        except NoSession as exc:
            self.send(("reply", call_id, False, ("nosession", str(exc), None)))
        except CommandRefused as exc:
            self.send(("reply", call_id, False, ("refused", str(exc), None)))
        except Exception as exc:  # a bug on the session's side: the page gets a 500 saying what
            self.send(("reply", call_id, False, ("error", f"{type(exc).__name__}: {exc}", None)))
        else:
            self.send(("reply", call_id, True, value))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        self._thread.join(5.0)


class ChannelProxy(_Sender):
    """The console process's end: the BenchChannel calls console.app makes, answered by the session."""

    def __init__(self, conn: Connection, on_context: Callable[[dict], None] | None = None):
        super().__init__(conn)
        self.on_context = on_context
        self.closed = threading.Event()      # the session's end is gone
        self.ending = threading.Event()      # ... or it said "quit": the server stops, calls still answered
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future] = {}
        self._lock_w = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="spabench-console-proxy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    return
                if message[0] == "reply":
                    _, call_id, ok, value = message
                    with self._lock_w:
                        fut = self._waiting.pop(call_id, None)
                    if fut is not None:
                        fut.set_result((ok, value))
                elif message[0] == "ctx" and self.on_context is not None:
                    self.on_context(message[1])
                elif message[0] == "quit":
                    self.ending.set()
        finally:
            self.closed.set()
            self.ending.set()
            with self._lock_w:
                waiting, self._waiting = self._waiting, {}
            for fut in waiting.values():
                fut.set_result((False, ("refused", "the session has ended", None)))

    def submit(self, method: str, *args: Any) -> Future:
        """Send the call now (from any thread, the server's event loop included: one socket write)
        and return the future of its answer (`answer` turns it into the value or the exception)."""
        call_id = next(self._ids)
        fut: Future = Future()
        with self._lock_w:
            self._waiting[call_id] = fut
        if self.closed.is_set() or not self.send(("call", call_id, method, args)):
            with self._lock_w:
                self._waiting.pop(call_id, None)
            fut.set_result((False, ("refused", "the session has ended", None)))
        return fut

    @staticmethod
    def answer(result: tuple[bool, Any]) -> Any:
        ok, value = result
        if ok:
            return value
        kind, text, answer = value
        if kind == "conflict":
            raise CommandConflict(text, answer)
        if kind == "nosession":
            raise NoSession(text)
        if kind == "refused":
            raise CommandRefused(text)
        raise RuntimeError(text)

    def _call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        fut = self.submit(method, *args)
        try:
            return self.answer(fut.result(timeout))
        except TimeoutError:
            raise CommandRefused(f"the session did not answer within {timeout:g} s; try again") from None

    async def call_async(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        """`_call` for the server's event loop: sent at once, awaited without a thread."""
        import asyncio

        fut = self.submit(method, *args)
        try:
            return self.answer(await asyncio.wait_for(asyncio.wrap_future(fut), timeout))
        except TimeoutError:
            raise CommandRefused(f"the session did not answer within {timeout:g} s; try again") from None

    # ---- what console.app calls on a BenchChannel --------------------------------------------
    def beat(self) -> None:
        self.send(("beat",))

    def snapshot(self, page: str | None = None) -> dict[str, Any]:
        return self._call("snapshot", page)

    def post(self, command: str, payload: dict | None = None, version: int | None = None) -> int:
        return self._call("post", command, payload, version)

    def outcome(self, ticket: int, timeout: float) -> bool:
        return self._call("outcome", ticket, timeout, timeout=timeout + CALL_TIMEOUT_S)

    def stop(self, kind: str, source: str) -> None:
        self._call("stop", kind, source)
