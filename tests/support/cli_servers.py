"""Policy servers started the way a lab starts them: `spabench serve scripted|lerobot ...` in a subprocess.

For tests that must not depend on how the CLI builds a config inside (they survive a rewrite of the
config layer): the server is the command line, its readiness a TCP connect, its stand-in the
metadata frame it sends first (openpi protocol).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def cli_server(*args: str, log: Path, ready_s: float = 120.0) -> Iterator[int]:
    """`spabench serve <args> port=N` on loopback until the block ends (Ctrl-C, then kill); yields N.
    Fails with the server's output when it exits or does not listen within ready_s."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1")
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spabench.cli.main", "serve", *args, f"port={port}"],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"`spabench serve {' '.join(args)}` exited {proc.returncode}:\n{log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"`spabench serve {' '.join(args)}` not listening after {ready_s} s:\n"
                                         f"{log.read_text()}") from None
                time.sleep(0.1)   # polling a condition with a deadline, not waiting a fixed time
        yield port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def server_metadata(port: int) -> dict:
    """The metadata frame an openpi server sends first on a new connection."""
    from websockets.sync.client import connect

    from spabench.policy.codec_openpi import unpackb

    with connect(f"ws://127.0.0.1:{port}", max_size=None, open_timeout=30) as ws:
        return unpackb(ws.recv(timeout=30))
