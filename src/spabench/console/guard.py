"""Requests only from the console's own pages: the checks every request passes before the app sees it.

A browser lets any page it shows send simple requests (form posts, `text/plain` fetches, `<img>`
loads) to any address, including this console on loopback, and a DNS-rebound name reaches it with
the attacker's Host header. So, in this order:

- Host: an IP literal, localhost, the bound name or one of `allowed_hosts` (403 otherwise);
- a state-changing request (anything but GET/HEAD) must come from the console's own origin: its
  Origin (or, without one, its Referer) equals `scheme://Host`, and Sec-Fetch-Site, when the browser
  sends it, says same-origin; it carries the page's per-session CSRF token in `X-Spabench-CSRF`
  (embedded in every page, readable only by same-origin scripts); an API body is `application/json`
  and at most `max_body_bytes` (413 before reading when the length says so, else as it arrives);
- a GET of the API or media that a browser marks as cross-site is refused too (no hot-linked frames).

Pages themselves may be opened from anywhere (a bookmark, a link): they change nothing.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
from typing import Any
from urllib.parse import urlsplit

from spabench.console.config import ConsoleConfig
from spabench.network import is_loopback

CSRF_HEADER = "x-spabench-csrf"
SAFE_METHODS = ("GET", "HEAD")


def new_csrf_token() -> str:
    return secrets.token_urlsafe(24)


def _host_name(host_header: str) -> str:
    """The host part of a Host header value, lowercased, IPv6 brackets removed."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class RequestGuard:
    """ASGI middleware enforcing the module's rules (see the module doc)."""

    def __init__(self, app, cfg: ConsoleConfig, csrf: str):
        self.app, self.cfg, self.csrf = app, cfg, csrf
        names = {"localhost", *cfg.allowed_hosts}
        bound = cfg.host.strip("[]").lower()
        if bound not in ("0.0.0.0", "::"):
            names.add(bound)
        if not is_loopback(cfg.host):  # reachable from the network: the machine's own names too
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = names

    def host_allowed(self, host_header: str) -> bool:
        name = _host_name(host_header)
        return bool(name) and (name in self.names or _is_ip(name))

    async def _refuse(self, send, status: int, why: str, close: bool = False) -> None:
        body = json.dumps({"error": why}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"cache-control", b"no-store")]
        if close:  # the rest of the body is never read: end the connection instead of draining it
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _foreign(self, headers: dict[str, str], own: str) -> str | None:
        """Why this request does not come from the console's own origin (None: it does)."""
        origin = headers.get("origin")
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"the request came from another site (Sec-Fetch-Site: {site})"
        if origin is not None:
            if origin != own:
                return f"the request came from another origin ({origin[:80]})"
            return None
        referer = headers.get("referer")
        if referer is not None:
            parts = urlsplit(referer)
            if f"{parts.scheme}://{parts.netloc}".lower() != own:
                return f"the request came from another page ({referer[:80]})"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers: dict[str, str] = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
        host = headers.get("host", "")
        if not self.host_allowed(host):
            return await self._refuse(send, 403, f"this console does not answer to the host name {host[:80]!r} "
                                      "(allowed: its address, localhost, or a name listed in "
                                      "operator.console.allowed_hosts)")
        method, path = scope["method"], scope["path"]
        own = f"{scope.get('scheme', 'http')}://{host}".lower()
        if method in SAFE_METHODS:
            if path.startswith(("/api/", "/media/")):
                why = self._foreign(headers, own)
                if why is not None:
                    return await self._refuse(send, 403, f"refused: {why}; open the console's own page")
            return await self.app(scope, receive, send)
        why = self._foreign(headers, own)
        if why is not None:
            return await self._refuse(send, 403, f"refused: {why}; only the console's own pages may change "
                                      "anything", close=True)
        given = headers.get(CSRF_HEADER, "")
        if not given or not hmac.compare_digest(given.encode(), self.csrf.encode()):
            return await self._refuse(send, 403, f"refused: the {CSRF_HEADER} header is missing or stale; reload the "
                                      "console's page (scripts: read csrf_token from GET /api/meta)", close=True)
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if path.startswith("/api/") and media != "application/json":
            return await self._refuse(send, 415, f"the request body must be application/json (got {media or 'none'!r})",
                                      close=True)
        limit = self.cfg.max_body_bytes
        too_big = (f"the request body is larger than {limit} bytes "
                   "(operator.console.max_body_bytes); nothing was read or changed")
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            length = limit + 1
        if length > limit:
            return await self._refuse(send, 413, too_big, close=True)
        # read the body here, bounded, and hand it on whole: the app never sees more than the cap
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return await self._refuse(send, 413, too_big, close=True)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
