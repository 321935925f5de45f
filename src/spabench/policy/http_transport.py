"""A small JSON-over-HTTP transport with a hard per-request deadline (MolmoAct2, VLA-0).

`requests` applies its timeout per socket operation, so a server that trickles a body could hold a
request far past the card's `timeout_s`; the body is therefore read in pieces against a deadline.
Any interruption mid-request (timeout, connection loss, Ctrl-C) throws the pooled connections
away, so a half-read reply can never be read by the next request; the next request reconnects
after an exponential backoff delay (0 s first, then 0.1 s, 0.2 s, ... capped at 2 s and at half
the request budget), so a dead server is not hammered.

`HttpPolicyClient` is the client scaffolding both HTTP protocols share (card options common to
both, API-key header, connect retries, stateless reset, POST timing, close); each protocol's
module keeps its own endpoints, codec and reply checks.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from spabench.errors import ConfigError
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault
from spabench.policy.wire_common import Backoff, positive_int, probe_with_retries, server_label

__all__ = ["HttpPolicyClient", "HttpReply", "HttpTransport", "TransportFailure", "base_url"]

_READ_PIECE = 1 << 16


class TransportFailure(Exception):
    """The request did not complete (timeout, refused, reset); the message says which."""


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    content_type: str


def base_url(host: str, port: int) -> str:
    """http://host:port, or the card's host as is when it already carries a scheme."""
    if host.startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        url = host.rstrip("/")
        parts = urlsplit(url)
        if parts.port is None and port:  # https://gpu.lab keeps the card's port (i10)
            url = url.replace(parts.netloc, f"{parts.netloc}:{port}", 1)
        return url
    if ":" in host and not host.startswith("["):  # bare IPv6 literal
        host = f"[{host}]"
    return f"http://{host}:{port}"


class HttpTransport:
    """One keep-alive session to one server; one request at a time."""

    def __init__(self, url: str, timeout_s: float, headers: dict[str, str] | None = None) -> None:
        try:
            import requests  # noqa: F401 - bench extra
        except ImportError as exc:  # pragma: no cover - requests ships with the bench extra
            raise ConfigError("the HTTP policy clients need the 'requests' package "
                              "(pip install 'spabench[bench]')") from exc
        self.url = url
        self.timeout_s = float(timeout_s)
        self.headers = dict(headers or {})
        self._lock = threading.Lock()
        self._session: Any = None   # a requests.Session (requests is imported lazily)
        self._broken = False
        self._backoff = Backoff()
        self.closed = False

    def _new_session(self):
        import requests

        session = requests.Session()
        session.headers.update(self.headers)
        return session

    def drop_connections(self, broken: bool = False) -> None:
        """Close every pooled connection (the next request opens a fresh one; after a failure,
        `broken=True`, only once the backoff delay has passed)."""
        self._broken = self._broken or broken
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def close(self) -> None:
        """Idempotent; callable from another thread (an in-flight request ends by its deadline)."""
        self.closed = True
        self.drop_connections()

    def request(self, method: str, path: str, *, body: bytes | None = None,
                content_type: str = "application/json", timeout_s: float | None = None) -> HttpReply:
        """One request; raises TransportFailure when it does not complete within the deadline."""
        import requests

        budget = self.timeout_s if timeout_s is None else float(timeout_s)
        deadline = time.monotonic() + budget
        headers = {"Content-Type": content_type} if body is not None else {}
        with self._lock:
            if self.closed:
                raise TransportFailure(f"{method} {path}: client is closed")
            if self._session is None:
                if self._broken:
                    self._backoff.wait(time.monotonic() + budget / 2)
                self._session = self._new_session()
            try:
                with self._session.request(method, self.url + path, data=body, headers=headers,
                                           timeout=(min(budget, 5.0), budget), stream=True) as resp:
                    pieces = []
                    for piece in resp.iter_content(_READ_PIECE):
                        pieces.append(piece)
                        if time.monotonic() > deadline:
                            raise TransportFailure(f"{method} {path}: reply not complete within {budget:g} s")
                    if time.monotonic() > deadline:
                        raise TransportFailure(f"{method} {path}: reply not complete within {budget:g} s")
                    self._broken = False
                    self._backoff.reset()
                    return HttpReply(resp.status_code, b"".join(pieces), resp.headers.get("Content-Type", ""))
            except TransportFailure:
                self.drop_connections(broken=True)
                raise
            except requests.Timeout:
                self.drop_connections(broken=True)
                raise TransportFailure(f"{method} {path}: no reply within {budget:g} s") from None
            except requests.RequestException as exc:
                self.drop_connections(broken=True)
                raise TransportFailure(f"{method} {path}: {type(exc).__name__}: {_short(exc)}") from None
            except BaseException:
                # Ctrl-C or any other interruption mid-request: the connection may hold a half-read
                # reply, so it must never be reused.
                self.drop_connections(broken=True)
                raise


class HttpPolicyClient(PolicyClient):
    """What the MolmoAct2 and VLA-0 clients share; a subclass supplies `_probe` (the liveness
    request, answering the server's status map) and its own `connect` metadata and `infer` body."""

    def _open_http(self, card: Any, extra: dict[str, Any]) -> None:
        """Read `extra.connect_attempts` and open the transport (the card's API key, if any, goes
        in an `Authorization: Api-Key` header). Call after the protocol's own card checks."""
        self.connect_attempts = positive_int(card, "connect_attempts", extra.get("connect_attempts"), 3)
        self.server = server_label(card)
        key = card.api_key() if hasattr(card, "api_key") else None
        headers = {"Authorization": f"Api-Key {key}"} if key else {}
        from spabench.network import warn_plain_key

        warn_plain_key(base_url(card.host, card.port), key, getattr(card, "name", "?"))
        self.url = base_url(card.host, card.port)
        self.http = HttpTransport(self.url, card.timeout_s, headers)
        self._chunk_id = 0
        self.metadata: dict[str, Any] = {}

    @abc.abstractmethod
    def _probe(self) -> dict:
        """One liveness request; the server's status map, or PolicyFault."""

    def _get(self, path: str, what: str) -> HttpReply:
        """GET `path` (any status); PolicyFault "<server>: <what> failed: ..." when nothing answered."""
        try:
            return self.http.request("GET", path)
        except TransportFailure as exc:
            raise PolicyFault(f"{self.server}: {what} failed: {exc}") from None

    def _probe_until_ready(self, failure: str) -> dict:
        """`_probe()` with `connect_attempts` tries; PolicyFault "<server>: <failure> after ..."."""
        return probe_with_retries(self._probe, self.connect_attempts, f"{self.server}: {failure}")

    def reset(self) -> None:
        """Episode start: the server keeps no episode state, so drop pooled connections (the
        episode starts on fresh ones) and check it still answers."""
        self.http.drop_connections()
        self._probe()

    def _post(self, path: str, body: bytes, error_text: Callable[[bytes], str]) -> tuple[HttpReply, float, float]:
        """POST `body`; (reply, sent_t, received_t) for a 200 reply, else PolicyFault (the
        non-200 message quotes the body as `error_text` renders it)."""
        sent_t = time.monotonic()
        try:
            reply = self.http.request("POST", path, body=body)
        except TransportFailure as exc:
            raise PolicyFault(f"{self.server}: {exc}") from None
        received_t = time.monotonic()
        if reply.status != 200:
            raise PolicyFault(f"{self.server}: POST {path} answered HTTP {reply.status}: {error_text(reply.body)}")
        return reply, sent_t, received_t

    def _chunk(self, actions: np.ndarray, sent_t: float, received_t: float,
               server_ms: float | None = None) -> ActionChunk:
        self._chunk_id += 1
        return ActionChunk(actions=actions, chunk_id=self._chunk_id,
                           sent_t=sent_t, received_t=received_t, rtt_s=received_t - sent_t, server_ms=server_ms)

    def close(self) -> None:
        self.http.close()


def _short(exc: Any, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."
