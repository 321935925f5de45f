"""The session's console in a process of its own, so the control loop owns its process (and its
GIL): the web server and the live views' JPEG encoding run here, the loop's process only copies the
newest frames into shared memory (console.frames.ShelfPublisher) and answers the channel's calls
(console.link).

The session starts it (ConsoleProcess, `python -m spabench.console.process FD`: a fresh
interpreter, nothing inherited but the socket) and restarts it when it dies: on the same port, with
the same access token and CSRF token, so a page that was open keeps working once it reaches the new
process. While it is down nothing answers the page; when the arm is moving the session's dead-man
(WebOperator's DeadMan, which hears only requests that reached the session) latches `console_lost`
exactly as for a closed page. The console process ends when the session's end of the socket closes
(the session ended, or was killed).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

from spabench.console.channel import BenchChannel
from spabench.console.config import ConsoleConfig
from spabench.console.guard import new_csrf_token
from spabench.console.link import ControlLink
from spabench.console.server import SWITCH_INTERVAL_S, ConsoleError, resolve_token

START_TIMEOUT_S = 60.0   # the first start imports the web stack; a loaded machine takes seconds


class OperatorView:
    """What console.app reads from the operator (the trial's reference images, the rendered scene
    reference), as the session last pushed it."""

    def __init__(self) -> None:
        self.references: dict[str, Path | None] = {}
        self.rendered: _Rendered | None = None


class _Rendered:
    def __init__(self, files: dict[str, str], problem: str | None):
        self._files, self.problem = {k: Path(v) for k, v in files.items()}, problem

    def files(self) -> dict[str, Path]:
        return dict(self._files)


def apply_context(ctx: Any, data: dict) -> None:
    """The session's `ctx` message: what the pages show besides the channel's state."""
    if "rater" in data:
        ctx.rater = data["rater"]
    if "references" in data:
        ctx.operator.references = {cam: (Path(p) if p else None) for cam, p in data["references"].items()}
    if "rendered" in data:
        r = data["rendered"]
        ctx.operator.rendered = None if r is None else _Rendered(r["files"], r.get("problem"))


class ConsoleProcess:
    """The session's side: start, watch, restart and stop the console process (see the module doc)."""

    def __init__(self, campaign_dir: Path, cfg: ConsoleConfig, channel: BenchChannel, frames: str,
                 suite: Any = None, rater: str = "", out: TextIO | None = None,
                 on_down: Callable[[dict], None] | None = None, on_up: Callable[[dict], None] | None = None):
        self.on_down, self.on_up = on_down, on_up     # called on the supervisor's thread
        self.campaign_dir, self.channel, self.frames, self.suite, self.out = campaign_dir, channel, frames, suite, out
        # one token and one CSRF token for the session: a restarted console takes the same ones
        self.cfg = replace(cfg, token=resolve_token(cfg))
        self.csrf = new_csrf_token()
        self.context: dict[str, Any] = {"rater": rater}
        self.port = cfg.port
        self.proc: subprocess.Popen | None = None
        self.link: ControlLink | None = None
        self.restarts = 0
        self.down_at: float | None = None   # time.monotonic() when the session noticed its last death
        self._closing = threading.Event()
        self._ready: dict[str, Any] = {}
        self._ready_event = threading.Event()
        self._lock = threading.Lock()
        self._watch: threading.Thread | None = None

    @property
    def token(self) -> str:
        return self.cfg.token

    @property
    def url(self) -> str:
        host = self.cfg.host if self.cfg.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}/" + (f"?token={self.token}" if self.token else "")

    def start(self, timeout: float = START_TIMEOUT_S) -> ConsoleProcess:
        # the link's reader thread carries the e-stop into this process: when the loop's other threads
        # hold the GIL it waits at most 1 ms for it (Python's default switch interval is 5 ms)
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self._spawn(timeout)
        self._watch = threading.Thread(target=self._supervise, name="spabench-console-watch", daemon=True)
        self._watch.start()
        return self

    def _spawn(self, timeout: float) -> None:
        ours, theirs = socket.socketpair()
        self._ready, self._ready_event = {}, threading.Event()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "spabench.console.process", str(theirs.fileno())],
                                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        link = ControlLink(conn, self.channel, self._on_message)
        link.send(("init", {"campaign_dir": str(self.campaign_dir), "cfg": asdict(replace(self.cfg, port=self.port)),
                            "csrf": self.csrf, "frames": self.frames, "suite": self.suite,
                            "context": dict(self.context)}))
        deadline = time.monotonic() + timeout
        while not self._ready_event.wait(0.1):
            if proc.poll() is not None or link.closed.is_set() or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
                link.close()
                raise ConsoleError(f"console: could not listen on {self.cfg.host}:{self.port} "
                                   f"({self._ready.get('error') or 'port in use?'}; set operator.console.port=...)")
        with self._lock:
            self.proc, self.link = proc, link
        self.port = int(self._ready["port"])

    def _on_message(self, message: tuple) -> None:
        if message[0] in ("ready", "failed"):
            self._ready = dict(message[1])
            if message[0] == "ready":
                self._ready_event.set()

    def _supervise(self) -> None:
        """Restart the console process when it ends while the session runs (same port and tokens)."""
        while not self._closing.is_set():
            proc = self.proc
            if proc is None:
                return
            code = proc.wait()
            if self._closing.is_set():
                return
            down = {"exit_code": code, "pid": proc.pid, "noticed_monotonic": time.monotonic(),
                    "noticed_wall_time": time.time()}
            self.down_at = down["noticed_monotonic"]
            if self.on_down is not None:
                self.on_down(down)
            if self.link is not None:
                self.link.close()
            self._say(f"console process ended (exit {code}); starting it again on port {self.port}")
            while not self._closing.is_set():
                try:
                    self._spawn(START_TIMEOUT_S)
                    self.restarts += 1
                    if self.on_up is not None:
                        self.on_up({**down, "port": self.port, "new_pid": self.proc.pid if self.proc else None,
                                    "up_wall_time": time.time()})
                    self._say(f"console: open {self.url} again (restarted; bench page: /bench)")
                    break
                except ConsoleError as exc:   # the port is not free yet, or a bad start: try again
                    self._say(str(exc))
                    self._closing.wait(1.0)

    def _say(self, text: str) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=True)

    def push(self, **data: Any) -> None:
        """What the pages show besides the channel's state (see apply_context); kept for a restart."""
        self.context.update(data)
        link = self.link
        if link is not None:
            link.send(("ctx", data))

    def stop(self) -> None:
        self._closing.set()
        link, proc = self.link, self.proc
        if link is not None:
            link.send(("quit",))
        if proc is not None:
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if link is not None:
            link.close()
        if self._watch is not None:
            self._watch.join(5.0)


def serve(fd: int) -> int:
    """The console process: the app over a ChannelProxy and the shared frames, until the session's
    end of the socket says "quit" or closes."""
    from spabench.console.app import ConsoleContext, build_app
    from spabench.console.frames import FramePublisher
    from spabench.console.link import ChannelProxy
    from spabench.console.server import ConsoleServer
    from spabench.console.shelf import ShelfReader

    conn = Connection(fd)
    kind, init = conn.recv()
    if kind != "init":
        return 2
    cfg = ConsoleConfig.from_mapping(init["cfg"])
    ctx = ConsoleContext(campaign_dir=Path(init["campaign_dir"]), cfg=cfg, suite=init["suite"],
                         operator=OperatorView(), csrf=init["csrf"])
    apply_context(ctx, init["context"])
    proxy = ChannelProxy(conn, lambda data: apply_context(ctx, data))
    reader = ShelfReader(init["frames"])
    ctx.channel, ctx.publisher = proxy, FramePublisher(cfg, source=reader)
    try:
        server = ConsoleServer(build_app(ctx), cfg).start()
    except Exception as exc:
        proxy.send(("failed", {"error": str(exc)}))
        return 1
    proxy.send(("ready", {"port": server.port, "pid": os.getpid()}))
    try:
        proxy.ending.wait()   # the server stops first; requests meanwhile still reach the session
    finally:
        server.stop()
        ctx.publisher.close()
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
