"""Client for openpi's websocket policy servers (pi0, pi0.5) and the harness's own `serve` servers.

Protocol (see /policies/openpi.md): binary websocket frames, no compression, no size limit; the
server's first frame is its metadata; then one request frame (the observation) per reply frame
(`{"actions": (horizon, action_dim), "server_timing": {"infer_ms": ...}}`). A text frame is a
server-side traceback followed by a close. What the stock client lacks and this one adds:
a per-request receive timeout, reconnect with backoff, an API-key header, an explicit reset per
episode and a stale-reply guard: the protocol has no request ids, so any request that does not
complete cleanly (timeout, Ctrl-C, bad frame) drops the connection, and a late reply can never be
read as the answer to the next request.

Reset: a fresh connection, or `{"endpoint": "reset"}` when the server's metadata declares it
(`"endpoints": [..., "reset"]` or `"supports_reset": true`; the RoboArena dialect). In endpoint
mode every inference request also carries `"endpoint": "infer"`, as that dialect requires.
Card `extra.reset` forces `reconnect` or `endpoint` (default `auto`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.adapters import decode_action_chunk, openpi_request, server_timing_ms
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault
from spabench.policy.codec_openpi import Packer, unpackb

log = logging.getLogger(__name__)

__all__ = ["OpenPiClient", "declares_reset"]

RESET_MODES = ("auto", "reconnect", "endpoint")


def declares_reset(metadata: Any) -> bool:
    """True when server metadata announces an `{"endpoint": "reset"}` message."""
    if not isinstance(metadata, dict):
        return False
    endpoints = metadata.get("endpoints")
    return metadata.get("supports_reset") is True or (
        isinstance(endpoints, (list, tuple)) and "reset" in endpoints
    )


class OpenPiClient(PolicyClient):
    """One websocket session with an openpi-protocol server, driven by a `PolicyCard`."""

    def __init__(self, card, *, api_key: str | None = None, connect_attempts: int = 3,
                 backoff_s: float = 0.2, max_backoff_s: float = 2.0) -> None:
        self.card = card
        self._api_key = api_key if api_key is not None else card.api_key()
        self._connect_attempts = max(1, int(connect_attempts))
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        reset_mode = card.extra.get("reset", "auto")
        if reset_mode not in RESET_MODES:
            raise ConfigError(f"policy card '{card.name}': field 'extra.reset' is {reset_mode!r} "
                              f"(allowed: {', '.join(RESET_MODES)})")
        self._reset_mode = reset_mode
        self._packer = Packer()
        self._ws: Any = None   # websockets' ClientConnection while connected (imported lazily)
        self._ws_lock = threading.Lock()
        self._fresh = False          # connected and no request sent since
        self._next_chunk_id = 0
        self.metadata: dict = {}
        self.connects = 0            # number of successful connections (diagnostics, tests)

    # -- connection ------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        host = self.card.host
        if host.startswith(("ws://", "wss://")):
            return host if ":" in host.split("//", 1)[1] else f"{host}:{self.card.port}"
        return f"ws://{host}:{self.card.port}"

    @property
    def connected(self) -> bool:
        return self._ws is not None

    @property
    def reset_by_endpoint(self) -> bool:
        if self._reset_mode == "auto":
            return declares_reset(self.metadata)
        return self._reset_mode == "endpoint"

    def connect(self) -> dict:
        """Open a session (retrying with backoff) and return the server's metadata frame."""
        self._drop()
        last: BaseException | None = None
        delay = self._backoff_s
        for attempt in range(1, self._connect_attempts + 1):
            try:
                return self._open()
            except PolicyFault:
                raise
            except (OSError, TimeoutError, EOFError) as exc:
                last = exc
            except Exception as exc:  # websockets handshake errors
                from websockets.exceptions import InvalidHandshake, InvalidURI

                if isinstance(exc, InvalidURI):
                    raise ConfigError(f"policy card '{self.card.name}': fields 'host'/'port' give "
                                      f"an invalid websocket URI {self.uri!r}") from None
                if not isinstance(exc, InvalidHandshake):
                    raise
                last = exc
            if attempt < self._connect_attempts:
                log.info("openpi server %s not reachable (%s); retrying in %.1fs", self.uri, last, delay)
                time.sleep(delay)
                delay = min(delay * 2, self._max_backoff_s)
        raise PolicyFault(f"cannot reach the openpi server of policy '{self.card.name}' at {self.uri} "
                          f"after {self._connect_attempts} attempts: {last!r}")

    def _open(self) -> dict:
        from websockets.exceptions import ConnectionClosed, InvalidStatus
        from websockets.sync.client import connect

        headers = {"Authorization": f"Api-Key {self._api_key}"} if self._api_key else None
        from spabench.network import warn_plain_key

        warn_plain_key(self.uri, self._api_key, self.card.name)
        try:
            ws = connect(self.uri, compression=None, max_size=None, additional_headers=headers,
                         open_timeout=self.card.timeout_s, close_timeout=1.0,
                         ping_interval=None, ping_timeout=None)
            # We own the connection's lifetime (closed by _drop); entering it marks that for
            # websockets >= 17.1, which otherwise warns about non-context-manager use.
            ws.__enter__()
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                hint = ("set the environment variable named by the card's 'api_key_env'"
                        if self._api_key is None else "the API key was refused")
                raise PolicyFault(f"openpi server {self.uri} answered HTTP {status} to policy "
                                  f"'{self.card.name}': {hint}") from None
            raise
        try:
            first = ws.recv(timeout=self.card.timeout_s)
        except TimeoutError:
            ws.close()
            raise PolicyFault(f"openpi server {self.uri} sent no metadata frame within "
                              f"{self.card.timeout_s:g} s") from None
        except ConnectionClosed as exc:
            raise PolicyFault(f"openpi server {self.uri} closed the connection before its metadata "
                              f"frame ({exc})") from None
        if isinstance(first, str):
            ws.close()
            raise PolicyFault(f"openpi server {self.uri} sent an error instead of metadata:\n{first}")
        metadata = unpackb(first)
        if not isinstance(metadata, dict):
            ws.close()
            raise ProtocolError(f"openpi server {self.uri}: metadata frame is a "
                                f"{type(metadata).__name__}; expected a map")
        with self._ws_lock:
            self._ws = ws
        self.metadata = metadata
        self._fresh = True
        self.connects += 1
        return metadata

    def _drop(self) -> None:
        with self._ws_lock:
            ws, self._ws = self._ws, None
        self._fresh = False
        if ws is not None:
            with contextlib.suppress(Exception):  # closing a broken socket: nothing left to do
                ws.close()

    def close(self) -> None:
        self._drop()

    def healthy(self, timeout_s: float | None = None) -> bool:
        """`GET /healthz` answers 200 (checked before the robot connects)."""
        host = self.card.host.split("//", 1)[-1].split(":")[0]
        url = f"http://{host}:{self.card.port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s or self.card.timeout_s) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError, TimeoutError):
            return False

    # -- requests --------------------------------------------------------------------------
    def _exchange(self, frame: bytes, what: str):
        """Send one frame and read one reply; any failure drops the connection (stale guard)."""
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            self.connect()
        ws = self._ws
        self._fresh = False
        ok = False
        try:
            ws.send(frame)
            reply = ws.recv(timeout=self.card.timeout_s)
            ok = True
        except TimeoutError:
            raise PolicyFault(f"policy '{self.card.name}' ({self.uri}): no {what} reply within "
                              f"{self.card.timeout_s:g} s; connection dropped, the next request "
                              "reconnects") from None
        except ConnectionClosed as exc:
            raise PolicyFault(f"policy '{self.card.name}' ({self.uri}): connection lost during "
                              f"{what} ({exc})") from None
        except OSError as exc:
            raise PolicyFault(f"policy '{self.card.name}' ({self.uri}): socket error during "
                              f"{what}: {exc}") from None
        finally:
            if not ok:  # includes KeyboardInterrupt: never reuse a half-finished exchange
                self._drop()
        return reply

    def reset(self) -> None:
        """Begin an episode: `{"endpoint": "reset"}` where declared, else a fresh session."""
        if self._ws is None:
            self.connect()
        if not self.reset_by_endpoint:
            if not self._fresh:
                self.connect()
            return
        reply = self._exchange(self._packer.pack({"endpoint": "reset"}), "reset")
        if isinstance(reply, str):
            if reply.strip().lower().startswith("reset successful"):  # RoboArena's text ack
                return
            self._drop()
            raise PolicyFault(f"policy server {self.uri} failed to reset:\n{reply}")
        try:
            unpackb(reply)
        except ProtocolError:
            self._drop()
            raise

    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        request = openpi_request(obs, instruction, self.card)
        if self.reset_by_endpoint:
            request["endpoint"] = "infer"
        frame = self._packer.pack(request)
        sent_t = time.monotonic()
        reply = self._exchange(frame, "inference")
        received_t = time.monotonic()
        if isinstance(reply, str):
            self._drop()
            raise PolicyFault(f"policy server {self.uri} raised an error:\n{reply}")
        try:
            data = unpackb(reply)
            if isinstance(data, dict):
                actions_value = data.get("actions")
            elif isinstance(data, np.ndarray):  # RoboArena-style bare array reply
                actions_value, data = data, {}
            else:
                raise ProtocolError(f"policy '{self.card.name}': reply is a {type(data).__name__}; "
                                    "expected a map with field 'actions'")
            actions = decode_action_chunk(actions_value, self.card, "actions")
        except ProtocolError:
            self._drop()
            raise
        chunk_id = self._next_chunk_id
        self._next_chunk_id += 1
        return ActionChunk(actions=actions, chunk_id=chunk_id, sent_t=sent_t, received_t=received_t,
                           rtt_s=received_t - sent_t, server_ms=server_timing_ms(data))
