"""VLA-0 over HTTP JSON: `GET /health`, `POST /predict_base64`.

Wire facts (VLA-0's FastAPI deployment service, default port 10000; policies/vla0.md has the
server side):
`GET /health` answers `{"status": "ok"}`; `POST /predict_base64` takes
`{"base64_rgb": [b64(np.save(uint8 HxWx3)), ...], "state": [6 floats, degrees], "instr": str}`
where each image is the base64 of `.npy` bytes (not JPEG) in a fixed camera order, and answers a
JSON array (horizon, 6) of absolute joint targets. The evaluated deployment sent the wrist camera
first, then the middle camera, and executed the first 4 of 8 steps per request; the card's
`cameras` order and `execute_steps` say so.

The health check runs in `connect()`, which the runtime calls before the robot connects, so a dead
server is reported before anything moves. Card `extra`: connect_attempts (default 3).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from spabench.errors import ProtocolError
from spabench.policy.adapters import decode_action_chunk, policy_images, state_vector
from spabench.policy.client import ActionChunk, PolicyFault
from spabench.policy.http_transport import HttpPolicyClient
from spabench.policy.wire_common import card_extra, npy_bytes, require_cameras, require_protocol

__all__ = ["Vla0Client", "npy_b64"]


def npy_b64(frame: Any) -> str:
    """Base64 text of the `.npy` bytes of a frame (VLA-0's image encoding)."""
    return base64.b64encode(npy_bytes(frame)).decode("ascii")


class Vla0Client(HttpPolicyClient):
    """PolicyClient for a VLA-0 deployment server (`vla0` cards)."""

    def __init__(self, card: Any) -> None:
        require_protocol(card, "vla0", "Vla0Client")
        require_cameras(card, "VLA-0 takes the frames in order, e.g. wrist then middle")
        extra = card_extra(card)
        self.card = card
        self.camera_order = list(card.cameras.values())
        self._open_http(card, extra)

    def _health(self) -> dict:
        reply = self._get("/health", "health check")
        try:
            body = json.loads(reply.body)
        except ValueError:
            body = None
        if reply.status != 200 or not isinstance(body, Mapping) or body.get("status") != "ok":
            text = reply.body.decode("utf-8", errors="replace")[:200]
            raise PolicyFault(f"{self.server}: GET /health must answer {{\"status\": \"ok\"}}; "
                              f"got HTTP {reply.status}: {text!r}")
        return dict(body)

    _probe = _health

    def connect(self) -> dict:
        health = self._probe_until_ready("not healthy")
        self.metadata = {"protocol": "vla0", "url": self.url, "camera_order": self.camera_order, **health}
        return self.metadata

    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        frames = policy_images(obs, self.card)  # in the card's camera order
        payload = {
            "base64_rgb": [npy_b64(frame) for frame in frames.values()],
            "state": [float(v) for v in state_vector(obs, np.float64)],
            "instr": str(instruction),
        }
        body = json.dumps(payload).encode("utf-8")
        reply, sent_t, received_t = self._post("/predict_base64", body, _error_text)
        try:
            data = json.loads(reply.body)
        except ValueError as exc:
            raise ProtocolError(f"{self.server}: reply is not JSON ({exc}); expected an array "
                                f"({self.card.horizon}, {self.card.action_dim})") from None
        actions = decode_action_chunk(data, self.card, "(response body)")
        return self._chunk(actions, sent_t, received_t)


def _error_text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")[:300]
