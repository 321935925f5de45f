"""A GR00T-conforming ZeroMQ REP server (N1.6+ and N1.5 variants) for loopback tests.

Written from the wire facts, with its own codec: msgpack maps, numpy arrays as
{"__ndarray_class__": True, "as_npy": np.save bytes} (allow_pickle=False both ways), ModalityConfig
as {"__ModalityConfig_class__": True, "as_json": ...} (a dict in N1.6, a JSON string in N1.5),
errors as {"error": text}. It checks observations the way GR00T's strict policy does (dtype,
rank, batch/time axes) and answers the reference actions of `common.reference_actions` per
action group, computed from the state group of the same name.

N1.5 replies are shaped as upstream's `Gr00tPolicy.get_action` shapes them (Isaac-GR00T
gr00t/model/policy.py): an unbatched observation (state (1, D), rank < 3) is unsqueezed to
(1, 1, D), the model answers (1, horizon, D), and `squeeze_dict_values` applies `np.squeeze`, which
drops every axis of length 1, so a one-joint group (the gripper) arrives as (horizon,), not
(horizon, 1). version="n1.5-torch" is the older N1.5 wire (gr00t/eval/service.py before msgpack):
`TorchSerializer`, torch.save/torch.load(weights_only=False) both ways; a request it cannot load
(msgpack from a newer client) is answered with a torch-pickled {"error": ...}, as upstream's
`except Exception` branch does.
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import msgpack
import numpy as np
import zmq

from tests.support.servers.common import Faults, apply_faults, reference_actions

LANGUAGE_KEY = "annotation.human.task_description"


def pack(obj: Any) -> bytes:
    def default(o: Any) -> Any:
        if isinstance(o, np.ndarray):
            buf = io.BytesIO()
            np.save(buf, o, allow_pickle=False)
            return {"__ndarray_class__": True, "as_npy": buf.getvalue()}
        raise TypeError(type(o).__name__)

    return msgpack.packb(obj, default=default, use_bin_type=True)


def unpack(data: bytes) -> Any:
    def hook(o: dict) -> Any:
        if "__ndarray_class__" in o:
            return np.load(io.BytesIO(o["as_npy"]), allow_pickle=False)
        return o

    return msgpack.unpackb(data, object_hook=hook, raw=False)


class GrootTestServer:
    """REP socket on tcp://127.0.0.1:<random port>; `start()`/`stop()`; context manager."""

    def __init__(self, version: str = "n1.6", horizon: int = 16,
                 video_keys: tuple[str, ...] = ("front", "wrist"),
                 state_groups: dict[str, int] | None = None,
                 action_groups: dict[str, int] | None = None,
                 language_key: str = LANGUAGE_KEY, api_token: str | None = None) -> None:
        assert version in ("n1.6", "n1.5", "n1.5-torch")
        self.version = version
        self.horizon = horizon
        self.video_keys = tuple(video_keys)
        self.state_groups = dict(state_groups or {"single_arm": 5, "gripper": 1})
        self.action_groups = dict(action_groups or self.state_groups)
        self.language_key = language_key
        self.api_token = api_token
        self.faults = Faults()
        self.received: list[tuple[str, Any]] = []
        self.resets = 0
        self.action_requests = 0
        self.replies = 0
        self.dead = False
        self._stopped = threading.Event()
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self.port = self._sock.bind_to_random_port("tcp://127.0.0.1")
        self._thread = threading.Thread(target=self._loop, daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> GrootTestServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if not self._sock.closed:
            self._sock.close(linger=0)
        self._ctx.term()

    def __enter__(self) -> GrootTestServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            if not self._sock.poll(50):
                continue
            message = self._sock.recv()
            if self.version == "n1.5-torch":
                self._sock.send(self._torch_reply(message))
                self.replies += 1
                continue
            reply = self._handle(message)
            if reply is None:  # died mid-episode: never answer again
                self.dead = True
                self._sock.close(linger=0)
                return
            self._sock.send(pack(reply))
            self.replies += 1

    def _torch_reply(self, message: bytes) -> bytes:
        """The pre-msgpack N1.5 server: it can only torch.load; a msgpack request fails to load."""
        import torch

        self.received.append(("<torch wire>", None))
        try:
            request = torch.load(io.BytesIO(message), weights_only=True)  # upstream: False; a test needs no risk
            reply: Any = {"status": "ok"} if isinstance(request, dict) else {"error": "bad request"}
        except Exception as exc:  # noqa: BLE001 - upstream answers every failure with an error dict
            reply = {"error": str(exc)}
        buf = io.BytesIO()
        torch.save(reply, buf)
        return buf.getvalue()

    # -- endpoints ---------------------------------------------------------------------------
    def _handle(self, message: bytes) -> Any:
        try:
            request = unpack(message)
        except Exception as exc:  # noqa: BLE001
            return {"error": f"undecodable request: {exc}"}
        if self.api_token is not None and request.get("api_token") != self.api_token:
            return {"error": "Unauthorized: Invalid API token"}
        endpoint = request.get("endpoint", "get_action")
        self.received.append((endpoint, request.get("data")))
        if endpoint == "ping":
            return {"status": "ok", "message": "Server is running"}
        if endpoint == "get_modality_config":
            return self._modality_config()
        if endpoint == "reset" and self.version == "n1.6":
            self.resets += 1
            return {}
        if endpoint == "get_action":
            return self._get_action(request.get("data") or {})
        return {"error": f"Unknown endpoint: {endpoint}"}

    def _modality_config(self) -> dict:
        prefix = "" if self.version == "n1.6" else None
        spec = {
            "video": list(self.video_keys),
            "state": list(self.state_groups),
            "action": list(self.action_groups),
            "language": [self.language_key],
        }
        out = {}
        for modality, keys in spec.items():
            if prefix is None and modality != "language":
                keys = [f"{modality}.{k}" for k in keys]
            body = {"delta_indices": list(range(self.horizon)) if modality == "action" else [0],
                    "modality_keys": keys}
            as_json: Any = body if self.version == "n1.6" else json.dumps(body)
            out[modality] = {"__ModalityConfig_class__": True, "as_json": as_json}
        return out

    def _get_action(self, data: dict) -> Any:
        self.action_requests += 1
        faults = self.faults
        if faults.die_after is not None and self.action_requests > faults.die_after:
            return None
        if faults.delay_s:
            self._stopped.wait(faults.delay_s)
        if faults.error:
            return {"error": faults.error}
        try:
            states = self._check_observation(data)
        except AssertionError as exc:
            return {"error": str(exc)}
        actions = {}
        for i, (group, dim) in enumerate(self.action_groups.items()):
            base = states.get(group, np.zeros(dim))
            arr = reference_actions(base, self.horizon, dim)
            if i == 0:
                arr = apply_faults(arr, faults)
            actions[group] = arr
        if self.version == "n1.5":  # (1, horizon, D) -> np.squeeze, as Gr00tPolicy does
            return {f"action.{g}": np.squeeze(a[np.newaxis]) for g, a in actions.items()}
        return [{g: a[np.newaxis] for g, a in actions.items()}, {}]

    def _check_observation(self, data: dict) -> dict[str, np.ndarray]:
        """GR00T's strict checks; returns each state group's vector."""
        if self.version == "n1.5":
            obs = data
            for key in self.video_keys:
                video = obs.get(f"video.{key}")
                assert isinstance(video, np.ndarray), f"Video key 'video.{key}' must be in observation"
                assert video.dtype == np.uint8 and video.ndim == 4 and video.shape[0] == 1 and video.shape[-1] == 3, \
                    f"video.{key} must be uint8 (1, H, W, 3), got {video.dtype} {video.shape}"
            states = {}
            for group, dim in self.state_groups.items():
                state = obs.get(f"state.{group}")
                assert isinstance(state, np.ndarray) and state.shape == (1, dim), \
                    f"state.{group} must be (1, {dim}), got {getattr(state, 'shape', None)}"
                states[group] = state[0]
            text = obs.get(self.language_key)
            assert isinstance(text, list) and len(text) == 1 and isinstance(text[0], str), \
                f"{self.language_key} must be [str]"
            return states
        assert set(data) >= {"observation", "options"}, "get_action data must hold observation and options"
        obs = data["observation"]
        for modality in ("video", "state", "language"):
            assert isinstance(obs.get(modality), dict), f"Observation must contain a '{modality}' key"
        for key in self.video_keys:
            video = obs["video"].get(key)
            assert isinstance(video, np.ndarray), f"Video key '{key}' must be in observation"
            assert video.dtype == np.uint8, f"Video key '{key}' must be uint8, got {video.dtype}"
            assert video.ndim == 5 and video.shape[:2] == (1, 1) and video.shape[-1] == 3, \
                f"Video key '{key}' must be (1, 1, H, W, 3), got {video.shape}"
        states = {}
        for group, dim in self.state_groups.items():
            state = obs["state"].get(group)
            assert isinstance(state, np.ndarray), f"State key '{group}' must be in observation"
            assert state.dtype == np.float32, f"State key '{group}' must be float32, got {state.dtype}"
            assert state.shape == (1, 1, dim), f"State key '{group}' must be (1, 1, {dim}), got {state.shape}"
            states[group] = state[0, 0]
        text = obs["language"].get(self.language_key)
        assert isinstance(text, list) and len(text) == 1 and isinstance(text[0], list) \
            and len(text[0]) == 1 and isinstance(text[0][0], str), f"Language key '{self.language_key}' must be [[str]]"
        return states
