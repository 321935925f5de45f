"""uvicorn around the console app: in a background thread (of the console process that `spabench run
operator=web` starts, console.process) or in the foreground (`spabench console`). Binds 127.0.0.1 unless told otherwise; any other address needs
the token (generated when none is configured). Connections are bounded (console.connections) and
the descriptors the session needs are reserved before the first one is accepted."""

from __future__ import annotations

import secrets
import sys
import threading
import time

from spabench.console.config import ConsoleConfig
from spabench.errors import SpabenchError

SWITCH_INTERVAL_S = 0.001


class ConsoleError(SpabenchError):
    pass


class ConsoleServer:
    def __init__(self, app, cfg: ConsoleConfig):
        import uvicorn

        from spabench.console.connections import listen_backlog, protocol_class, reserve_descriptors

        self.app, self.cfg = app, cfg
        self.token = app.state.token
        try:
            self.descriptors = reserve_descriptors(cfg)
        except SpabenchError as exc:
            raise ConsoleError(str(exc)) from None
        self.protocol = protocol_class(cfg)
        self._server = uvicorn.Server(uvicorn.Config(
            app, host=cfg.host, port=cfg.port, log_level="warning", access_log=False, lifespan="off", ws="none",
            http=self.protocol, backlog=listen_backlog(cfg), timeout_keep_alive=max(1, round(cfg.idle_timeout_s)),
            h11_max_incomplete_event_size=16 * 1024))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        for server in getattr(self._server, "servers", []) or []:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self.cfg.port

    @property
    def url(self) -> str:
        host = self.cfg.host if self.cfg.host not in ("0.0.0.0", "::") else "127.0.0.1"
        url = f"http://{host}:{self.port}/"
        return url + (f"?token={self.token}" if self.token else "")

    def start(self, timeout: float = 10.0) -> ConsoleServer:
        # Normal priority on purpose: this thread carries the e-stop requests to the control loop.
        # It shares its process's GIL with the live views' encoder (and, in-process, with whatever
        # else runs there): 1 ms instead of Python's 5 ms switch interval bounds how long a busy
        # thread holds it when the e-stop's handler wakes.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._server.run, name="spabench-console", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConsoleError(f"console: could not listen on {self.cfg.host}:{self.cfg.port} "
                                   "(port in use? set operator.console.port=...)")
            time.sleep(0.02)
        return self

    def wait(self) -> None:
        """Until the server started by start() ends (Ctrl-C reaches the caller between the waits)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None


def resolve_token(cfg: ConsoleConfig) -> str:
    """The token requests must carry: the configured one, a fresh random one for a non-loopback bind
    without one, and none on loopback unless configured."""
    if cfg.token:
        return cfg.token
    return secrets.token_urlsafe(18) if cfg.needs_token else ""
