"""VLA-0 over HTTP JSON: `GET /health`, `POST /predict_base64`.

Wire facts (VLA-0's FastAPI deployment service, default port 10000, see shared/wire-protocols.md):
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
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.adapters import decode_action_chunk, policy_images, state_vector
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault
from spabench.policy.http_transport import HttpTransport, TransportFailure, base_url
from spabench.policy.wire_common import (
    Backoff,
    card_extra,
    npy_bytes,
    positive_int,
    server_label,
)

__all__ = ["Vla0Client", "npy_b64"]


def npy_b64(frame: Any) -> str:
    """Base64 text of the `.npy` bytes of a frame (VLA-0's image encoding)."""
    return base64.b64encode(npy_bytes(frame)).decode("ascii")


class Vla0Client(PolicyClient):
    """PolicyClient for a VLA-0 deployment server (`vla0` cards)."""

    def __init__(self, card: Any) -> None:
        if card.protocol != "vla0":
            raise ConfigError(f"policy card '{card.name}': Vla0Client needs protocol 'vla0', not {card.protocol!r}")
        if not card.cameras:
            raise ConfigError(f"policy card '{card.name}': field 'cameras' is empty "
                              "(VLA-0 takes the frames in order, e.g. wrist then middle)")
        extra = card_extra(card)
        self.card = card
        self.camera_order = list(card.cameras.values())
        self.connect_attempts = positive_int(card, "connect_attempts", extra.get("connect_attempts"), 3)
        self.server = server_label(card)
        key = card.api_key() if hasattr(card, "api_key") else None
        headers = {"Authorization": f"Api-Key {key}"} if key else {}
        self.url = base_url(card.host, card.port)
        self.http = HttpTransport(self.url, card.timeout_s, headers)
        self._chunk_id = 0
        self.metadata: dict[str, Any] = {}

    def _health(self) -> dict:
        try:
            reply = self.http.request("GET", "/health")
        except TransportFailure as exc:
            raise PolicyFault(f"{self.server}: health check failed: {exc}") from None
        try:
            body = json.loads(reply.body)
        except ValueError:
            body = None
        if reply.status != 200 or not isinstance(body, Mapping) or body.get("status") != "ok":
            text = reply.body.decode("utf-8", errors="replace")[:200]
            raise PolicyFault(f"{self.server}: GET /health must answer {{\"status\": \"ok\"}}; "
                              f"got HTTP {reply.status}: {text!r}")
        return dict(body)

    def connect(self) -> dict:
        last: Exception | None = None
        backoff = Backoff()
        for attempt in range(self.connect_attempts):
            if attempt:
                backoff.wait()
            try:
                health = self._health()
                break
            except PolicyFault as exc:
                last = exc
        else:
            raise PolicyFault(f"{self.server}: not healthy after {self.connect_attempts} attempt(s): {last}")
        self.metadata = {"protocol": "vla0", "url": self.url, "camera_order": self.camera_order, **health}
        return self.metadata

    def reset(self) -> None:
        """Episode start: VLA-0 keeps no episode state; start on fresh connections, check health."""
        self.http.drop_connections()
        self._health()

    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        frames = policy_images(obs, self.card)  # in the card's camera order
        payload = {
            "base64_rgb": [npy_b64(frame) for frame in frames.values()],
            "state": [float(v) for v in state_vector(obs, np.float64)],
            "instr": str(instruction),
        }
        body = json.dumps(payload).encode("utf-8")
        sent_t = time.monotonic()
        try:
            reply = self.http.request("POST", "/predict_base64", body=body)
        except TransportFailure as exc:
            raise PolicyFault(f"{self.server}: {exc}") from None
        received_t = time.monotonic()
        if reply.status != 200:
            text = reply.body.decode("utf-8", errors="replace")[:300]
            raise PolicyFault(f"{self.server}: POST /predict_base64 answered HTTP {reply.status}: {text}")
        try:
            data = json.loads(reply.body)
        except ValueError as exc:
            raise ProtocolError(f"{self.server}: reply is not JSON ({exc}); expected an array "
                                f"({self.card.horizon}, {self.card.action_dim})") from None
        actions = decode_action_chunk(data, self.card, "(response body)")
        self._chunk_id += 1
        return ActionChunk(actions=actions, chunk_id=self._chunk_id,
                           sent_t=sent_t, received_t=received_t, rtt_s=received_t - sent_t, server_ms=None)

    def close(self) -> None:
        self.http.close()
