"""A policy server speaking openpi's websocket protocol, for the harness's own policies.

Serves any `infer_fn(observation: dict) -> {"actions": array, ...}`: the twin's scripted stand-in
and local LeRobot checkpoints. Wire behaviour follows openpi's server: binary msgpack frames with
the openpi numpy codec, no compression, no size limit; the metadata map is the first frame of
every connection; each reply gains `server_timing.infer_ms`; an exception is answered with a text
frame holding the traceback, then the connection is closed (code 1011); `GET /healthz` answers 200.
Additions: an optional `Authorization: Api-Key <key>` check (HTTP 401 otherwise; /healthz stays
open) and `{"endpoint": "reset"}` (declared in the metadata as `"endpoints": ["infer", "reset"]`),
answered with a binary `{"endpoint": "reset", "ok": true}`. A request may carry
`"endpoint": "infer"`; it is removed before `infer_fn` sees the observation.

Connections are served on threads; `infer_fn` and `reset_fn` are never called concurrently.
"""

from __future__ import annotations

import hmac
import http
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from spabench.policy.codec_openpi import Packer, unpackb

log = logging.getLogger(__name__)

__all__ = ["OpenPiServer", "DEFAULT_MAX_FRAME_BYTES"]

# Two native 640x480 RGB frames (2 x 921,600 bytes, msgpack-numpy raw) plus state and prompt, with room.
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024


class OpenPiServer:
    def __init__(self, infer_fn: Callable[[dict], dict], metadata: dict | None = None,
                 host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
                 supports_reset: bool = True, reset_fn: Callable[[], Any] | None = None,
                 max_frame_bytes: int | None = None) -> None:
        self.infer_fn = infer_fn
        self.reset_fn = reset_fn
        self.host = host
        self.port = int(port)
        self.api_key = api_key or None
        self.supports_reset = supports_reset
        # a request frame larger than this closes the connection (1009) before it is buffered
        self.max_frame_bytes = int(max_frame_bytes or DEFAULT_MAX_FRAME_BYTES)
        self.metadata = dict(metadata or {})
        if supports_reset:
            self.metadata.setdefault("endpoints", ["infer", "reset"])
        self._policy_lock = threading.Lock()
        self._server: Any = None   # websockets' sync Server once listening (imported lazily)
        self._thread: threading.Thread | None = None
        self.requests = 0
        self.resets = 0

    # -- lifecycle -------------------------------------------------------------------------
    def listen(self) -> OpenPiServer:
        """Bind and listen (port 0 picks a free port, then `.port` holds it); idempotent."""
        if self._server is None:
            from websockets.sync.server import serve

            self._server = serve(self._handle, self.host, self.port, compression=None,
                                 max_size=self.max_frame_bytes, process_request=self._process_request, close_timeout=1.0)
            self.port = self._server.socket.getsockname()[1]
        return self

    def start(self) -> OpenPiServer:
        """Listen and serve on a background thread; returns once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        self.listen()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=f"openpi-server-{self.port}")
        self._thread.start()
        log.info("openpi server listening on ws://%s:%d", self.host, self.port)
        return self

    def serve_forever(self) -> None:
        """Listen and serve on this thread until Ctrl-C or `stop()` from another thread."""
        self.listen()
        log.info("openpi server listening on ws://%s:%d", self.host, self.port)
        try:
            self._server.serve_forever()
        except KeyboardInterrupt:
            log.info("openpi server interrupted")
        finally:
            self.stop()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None

    def __enter__(self) -> OpenPiServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- HTTP side -------------------------------------------------------------------------
    def _process_request(self, connection, request):
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.api_key is not None:
            given = request.headers.get("Authorization", "")
            expected = f"Api-Key {self.api_key}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                log.warning("refused a connection without the right API key")
                return connection.respond(http.HTTPStatus.UNAUTHORIZED, "missing or wrong API key\n")
        return None

    # -- websocket side --------------------------------------------------------------------
    def _handle(self, connection) -> None:
        from websockets.exceptions import ConnectionClosed

        packer = Packer()
        try:
            connection.send(packer.pack(self.metadata))
            while True:
                frame = connection.recv()
                try:
                    reply = self._answer(frame)
                except Exception as exc:
                    text = traceback.format_exc()
                    log.error("policy request failed:\n%s", text)
                    if self.api_key is None:  # an unauthenticated client gets one line, not our internals
                        text = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
                    connection.send(text)
                    connection.close(code=1011, reason="Internal server error. "
                                     "Traceback included in previous frame.")
                    return
                connection.send(packer.pack(reply))
        except ConnectionClosed:
            return

    def _answer(self, frame: Any) -> dict:
        if isinstance(frame, str):
            raise ValueError("expected a binary msgpack frame, got a text frame")
        request = unpackb(frame)
        if not isinstance(request, dict):
            raise ValueError(f"expected a msgpack map, got {type(request).__name__}")
        endpoint = request.pop("endpoint", "infer")
        if endpoint == "reset":
            if not self.supports_reset:
                raise ValueError("this server does not support {'endpoint': 'reset'}")
            with self._policy_lock:
                if self.reset_fn is not None:
                    self.reset_fn()
                self.resets += 1
            return {"endpoint": "reset", "ok": True}
        if endpoint != "infer":
            raise ValueError(f"unknown endpoint {endpoint!r} (allowed: infer, reset)")
        with self._policy_lock:
            start = time.monotonic()
            result = self.infer_fn(request)
            infer_ms = (time.monotonic() - start) * 1000.0
            self.requests += 1
        if isinstance(result, np.ndarray):
            result = {"actions": result}
        if not isinstance(result, dict):
            raise TypeError(f"infer_fn returned {type(result).__name__}; expected a dict with 'actions'")
        result = dict(result)
        timing = dict(result.get("server_timing") or {})
        timing["infer_ms"] = infer_ms
        result["server_timing"] = timing
        return result
