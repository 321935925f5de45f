"""Fault knobs, reference actions and a threaded HTTP server runner shared by the test servers."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

N_JOINTS = 6


@dataclass
class Faults:
    """What the next action replies do wrong. Tests flip these between requests.

    nan: put NaN in the actions; wrong_shape: drop one action column; delay_s: sleep before
    answering; error: answer the protocol's error reply with this text; die_after: serve this many
    action requests, then stop answering for good (server gone mid-episode); unhealthy: status /
    health endpoints report not-ok.
    """

    nan: bool = False
    wrong_shape: bool = False
    delay_s: float = 0.0
    error: str | None = None
    die_after: int | None = None
    unhealthy: bool = False


def reference_actions(state: Any, horizon: int, dim: int = N_JOINTS) -> np.ndarray:
    """(horizon, dim) float32: step t, joint j -> state[j] + (t + 1) * (j + 1) / 10."""
    state = np.asarray(state, dtype=np.float64).reshape(-1)
    steps = np.arange(1, horizon + 1, dtype=np.float64)[:, None]
    joints = np.arange(1, dim + 1, dtype=np.float64)[None, :]
    base = np.zeros(dim)
    base[: min(dim, state.size)] = state[:dim]
    return (base[None, :] + steps * joints / 10.0).astype(np.float32)


def apply_faults(actions: np.ndarray, faults: Faults) -> np.ndarray:
    """The reply array after the shape/NaN knobs."""
    out = np.array(actions, copy=True)
    if faults.nan:
        out[0, 0] = np.nan
    if faults.wrong_shape:
        out = out[..., :-1]
    return out


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout test) leaves a broken pipe: expected, not worth a traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackHTTPServer:
    """A ThreadingHTTPServer on 127.0.0.1, port 0, serving `handler_cls` in a daemon thread.

    The handler reaches the owning test server through `self.server.owner`.
    """

    def __init__(self, handler_cls: type[BaseHTTPRequestHandler], owner: Any, port: int = 0) -> None:
        self.httpd = _QuietServer(("127.0.0.1", port), handler_cls)
        self.httpd.daemon_threads = True
        self.httpd.owner = owner  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self.alive = False

    def start(self) -> None:
        self._thread.start()
        self.alive = True

    def stop(self) -> None:
        """Stop listening and close the socket: later connections are refused."""
        if not self.alive:
            return
        self.alive = False
        self.httpd.shutdown()
        self.httpd.server_close()

    def die_soon(self) -> None:
        """Stop from inside a handler (shutdown() would deadlock there)."""
        threading.Thread(target=self.stop, daemon=True).start()


class JsonHandler(BaseHTTPRequestHandler):
    """Helpers for small JSON endpoints; quiet logs."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_bytes(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, obj: Any) -> None:
        self.send_bytes(status, json.dumps(obj).encode("utf-8"))


def sleep_unless_stopped(seconds: float, stopped: threading.Event) -> None:
    """Sleep up to `seconds`, waking early when the server is being stopped."""
    if seconds > 0:
        stopped.wait(seconds)
    time.sleep(0)
