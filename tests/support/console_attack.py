"""A hostile client of the browser console, in its own process (as an attacker on the same machine
is): idle connections, one huge POST, many live-view pollers. Loopback only; every loop is bounded
in count and time. Prints one JSON line "ready" once everything is under way, then one summary line.

    python tests/support/console_attack.py PORT [--idle N] [--post-mb M] [--stream N] [--seconds S] [--csrf T]
"""

from __future__ import annotations

import argparse
import json
import resource
import selectors
import socket
import sys
import threading
import time

HOST = "127.0.0.1"
CAMERAS = ("wrist", "middle", "left", "right", "overhead")


def hold_idle(port: int, n: int, seconds: float, out: dict) -> list[socket.socket]:
    """Open n connections that never send a byte; reopen the ones the server closes (each at most
    every 0.2 s, at most 5 n connections and 5 n failed attempts in all) until `seconds` have passed."""
    socks: list[socket.socket | None] = [None] * n
    opened = closed = failed = 0
    deadline = time.monotonic() + seconds

    def connect() -> socket.socket | None:
        nonlocal opened, failed
        s = socket.socket()
        s.settimeout(2.0)
        try:
            s.connect((HOST, port))
        except OSError:
            failed += 1
            s.close()
            return None
        s.setblocking(False)
        opened += 1
        return s

    for i in range(n):
        socks[i] = connect()
    out["idle_open_at_start"] = sum(s is not None for s in socks)
    out["ready_idle"] = True
    def more() -> bool:
        return time.monotonic() < deadline and opened < 5 * n and failed < 5 * n

    while more():
        live = {s.fileno(): i for i, s in enumerate(socks) if s is not None}
        with selectors.DefaultSelector() as sel:  # only the sockets the server closed are readable
            for fd in live:
                sel.register(fd, selectors.EVENT_READ)
            readable = [key.fd for key, _ in sel.select(0)]
        for fd in readable:
            i = live[fd]
            closed += 1
            socks[i].close()
            socks[i] = None
        for i in range(n):
            if socks[i] is None and more():
                socks[i] = connect()
        time.sleep(0.2)
    out.update(idle_opened=opened, idle_closed_by_server=closed, idle_connect_failed=failed,
               idle_open_at_end=sum(s is not None for s in socks))
    return [s for s in socks if s is not None]


def huge_post(port: int, megabytes: int, out: dict, csrf: str = "") -> None:
    """POST `megabytes` MB of JSON-looking bytes to the score API, 1 MB at a time (with the console's
    CSRF token when given: an insider, so that only the size limit stands in the way)."""
    t0 = time.monotonic()
    s = socket.create_connection((HOST, port), timeout=10)
    size = megabytes * 2**20
    head = (f"POST /api/attempts/x/score HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n" + (f"X-Spabench-CSRF: {csrf}\r\n" if csrf else "") + "\r\n").encode()
    sent = 0
    try:
        s.sendall(head + b'{"note": "')
        chunk = b"x" * 2**20
        while sent < size - 2**20:
            s.sendall(chunk)
            sent += len(chunk)
    except OSError as exc:
        out["post_send_error"] = type(exc).__name__
    out["post_sent_mb"] = round(sent / 2**20, 1)
    try:
        s.settimeout(10)
        reply = s.recv(200).decode("latin-1")
        out["post_status"] = int(reply.split()[1]) if reply.startswith("HTTP/") else None
    except (OSError, ValueError, IndexError):
        out["post_status"] = None
    s.close()
    out["post_s"] = round(time.monotonic() - t0, 3)


def stream(port: int, n: int, seconds: float, out: dict) -> None:
    """n pages polling all five live views at 8 Hz (each its own viewer id) for `seconds`."""
    import httpx

    counts = {"ok": 0, "refused": 0, "error": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def viewer(k: int) -> None:
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=2.0) as c:
            while time.monotonic() < deadline:
                for cam in CAMERAS:
                    try:
                        code = c.get(f"/api/bench/frame/{cam}.jpg", params={"viewer": f"attacker{k}"}).status_code
                        key = "ok" if code in (200, 204) else "refused"
                    except httpx.HTTPError:
                        key = "error"
                    with lock:
                        counts[key] += 1
                time.sleep(1 / 8)

    threads = [threading.Thread(target=viewer, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 10)
    out["stream"] = counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--post-mb", type=int, default=0)
    ap.add_argument("--stream", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--csrf", default="")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.idle + 256)), hard))
    out: dict = {}
    threads = []
    if args.idle:
        threads.append(threading.Thread(target=hold_idle, args=(args.port, args.idle, args.seconds, out), daemon=True))
    if args.stream:
        threads.append(threading.Thread(target=stream, args=(args.port, args.stream, args.seconds, out), daemon=True))
    for t in threads:
        t.start()
    wait = time.monotonic() + 60
    while args.idle and not out.get("ready_idle") and time.monotonic() < wait:
        time.sleep(0.05)
    if args.post_mb:
        post = threading.Thread(target=huge_post, args=(args.port, args.post_mb, out, args.csrf), daemon=True)
        post.start()
        threads.append(post)
    print(json.dumps({"ready": True, **out}), flush=True)
    for t in threads:
        t.join(args.seconds + 60)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
