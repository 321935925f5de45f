"""The console's connections, bounded: how many, how long idle, how slow, and the descriptors left
for the session; and a reserve, so the e-stop and the bench page's polls are always served.

uvicorn runs in a thread of the console's process (console.process; `spabench console` runs it in
the foreground), which carries the e-stop to the session: whatever the server holds, the e-stop's
path loses (file descriptors, the process's GIL). uvicorn alone keeps
every accepted connection that never sends a request (its keep-alive timer only starts after a
response), and `limit_concurrency` answers 503 but still holds the socket. Here, per connection:
a complete request head must arrive within `idle_timeout_s` (also between keep-alive requests, and
a trickle of bytes does not reset it), a body within `request_timeout_s`.

Past `max_connections` a new connection is always let in and another one closed to make room, the
least useful first. What a connection is for shows in its requests: the bench page's own (state
polls, commands, stops, /api/meta: `PAGE_PATHS`) make it a page connection; anything else (live
views, media, pages, static files) a bulk one. The first `page_reserve` page connections (by when
they became one: the bench page's, opened before any flood) are never closed to make room. The
order, each oldest first:

  1. sockets that sent no request for BARE_GRACE_S (an idle-socket flood);
  2. bulk connections between requests, then bulk ones inside a request (a live-view poller: its
     frame is lost, the poller asks again);
  3. page connections beyond the reserve;
  4. sockets younger than BARE_GRACE_S: a client that has just connected, e.g. an e-stop from a new
     connection (closed only when nothing else is left).

Measured before (issue 34): 200 busy live-view pollers kept every connection busy, so a new one was
closed on arrival (an e-stop from a new connection was reset), and the page's keep-alive connection,
idle 0.2 s between polls, was the oldest idle one and went first (the dead-man voided an attempt).
Sockets that never sent a request still go before a page's keep-alive one: its polls do not queue
behind a flood in the kernel's accept queue (a dropped connection attempt is retried after 1 s, the
dead-man's whole budget).

This subclasses uvicorn's `H11Protocol` (uvicorn has no public hook for accepting or closing
connections); the `console` extra pins uvicorn to the tested range and
tests/console/test_console_connections.py fails loudly when an upgrade moves what is used here
(`UVICORN_INTERNALS`).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time

from spabench.console.config import ConsoleConfig
from spabench.errors import SpabenchError

# the bench page's own requests (console.app's routes): a connection that carried one is a page connection
PAGE_PATHS = ("/api/bench/state", "/api/bench/stop/", "/api/bench/command", "/api/meta")
BARE_GRACE_S = 1.0   # a client that connected sends its request head within this (else: an idle socket)
# what of uvicorn.protocols.http.h11_impl this module relies on (checked by the tests against the installed one)
UVICORN_INTERNALS = {
    "H11Protocol": ("connection_made", "data_received", "on_response_complete", "connection_lost"),
    "H11Protocol instance": ("connections", "cycle", "transport", "loop"),
    "RequestResponseCycle instance": ("scope", "more_body", "response_complete", "disconnected"),
}


def page_reserve(cfg: ConsoleConfig) -> int:
    """Page connections never closed to make room: a browser's six per host, and a second tab's."""
    return max(8, cfg.max_connections // 8)


def listen_backlog(cfg: ConsoleConfig) -> int:
    """Pending connections the kernel queues (asyncio accepts up to this many in one go)."""
    return 2 * cfg.max_connections


def protocol_class(cfg: ConsoleConfig):
    """uvicorn's h11 protocol with the module's limits (see the module doc)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        limits = cfg
        reserve = page_reserve(cfg)
        _timer: asyncio.TimerHandle | None
        _cycle_seen: object | None   # the latest request head's cycle; None: no request yet (a bare socket)
        _idle_since: float | None    # between requests (or since connecting); None inside a request
        _busy_since: float           # when the latest request head arrived (or when it connected)
        _page_since: float | None    # when its first bench-page request arrived; None: not a page connection
        closed_idle = 0     # connections closed for sending no request in time (all instances)
        closed_slow = 0     # ... for a body not received in time
        evicted = 0         # ... to make room past max_connections
        evicted_busy = 0    # ... of those, inside a request (a bulk one: a live-view frame)
        refused = 0         # ... on arrival, nothing else to close

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._timer = None
            self._cycle_seen = None
            self._idle_since = self._busy_since = time.monotonic()
            self._page_since = None
            self._arm(self.limits.idle_timeout_s, self._idle_expired)
            if len(self.connections) > self.limits.max_connections:
                victim = self._victim()
                if victim is not None:
                    type(self).evicted += 1
                    type(self).evicted_busy += victim._idle_since is None
                    victim._close()
                else:
                    type(self).refused += 1
                    self._close()

        def _victim(self) -> BoundedH11Protocol | None:
            """The connection to close for this new one (the module doc's order), None: only kept ones."""
            now = time.monotonic()
            others = [c for c in self.connections if isinstance(c, BoundedH11Protocol) and c is not self
                      and not c.transport.is_closing()]
            pages = sorted((c for c in others if c._page_since is not None), key=lambda c: c._page_since or 0.0)
            kept = set(pages[: self.reserve])

            def rank(c: BoundedH11Protocol) -> tuple[int, float]:
                if c._cycle_seen is None:   # no request yet
                    bare_s = now - c._busy_since
                    return (0 if bare_s >= BARE_GRACE_S else 5, c._busy_since)
                if c._page_since is None:
                    return (1, c._idle_since) if c._idle_since is not None else (2, c._busy_since)
                return (3, c._idle_since) if c._idle_since is not None else (4, c._busy_since)

            candidates = [c for c in others if c not in kept]
            return min(candidates, key=rank) if candidates else None

        def _arm(self, delay: float, callback) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(delay, callback)

        def _close(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._idle_since = None
            self.connections.discard(self)
            if not self.transport.is_closing():
                self.transport.abort()

        def _idle_expired(self) -> None:
            if self._idle_since is not None:
                type(self).closed_idle += 1
                self._close()

        def _body_expired(self) -> None:
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not cycle.response_complete:
                type(self).closed_slow += 1
                self._close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self.cycle
            if cycle is not None and cycle is not self._cycle_seen and not cycle.response_complete:
                self._cycle_seen = cycle  # a request head arrived: the body has its own deadline
                self._idle_since = None
                self._busy_since = time.monotonic()
                if self._page_since is None and str(cycle.scope.get("path", "")).startswith(PAGE_PATHS):
                    self._page_since = self._busy_since
                self._arm(self.limits.request_timeout_s, self._body_expired)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._idle_since = time.monotonic()
                self._arm(self.limits.idle_timeout_s, self._idle_expired)

        def connection_lost(self, exc) -> None:
            timer = getattr(self, "_timer", None)   # None also before connection_made ran
            if timer is not None:
                timer.cancel()
                self._timer = None
            self._idle_since = None
            super().connection_lost(exc)

    return BoundedH11Protocol


class DescriptorLimit(SpabenchError):
    pass


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def reserve_descriptors(cfg: ConsoleConfig) -> dict[str, int]:
    """Make sure the console's most (connections, the accept queue) still leaves `fd_reserve`
    descriptors for the session: raise the soft RLIMIT_NOFILE if needed, refuse if the hard limit
    cannot. Returns the numbers (for the start-up line and tests)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    used = open_descriptors()
    need = used + cfg.max_connections + listen_backlog(cfg) + cfg.fd_reserve
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise DescriptorLimit(
                f"console: the open-file limit (hard {hard}) is too low: {used} descriptors are open and the console "
                f"may hold {cfg.max_connections + listen_backlog(cfg)} more, leaving less than operator.console."
                f"fd_reserve={cfg.fd_reserve} for the recorder and ledger. Lower operator.console.max_connections "
                "or raise the limit (ulimit -Hn)")
        target = need if hard == resource.RLIM_INFINITY else min(hard, max(need, 4096))
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return {"soft": int(soft), "hard": int(hard), "open": used, "need": need}
