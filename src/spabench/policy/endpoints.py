"""Where each card's server answers, and in which protocol: collisions refused before anything connects.

Two cards of one campaign resolving to the same address and port would drive one server under two
policies (pi0.5 and MolmoAct2 both default to port 8000); a server of another family on a card's
port would answer with the wrong policy or fail obscurely. Both are one error at pre-flight.

The protocol a listener speaks is told from its first bytes, without a request of any protocol:

  zmq        a ZMTP greeting (0xFF ... 0x7F) arrives unasked (GR00T's REP socket)
  websocket  a websocket upgrade is answered 101 (openpi)
  http       another HTTP/1.x status (FastAPI servers: MolmoAct2, VLA-0; an API-key proxy's 401)
  http2      an HTTP/2 frame (gRPC: LeRobot's async server)
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from spabench.errors import ConfigError

__all__ = ["endpoint", "check_collisions", "sniff", "check_protocol", "EXPECTED"]

# card protocol -> the listener kinds its server may show
EXPECTED: dict[str, frozenset[str]] = {
    "openpi": frozenset({"websocket", "http"}),   # http: 401/403 of an API key check before the upgrade
    "groot": frozenset({"zmq"}),
    "molmoact2": frozenset({"http"}),
    "vla0": frozenset({"http"}),
    "lerobot_grpc": frozenset({"http2"}),
}
KIND_WORDS = {"zmq": "ZeroMQ (GR00T)", "websocket": "a websocket (openpi)", "http": "plain HTTP",
              "http2": "HTTP/2 (gRPC)"}


def _host(card: Any) -> str:
    host = str(card.host)
    if "//" in host:   # ws://host[:port] / http://host
        host = host.split("//", 1)[1].split("/", 1)[0]
        if host.count(":") == 1:
            host = host.split(":")[0]
    return host.strip("[]")


def endpoint(card: Any) -> tuple[frozenset[str], int]:
    """(the addresses the card's host resolves to, its port). An unresolvable host keeps its name."""
    host = _host(card)
    try:
        addresses = frozenset(str(info[4][0]) for info in socket.getaddrinfo(host, card.port, type=socket.SOCK_STREAM))
    except OSError:
        addresses = frozenset({host})
    loopback = {a for a in addresses if a.startswith("127.") or a == "::1"}
    if loopback:   # localhost, 127.0.0.1 and ::1 are one machine
        addresses = (addresses - loopback) | {"loopback"}
    return addresses, int(card.port)


def check_collisions(cards: Mapping[str, Any], who: Mapping[str, str] | None = None) -> None:
    """One ConfigError naming every pair of cards whose servers would be the same host and port.

    `who` maps a card name to how messages name it (its alias in a blind campaign)."""
    who = who or {}
    seen: list[tuple[str, frozenset[str], int]] = []
    clashes = []
    for name, card in cards.items():
        addresses, port = endpoint(card)
        for other, other_addresses, other_port in seen:
            if port == other_port and addresses & other_addresses:
                clashes.append(f"{who.get(other, other)} and {who.get(name, name)} both at "
                               f"{_host(card)}:{port}")
        seen.append((name, addresses, port))
    if clashes:
        raise ConfigError("pre-flight: two policies of this campaign resolve to the same server ("
                          + "; ".join(clashes) + "); one server would answer for both. Give each card its "
                          "own port (cards.<name>.port=...) and start each server on it; nothing has moved.")


def sniff(host: str, port: int, timeout_s: float = 2.0, greeting_wait_s: float = 0.3) -> str | None:
    """The kind of listener at host:port ("zmq", "websocket", "http", "http2"), "unknown" when it
    answers with something else or nothing, None when nothing listens."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError:
        return None
    try:
        sock.settimeout(greeting_wait_s)
        data = b""
        try:
            data = sock.recv(64)
        except TimeoutError:
            pass
        except OSError:
            return "unknown"
        if data:
            return _classify(data)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                      f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n").encode())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(data) < 16:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                block = sock.recv(64)
            except TimeoutError:
                break
            except OSError:
                break
            if not block:
                break
            data += block
        return _classify(data) if data else "unknown"
    finally:
        with contextlib.suppress(OSError):
            sock.close()


def _classify(data: bytes) -> str:
    if data[:1] == b"\xff" and (len(data) < 10 or data[9:10] == b"\x7f"):
        return "zmq"
    if data.startswith(b"HTTP/1.1 101") or data.startswith(b"HTTP/1.0 101"):
        return "websocket"
    if data.startswith(b"HTTP/1."):
        return "http"
    if len(data) >= 9 and data[3] in (0x04, 0x07) and data[5:9] == b"\x00\x00\x00\x00":  # SETTINGS / GOAWAY
        return "http2"
    return "unknown"


def check_protocol(card: Any, who: str, timeout_s: float = 2.0) -> None:
    """ConfigError when the listener on the card's port plainly speaks another protocol than the card.

    Nothing listening, or an answer that tells nothing, passes: the client's own connect reports those."""
    kind = sniff(_host(card), int(card.port), timeout_s=min(timeout_s, float(card.timeout_s)))
    if kind is None or kind == "unknown" or kind in EXPECTED.get(card.protocol, frozenset({kind})):
        return
    raise ConfigError(f"pre-flight: the server on {who}'s port ({_host(card)}:{card.port}) answers in "
                      f"{KIND_WORDS.get(kind, kind)}, not the {card.protocol} protocol its card says; "
                      "another server holds this port. Start the card's server there or point the card at "
                      "its own port; nothing has moved.")
