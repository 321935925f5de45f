"""A VLA-0-conforming HTTP server on 127.0.0.1 (port 0) for loopback tests.

`python -m tests.support.servers.vla0_server PORT` runs it as its own process on PORT (as a policy
card's `launch.argv` or a person would start a server), until SIGTERM.

Written from the wire facts: `GET /health` -> {"status": "ok"}; `POST /predict_base64` with
{"base64_rgb": [b64 of np.save bytes of uint8 HxWx3, ...], "state": [6 floats], "instr": str}
answers a JSON array (horizon, 6). Frames are read with np.load(allow_pickle=False), as the
deployment service's numpy default does. Validation failures answer 422 like FastAPI.
"""

from __future__ import annotations

import base64
import io
import json
import time

import numpy as np

from tests.support.servers.common import (
    Faults,
    JsonHandler,
    LoopbackHTTPServer,
    apply_faults,
    reference_actions,
)


class _Handler(JsonHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        owner: Vla0TestServer = self.server.owner  # type: ignore[attr-defined]
        if self.path == "/health":
            owner.health_requests += 1
            if owner.faults.unhealthy:
                return self.send_json(200, {"status": "starting"})
            return self.send_json(200, {"status": "ok"})
        return self.send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802
        owner: Vla0TestServer = self.server.owner  # type: ignore[attr-defined]
        body = self.read_body()
        if self.path != "/predict_base64":
            return self.send_json(404, {"detail": "Not Found"})
        owner.action_requests += 1
        faults = owner.faults
        if faults.die_after is not None and owner.action_requests > faults.die_after:
            owner.http.die_soon()
            self.close_connection = True
            return None
        if faults.delay_s:
            time.sleep(faults.delay_s)
        try:
            payload = json.loads(body)
            frames = [np.load(io.BytesIO(base64.b64decode(s)), allow_pickle=False) for s in payload["base64_rgb"]]
            state = [float(v) for v in payload["state"]]
            instr = payload["instr"]
            if len(state) != 6 or not all(f.dtype == np.uint8 and f.ndim == 3 and f.shape[2] == 3 for f in frames):
                raise ValueError("state must be 6 floats and frames HxWx3 uint8")
        except Exception as exc:  # noqa: BLE001
            return self.send_json(422, {"detail": f"invalid request: {exc}"})
        owner.received.append({"frames": frames, "state": state, "instr": instr})
        if faults.error:
            return self.send_json(500, {"detail": faults.error})
        actions = apply_faults(reference_actions(state, owner.horizon), faults)
        text = json.dumps(actions.astype(np.float64).tolist())  # NaN goes out as the JSON token NaN
        return self.send_bytes(200, text.encode())


class Vla0TestServer:
    """`start()`/`stop()`/context manager; `port`, `faults`, `received` requests, counters."""

    def __init__(self, horizon: int = 8, port: int = 0) -> None:
        self.horizon = horizon
        self.faults = Faults()
        self.received: list[dict] = []
        self.health_requests = 0
        self.action_requests = 0
        self.http = LoopbackHTTPServer(_Handler, self, port)
        self.port = self.http.port

    def start(self) -> Vla0TestServer:
        self.http.start()
        return self

    def stop(self) -> None:
        self.http.stop()

    def __enter__(self) -> Vla0TestServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    import signal
    import sys

    server = Vla0TestServer(port=int(sys.argv[1])).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pause()
