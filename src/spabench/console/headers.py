"""Headers on every console response: no other site may frame a console page, sniff a type or read
where a request came from.

A page on another origin (any local web page, another loopback port) could show the bench page in
an invisible frame and have the operator click "Confirm cameras" and "Scene ready" through it: the
clicks land on the console's own page, so its requests are same-origin and pass console.guard. The
browser refuses to render a console page inside another page's frame when the response says
`X-Frame-Options: DENY` and CSP `frame-ancestors 'none'` (both: older and newer browsers).

The rest of the policy matches the pages as they are: scripts and styles from /static only (no
inline script; style attributes set by the scripts stay allowed), images, video and requests to the
console itself.

This middleware wraps the whole app (outside Starlette's error handler), so 401/403 answers of the
gates, 404s and 500s carry the headers too.
"""

from __future__ import annotations

from typing import Any

CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:",
    "media-src 'self' blob:", "connect-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'",
    "frame-ancestors 'none'"))
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
_NAMES = {name for name, _ in SECURITY_HEADERS}


class SecurityHeaders:
    """ASGI middleware: SECURITY_HEADERS on every HTTP response start (replacing any the app set).
    `state` is the wrapped app's (ConsoleServer reads the token from it)."""

    def __init__(self, app: Any):
        self.app = app
        self.state = app.state

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _NAMES]
                message = {**message, "headers": kept + list(SECURITY_HEADERS)}
            await send(message)

        await self.app(scope, receive, send_with_headers)
