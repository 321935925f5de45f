"""A small JSON-over-HTTP transport with a hard per-request deadline (MolmoAct2, VLA-0).

`requests` applies its timeout per socket operation, so a server that trickles a body could hold a
request far past the card's `timeout_s`; the body is therefore read in pieces against a deadline.
Any interruption mid-request (timeout, connection loss, Ctrl-C) throws the pooled connections
away, so a half-read reply can never be read by the next request; the next request reconnects
after an exponential backoff delay (0 s first, then 0.1 s, 0.2 s, ... capped at 2 s and at half
the request budget), so a dead server is not hammered.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from spabench.errors import ConfigError
from spabench.policy.wire_common import Backoff

__all__ = ["HttpReply", "HttpTransport", "TransportFailure", "base_url"]

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
        return host.rstrip("/")
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
        self._session = None
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


def _short(exc: Any, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."
