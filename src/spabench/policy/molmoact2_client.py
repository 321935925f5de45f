"""MolmoAct2 over HTTP: `POST /act` with a json_numpy body, `GET /act` status.

Wire facts (MolmoAct2's FastAPI servers; policies/molmoact2.md has the server side): the request body is JSON in
which numpy arrays are json_numpy objects `{"__numpy__": <base64 of the raw C-order bytes>,
"dtype": <numpy dtype descr, e.g. "|u1", "<f4">, "shape": [..]}` (a scalar has shape []); it holds
one HxWx3 uint8 frame per camera key, `instruction` (str), `state` (float32 vector) and, for some
deployments, `normalization_tag`. The compact form sends the frames instead as base64 JPEG
(quality 85) under `images_jpeg: {name: b64}`. The reply is `{"actions": (N, D), "dt_ms": float}`;
errors come back as a non-200 status with `{"error": ...}`. `GET /act` answers a status map
(`status`, `repo_id`, `norm_tag`, ...). Frames go at native resolution: the checkpoint's own
processor resizes, and a client-side pre-resize changes the policy's behaviour.

Card `extra` keys read here:
  image_encoding     "json_numpy" (default) or "jpeg"
  normalization_tag  sent with every request when set; checked against the status's norm_tag
  num_steps          flow-matching steps, sent when set
  jpeg_keys          {server_key: jpeg name} for the compact form (default: the server key)
  jpeg_quality       default 85
  connect_attempts   status attempts at connect, with backoff (default 3)
`cameras` maps server keys (e.g. external_cam, wrist_cam) to bench cameras, in the checkpoint's order.
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
from spabench.policy.client import ActionChunk, PolicyFault
from spabench.policy.http_transport import HttpPolicyClient
from spabench.policy.wire_common import (
    card_extra,
    card_key,
    finite_or_none,
    positive_int,
    require_cameras,
    require_protocol,
)

__all__ = ["MolmoAct2Client", "IMAGE_ENCODINGS", "json_numpy_dumps", "json_numpy_loads", "jpeg_b64"]

IMAGE_ENCODINGS: tuple[str, ...] = ("json_numpy", "jpeg")
NUMPY_TAG = "__numpy__"


# -- json_numpy codec (own implementation of the json-numpy package's format) ----------------


def _json_numpy_default(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype.kind in "OV" or obj.dtype.fields is not None:
            raise TypeError(f"refusing to send a {obj.dtype} array as json_numpy (plain numeric dtypes only)")
        array = np.ascontiguousarray(obj)
        return {NUMPY_TAG: base64.b64encode(array.tobytes()).decode("ascii"),
                "dtype": array.dtype.str, "shape": list(np.shape(obj))}
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def json_numpy_dumps(obj: Any) -> str:
    """JSON text with numpy arrays/scalars as json_numpy objects."""
    return json.dumps(obj, default=_json_numpy_default)


def json_numpy_loads(text: str | bytes, server: str = "json_numpy peer") -> Any:
    """Parse JSON, turning json_numpy objects back into arrays (scalars for shape []).

    Only plain numeric/bool dtypes are accepted: an object dtype would mean unpickling."""

    def hook(obj: dict) -> Any:
        if NUMPY_TAG not in obj:
            return obj
        try:
            descr = obj["dtype"]
            if not isinstance(descr, str):
                raise ValueError(f"dtype {descr!r} is not a simple dtype string")
            dtype = np.dtype(descr)
            if dtype.kind in "OV" or dtype.fields is not None:
                raise ValueError(f"dtype {descr!r} is not a plain numeric dtype")
            raw = base64.b64decode(obj[NUMPY_TAG], validate=True)
            flat = np.frombuffer(raw, dtype=dtype)
            shape = obj.get("shape")
            return flat.reshape(shape) if shape else flat[0]
        except Exception as exc:  # noqa: BLE001 - malformed array object
            raise ProtocolError(f"{server}: malformed json_numpy array in reply ({exc})") from None

    try:
        return json.loads(text, object_hook=hook)
    except ProtocolError:
        raise
    except ValueError as exc:
        raise ProtocolError(f"{server}: reply is not JSON ({exc})") from None


def jpeg_b64(frame: np.ndarray, quality: int = 85) -> str:
    """Base64 of an RGB frame encoded as JPEG at `quality`."""
    import cv2

    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR), [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    if not ok:
        raise ConfigError("OpenCV could not JPEG-encode a camera frame")
    return base64.b64encode(buf.tobytes()).decode("ascii")


# -- client ----------------------------------------------------------------------------------


class MolmoAct2Client(HttpPolicyClient):
    """PolicyClient for a MolmoAct2 `/act` server (`molmoact2` cards)."""

    def __init__(self, card: Any) -> None:
        require_protocol(card, "molmoact2", "MolmoAct2Client")
        require_cameras(card, "MolmoAct2 needs >= 1 camera")
        extra = card_extra(card)
        encoding = extra.get("image_encoding", "json_numpy")
        if encoding not in IMAGE_ENCODINGS:
            raise ConfigError(f"policy card '{card.name}': field 'extra.image_encoding' is {encoding!r} "
                              f"(allowed: {', '.join(IMAGE_ENCODINGS)})")
        tag = extra.get("normalization_tag")
        if tag is not None and not isinstance(tag, str):
            raise ConfigError(f"policy card '{card.name}': field 'extra.normalization_tag' must be a string")
        jpeg_keys = extra.get("jpeg_keys") or {}
        if not isinstance(jpeg_keys, Mapping):
            raise ConfigError(f"policy card '{card.name}': field 'extra.jpeg_keys' must map server_key -> name")
        quality = extra.get("jpeg_quality", 85)
        if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
            raise ConfigError(f"policy card '{card.name}': field 'extra.jpeg_quality' is {quality!r} "
                              "(allowed: an integer 1..100)")
        self.card = card
        self.image_encoding = encoding
        self.normalization_tag = tag
        self.num_steps = None if extra.get("num_steps") is None else positive_int(
            card, "num_steps", extra.get("num_steps"), 10)
        self.jpeg_keys = {k: str(jpeg_keys.get(k, k)) for k in card.cameras}
        self.jpeg_quality = quality
        self.state_key = card_key(card, "state_key", "state")
        self.prompt_key = card_key(card, "prompt_key", "instruction")
        self._open_http(card, extra)

    def _status(self) -> dict:
        reply = self._get("/act", "status request")
        if reply.status != 200:
            raise PolicyFault(f"{self.server}: GET /act answered HTTP {reply.status}: {_snippet(reply.body)}")
        status = json_numpy_loads(reply.body, self.server)
        if not isinstance(status, Mapping) or status.get("status") != "ok":
            raise PolicyFault(f"{self.server}: GET /act did not report status 'ok' (got {_snippet(reply.body)})")
        return dict(status)

    _probe = _status

    def connect(self) -> dict:
        status = self._probe_until_ready("not ready")
        server_tag = status.get("norm_tag")
        if self.normalization_tag and server_tag and server_tag != self.normalization_tag:
            raise ConfigError(f"policy card '{self.card.name}': field 'extra.normalization_tag' is "
                              f"{self.normalization_tag!r} but the server runs norm_tag {server_tag!r}")
        self.metadata = {"protocol": "molmoact2", "url": self.url + "/act",
                         "image_encoding": self.image_encoding, **status}
        return self.metadata

    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        body = json_numpy_dumps(self._payload(obs, instruction)).encode("utf-8")
        reply, sent_t, received_t = self._post("/act", body, _snippet)
        data = json_numpy_loads(reply.body, self.server)
        if not isinstance(data, Mapping) or "actions" not in data:
            raise ProtocolError(f"{self.server}: reply lacks field 'actions'; expected "
                                f"{{'actions': ({self.card.horizon}, {self.card.action_dim}), 'dt_ms': float}}")
        actions = decode_action_chunk(data["actions"], self.card, "actions")
        server_ms = finite_or_none(data.get("dt_ms"), field="dt_ms", server=self.server)
        return self._chunk(actions, sent_t, received_t, server_ms)

    def _payload(self, obs: Any, instruction: str) -> dict:
        frames = policy_images(obs, self.card)
        payload: dict[str, Any] = {}
        if self.image_encoding == "jpeg":
            payload["images_jpeg"] = {self.jpeg_keys[k]: jpeg_b64(f, self.jpeg_quality) for k, f in frames.items()}
        else:
            payload.update(frames)
        payload[self.prompt_key] = str(instruction)
        payload[self.state_key] = state_vector(obs, np.float32)
        payload["timestamp"] = time.time()
        if self.normalization_tag:
            payload["normalization_tag"] = self.normalization_tag
        if self.num_steps is not None:
            payload["num_steps"] = self.num_steps
        return payload


def _snippet(body: bytes, limit: int = 300) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."
