"""The console's connections, bounded: how many, how long idle, how slow, and the descriptors left
for the session.

uvicorn runs in a thread of the session's process (the e-stop reaches StopControl directly), so
whatever the server holds, the session loses: file descriptors and GIL time. uvicorn alone keeps
every accepted connection that never sends a request (its keep-alive timer only starts after a
response), and `limit_concurrency` answers 503 but still holds the socket. Here, per connection:
a complete request head must arrive within `idle_timeout_s` (also between keep-alive requests, and
a trickle of bytes does not reset it), a body within `request_timeout_s`; past `max_connections`
the oldest idle connection is closed to make room, so a flood of idle sockets cannot keep the
operator's e-stop out, and if none is idle the new one is closed at once. Sockets that never sent a
request go first: a bench page's keep-alive connection (the browser's, polling every 0.2 s) stays
through a flood, so its polls do not queue behind the flood's in the kernel's accept queue (a
dropped connection attempt is retried after 1 s, the dead-man's whole budget).
"""

from __future__ import annotations

import asyncio
import os
import resource
import time

from spabench.console.config import ConsoleConfig
from spabench.errors import SpabenchError


def listen_backlog(cfg: ConsoleConfig) -> int:
    """Pending connections the kernel queues (asyncio accepts up to this many in one go)."""
    return 2 * cfg.max_connections


def protocol_class(cfg: ConsoleConfig):
    """uvicorn's h11 protocol with the module's limits (see the module doc)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        limits = cfg
        _timer: asyncio.TimerHandle | None
        _cycle_seen: object | None   # the latest request head's cycle; None: no request yet (a bare socket)
        _idle_since: float | None
        closed_idle = 0     # connections closed for sending no request in time (all instances)
        closed_slow = 0     # ... for a body not received in time
        evicted = 0         # ... to make room past max_connections
        refused = 0         # ... on arrival, every connection busy

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._timer = None
            self._cycle_seen = None
            self._idle_since = time.monotonic()
            self._arm(self.limits.idle_timeout_s, self._idle_expired)
            if len(self.connections) > self.limits.max_connections:
                idle = [c for c in self.connections if isinstance(c, BoundedH11Protocol) and c is not self
                        and getattr(c, "_idle_since", None) is not None]
                if idle:   # a socket that never sent a request head goes before a page's keep-alive one
                    oldest = min(idle, key=lambda c: (c._cycle_seen is not None, c._idle_since or 0.0))
                    type(self).evicted += 1
                    oldest._close()
                else:
                    type(self).refused += 1
                    self._close()

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
