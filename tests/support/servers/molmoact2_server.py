"""A MolmoAct2-conforming `/act` HTTP server on 127.0.0.1 (port 0) for loopback tests.

Written from the wire facts with its own json_numpy decoding: arrays arrive as
{"__numpy__": base64 raw bytes, "dtype": descr, "shape": [...]}; frames either under the camera
keys (json_numpy, HxWx3 uint8), as upstream's servers (allenai/molmoact2 examples/yam
host_server_yam.py: `payload["top_cam"]` etc., a KeyError answered 400 "missing required field"),
or, only with accept_jpeg=True (the server change policies/molmoact2.md names; no upstream server
has it), as base64 JPEG under `images_jpeg`. `GET /act` reports status;
`POST /act` answers json_numpy {"actions": (horizon, action_dim) float32, "dt_ms": float};
errors are HTTP 400/500 with {"error": text}.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import numpy as np

from tests.support.servers.common import (
    Faults,
    JsonHandler,
    LoopbackHTTPServer,
    apply_faults,
    reference_actions,
)


def _decode_numpy(obj: dict) -> Any:
    if "__numpy__" in obj:
        arr = np.frombuffer(base64.b64decode(obj["__numpy__"]), dtype=np.dtype(obj["dtype"]))
        return arr.reshape(obj["shape"]) if obj["shape"] else arr[0]
    return obj


def _encode_numpy(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {"__numpy__": base64.b64encode(arr.tobytes()).decode(), "dtype": arr.dtype.str,
                "shape": list(arr.shape)}
    raise TypeError(type(obj).__name__)


class _Handler(JsonHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        owner: MolmoAct2TestServer = self.server.owner  # type: ignore[attr-defined]
        if self.path != "/act":
            return self.send_json(404, {"error": f"no route {self.path}"})
        owner.status_requests += 1
        if owner.faults.unhealthy:
            return self.send_json(503, {"status": "loading"})
        return self.send_json(200, {"status": "ok", "repo_id": "test/MolmoAct2-tiny", "norm_tag": owner.norm_tag,
                                    "num_cameras": len(owner.camera_keys), "state_dim": 6})

    def do_POST(self) -> None:  # noqa: N802
        owner: MolmoAct2TestServer = self.server.owner  # type: ignore[attr-defined]
        body = self.read_body()
        if self.path != "/act":
            return self.send_json(404, {"error": f"no route {self.path}"})
        owner.action_requests += 1
        faults = owner.faults
        if faults.die_after is not None and owner.action_requests > faults.die_after:
            owner.http.die_soon()
            self.close_connection = True
            return None  # drop the connection without a reply
        t0 = time.perf_counter()
        if faults.delay_s:
            time.sleep(faults.delay_s)
        try:
            payload = json.loads(body, object_hook=_decode_numpy)
        except Exception as exc:  # noqa: BLE001
            return self.send_json(400, {"error": f"failed to decode json_numpy body: {exc}"})
        owner.received.append(payload)
        if faults.error:
            return self.send_json(500, {"error": f"inference failed: {faults.error}"})
        try:
            state = owner.check_payload(payload)
        except KeyError as exc:
            return self.send_json(400, {"error": f"missing required field: {exc}"})
        except ValueError as exc:
            return self.send_json(400, {"error": f"bad request: {exc}"})
        actions = apply_faults(reference_actions(state, owner.horizon, owner.action_dim), faults)
        reply = {"actions": actions, "dt_ms": (time.perf_counter() - t0) * 1000.0 + 1.0}
        return self.send_bytes(200, json.dumps(reply, default=_encode_numpy).encode())


class MolmoAct2TestServer:
    """`start()`/`stop()`/context manager; `port`, `faults`, `received` payloads, counters."""

    def __init__(self, camera_keys: tuple[str, ...] = ("external_cam", "wrist_cam"), horizon: int = 30,
                 action_dim: int = 6, norm_tag: str = "so100_so101_molmoact2", accept_jpeg: bool = False) -> None:
        self.accept_jpeg = accept_jpeg
        self.camera_keys = tuple(camera_keys)
        self.horizon = horizon
        self.action_dim = action_dim
        self.norm_tag = norm_tag
        self.faults = Faults()
        self.received: list[dict] = []
        self.status_requests = 0
        self.action_requests = 0
        self.decoded_jpeg_shapes: list[dict[str, tuple]] = []
        self.http = LoopbackHTTPServer(_Handler, self)
        self.port = self.http.port

    def start(self) -> MolmoAct2TestServer:
        self.http.start()
        return self

    def stop(self) -> None:
        self.http.stop()

    def __enter__(self) -> MolmoAct2TestServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def check_payload(self, payload: dict) -> np.ndarray:
        """Validate a request like the real server and return its state vector."""
        if "images_jpeg" in payload and self.accept_jpeg:
            import cv2

            shapes = {}
            for name, text in payload["images_jpeg"].items():
                raw = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
                image = cv2.imdecode(raw, cv2.IMREAD_COLOR)
                if image is None:
                    raise ValueError(f"images_jpeg[{name!r}] is not a JPEG")
                shapes[name] = image.shape
            self.decoded_jpeg_shapes.append(shapes)
        else:
            for key in self.camera_keys:
                image = payload[key]
                if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 \
                        or image.shape[2] != 3:
                    raise ValueError(f"image must be HxWx3 uint8, got {getattr(image, 'shape', type(image))}")
        str(payload["instruction"])
        state = np.asarray(payload["state"], dtype=np.float32).reshape(-1)
        if state.shape != (6,):
            raise ValueError(f"state must be shape (6,), got {state.shape}")
        return state
