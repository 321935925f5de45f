"""Policy-client overhead per request against a raw loopback round trip of the same size.

For each wire protocol whose client exists: the spabench client's `infer()` against a local server
of that protocol (openpi: spabench's OpenPiServer; GR00T/MolmoAct2/VLA-0: the protocol test servers
in tests/support/servers), versus a raw round trip over the same transport (websocket, ZeroMQ
REQ/REP, HTTP POST) moving the same number of request and reply bytes to a server that does no
work. Observation: two 480x640 RGB images (middle, wrist) + 6-D state + instruction.
The difference is the harness's encode/validate/decode cost plus the test server's own decode.

    python benchmarks/client_overhead.py [--quick] [--requests N]
"""

from __future__ import annotations

import argparse
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from _common import camera_frames, median, pct, table, write_result


def observation():
    from spabench.bench.bench import Observation

    images = {"middle": camera_frames(640, 480, 1, 1)[0], "wrist": camera_frames(640, 480, 1, 2)[0]}
    return Observation(time.monotonic(), np.array([1.0, -60, 60, 60, 0, 10]), images)


def _time(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


# ---- raw transports ----------------------------------------------------------------------------
def raw_websocket(req_bytes: int, rep_bytes: int, n: int) -> list[float]:
    from websockets.sync.client import connect
    from websockets.sync.server import serve

    reply = b"r" * rep_bytes
    server = serve(lambda ws: [ws.send(reply) for _ in ws], "127.0.0.1", 0, compression=None, max_size=None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.socket.getsockname()[1]
    payload = b"q" * req_bytes
    with connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None) as ws:
        times = _time(lambda: (ws.send(payload), ws.recv()), n)
    server.shutdown()
    return times


def raw_zmq(req_bytes: int, rep_bytes: int, n: int) -> list[float]:
    import zmq

    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    reply, stop = b"r" * rep_bytes, threading.Event()

    def serve():
        while not stop.is_set():
            if rep.poll(50):
                rep.recv()
                rep.send(reply)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    req = ctx.socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")
    payload = b"q" * req_bytes
    times = _time(lambda: (req.send(payload), req.recv()), n)
    stop.set()
    th.join()
    req.close(0)
    rep.close(0)
    ctx.term()
    return times


def raw_http(req_bytes: int, rep_bytes: int, n: int) -> list[float]:
    import requests

    reply = b"r" * rep_bytes

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/x"
    payload = b"q" * req_bytes
    with requests.Session() as s:
        times = _time(lambda: s.post(url, data=payload).content, n)
    server.shutdown()
    return times


# ---- protocol clients --------------------------------------------------------------------------
def measure(protocol: str, n: int) -> dict | None:
    from spabench.policy.card import load_card
    from spabench.policy.factory import make_client

    obs = observation()
    if protocol == "openpi":
        from spabench.serve.openpi_server import OpenPiServer

        horizon = 50
        server = OpenPiServer(lambda o: {"actions": np.zeros((horizon, 6), np.float32)}, {}, port=0)
        card = load_card("pi05")
        raw_fn = raw_websocket
    elif protocol == "groot":
        from tests.support.servers.groot_server import GrootTestServer

        card = load_card("groot_fft")
        server = GrootTestServer(horizon=card.horizon)
        raw_fn = raw_zmq
    elif protocol == "molmoact2":
        from tests.support.servers.molmoact2_server import MolmoAct2TestServer

        card = load_card("molmoact2")
        server = MolmoAct2TestServer(horizon=card.horizon)
        raw_fn = raw_http
    elif protocol == "vla0":
        from tests.support.servers.vla0_server import Vla0TestServer

        card = load_card("vla0")
        server = Vla0TestServer(horizon=card.horizon)
        raw_fn = raw_http
    else:
        return None
    with server:
        if protocol == "openpi":
            card.port, card.horizon, card.execute_steps = server.port, 50, 50
        else:
            card.port = server.port
        card.host, card.api_key_env = "127.0.0.1", None
        client = make_client(card)
        client.connect()
        client.reset()
        client.infer(obs, "warm up")
        times = _time(lambda: client.infer(obs, "Place the red block in the bowl."), n)
        client.close()
    req_bytes = sum(img.nbytes for img in obs.images.values()) + 6 * 4 + 64
    rep_bytes = card.horizon * 6 * 4 + 64
    raw = raw_fn(req_bytes, rep_bytes, n)
    c50, r50 = pct(times, 50) * 1e3, pct(raw, 50) * 1e3
    return {"client_p50_ms": c50, "client_p99_ms": pct(times, 99) * 1e3, "raw_p50_ms": r50,
            "raw_p99_ms": pct(raw, 99) * 1e3, "overhead_p50_ms": c50 - r50, "request_bytes": req_bytes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 requests per protocol, 2 runs")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None)
    args = ap.parse_args()
    n = args.requests or (30 if args.quick else 200)
    runs = args.runs or (2 if args.quick else 3)
    from spabench.policy.factory import CLIENTS

    results: dict[str, list[dict]] = {}
    skipped = {}
    for protocol in CLIENTS:
        for _ in range(runs):
            try:
                r = measure(protocol, n)
            except (ImportError, ModuleNotFoundError) as exc:
                skipped[protocol] = f"not available: {exc}"
                break
            if r is None:
                skipped[protocol] = "no loopback server to measure against"
                break
            results.setdefault(protocol, []).append(r)
    summary = {p: {k: median([r[k] for r in rs]) for k in rs[0]} for p, rs in results.items()}
    rows = [(p, s["client_p50_ms"], s["client_p99_ms"], s["raw_p50_ms"], s["overhead_p50_ms"]) for p, s in summary.items()]
    print(f"\nPolicy client per request vs raw loopback round trip (same bytes), {n} requests, median of {runs}")
    print(table(rows, ("protocol", "client_p50_ms", "client_p99_ms", "raw_p50_ms", "overhead_p50_ms")))
    for p, why in skipped.items():
        print(f"skipped {p}: {why}")
    path = write_result("client_overhead", {"loadavg_1min_at_end": __import__("os").getloadavg()[0], "requests": n,
                                            "runs": runs, "summary": summary, "skipped": skipped,
                                            "runs_detail": results})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
