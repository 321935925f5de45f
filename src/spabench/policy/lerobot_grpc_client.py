"""LeRobot async inference (gRPC service `AsyncInference`), spoken with LeRobot's own stubs.

HAZARD. Every payload of this protocol is a Python pickle: the client pickles a
`RemotePolicyConfig` (which checkpoint the server loads) and `TimedObservation`s, and the server
answers a pickled `list[TimedAction]`. The server unpickles whatever it is sent, which lets any
peer run code on it, and a client that unpickles a reply lets the server run code on the robot
computer (LeRobot issue 3047). This client therefore:
  * refuses at construction to talk to a host that is not loopback (127.0.0.0/8, ::1,
    localhost) unless the card sets `allow_remote_pickle: true` (use an authenticated tunnel);
  * unpickles replies with a restricted unpickler that resolves only the handful of globals a
    `list[TimedAction]` of CPU tensors needs, and loads tensor storages with
    `torch.load(weights_only=True)`; anything else is a ProtocolError. This narrows the hazard, it
    does not make the protocol safe: prefer `spabench serve lerobot` (openpi websocket, no pickle).

Calls: `Ready` (handshake; also flushes the server's queues, used as the per-episode reset),
`SendPolicyInstructions(PolicySetup{data})`, `SendObservations(stream Observation{transfer_state,
data})` (2 MB pieces, BEGIN/MIDDLE/END), `GetActions(Empty) -> Actions{data}` (empty data: no chunk).

Card `extra` keys read here:
  policy_type             LeRobot policy type the server loads (act, smolvla, pi0, pi05, ...)  [required]
  pretrained_name_or_path checkpoint path or hub id, as seen by the server                     [required]
  policy_device           device on the server (default "cpu")
  actions_per_chunk       actions the server returns per chunk (default: card.horizon)
  camera_shapes           {server_key: [H, W]} announced in the features (default: image_size or 480x640)
  rename_map              LeRobot observation rename map (default {})
  load_timeout_s          budget for SendPolicyInstructions (policy load; default max(120, timeout_s))
`cameras` maps the policy's image feature names (observation.images.<key>) to bench cameras.
"""

from __future__ import annotations

import io
import ipaddress
import pickle  # nosec - see the restricted unpickler below
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.adapters import policy_images, state_vector
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault
from spabench.policy.wire_common import (
    card_extra,
    check_action_array,
    positive_int,
    probe_with_retries,
    require_cameras,
    require_protocol,
    server_label,
)
from spabench.suite.vocabulary import JOINTS

__all__ = ["LeRobotGrpcClient", "is_loopback_host", "restricted_loads", "PICKLE_HAZARD"]

PICKLE_HAZARD = (
    "LeRobot's async-inference gRPC protocol exchanges Python pickles in both directions, so a peer "
    "can run arbitrary code on the other side (LeRobot issue 3047)"
)
CHUNK_BYTES = 2 * 1024 * 1024  # LeRobot's piece size for streamed observations
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
_TRANSFER_BEGIN, _TRANSFER_MIDDLE, _TRANSFER_END = 1, 2, 3  # transport.TransferState
_RETRYABLE_CODES = ("UNKNOWN", "INTERNAL")


def is_loopback_host(host: str) -> bool:
    """True for localhost and loopback literals (127.0.0.0/8, ::1); names are not resolved."""
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# -- restricted unpickling of the server's reply ---------------------------------------------


def _storage_from_bytes(data: bytes):
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


_ALLOWED_GLOBALS = {
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("lerobot.async_inference.helpers", "TimedAction"),
}


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return _storage_from_bytes  # weights-only load instead of torch's unrestricted one
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to unpickle global {module}.{name}")


def restricted_loads(data: bytes, server: str = "LeRobot gRPC server") -> Any:
    """Unpickle a GetActions payload, resolving only what a list[TimedAction] needs."""
    try:
        return _ReplyUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - any refusal or corruption is a protocol breach
        raise ProtocolError(f"{server}: Actions payload refused by the restricted unpickler ({exc})") from None


# -- client ----------------------------------------------------------------------------------


class LeRobotGrpcClient(PolicyClient):
    """PolicyClient for LeRobot's async-inference PolicyServer (`lerobot_grpc` cards)."""

    identity_probe_between_trials = False   # connect makes the server load the checkpoint this client names

    def __init__(self, card: Any) -> None:
        require_protocol(card, "lerobot_grpc", "LeRobotGrpcClient")
        if not is_loopback_host(card.host) and not getattr(card, "allow_remote_pickle", False):
            raise ConfigError(
                f"policy card '{card.name}': refusing to speak the LeRobot gRPC protocol to non-loopback host "
                f"{card.host!r}: {PICKLE_HAZARD}. Use `spabench serve lerobot` (openpi websocket, no pickle) "
                "on the GPU host, or reach the server through an authenticated tunnel on 127.0.0.1; set "
                "'allow_remote_pickle: true' only if you accept the hazard"
            )
        require_cameras(card, "map the policy's image features, e.g. front: middle")
        extra = card_extra(card)
        for key in ("policy_type", "pretrained_name_or_path"):
            if not isinstance(extra.get(key), str) or not extra.get(key):
                raise ConfigError(f"policy card '{card.name}': field 'extra.{key}' is required for lerobot_grpc")
        self.card = card
        self.policy_type = extra["policy_type"]
        self.pretrained = extra["pretrained_name_or_path"]
        self.policy_device = str(extra.get("policy_device", "cpu"))
        self.actions_per_chunk = positive_int(card, "actions_per_chunk", extra.get("actions_per_chunk"), card.horizon)
        if self.actions_per_chunk < card.execute_steps:
            raise ConfigError(f"policy card '{card.name}': field 'extra.actions_per_chunk' is "
                              f"{self.actions_per_chunk}, fewer than execute_steps ({card.execute_steps})")
        rename_map = extra.get("rename_map") or {}
        if not isinstance(rename_map, Mapping):
            raise ConfigError(f"policy card '{card.name}': field 'extra.rename_map' must be a mapping")
        self.rename_map = {str(k): str(v) for k, v in rename_map.items()}
        self.camera_shapes = self._camera_shapes(extra.get("camera_shapes"))
        load_timeout = extra.get("load_timeout_s", max(120.0, float(card.timeout_s)))
        if isinstance(load_timeout, bool) or not isinstance(load_timeout, (int, float)) or load_timeout <= 0:
            raise ConfigError(f"policy card '{card.name}': field 'extra.load_timeout_s' must be a number > 0")
        self.load_timeout_s = float(load_timeout)
        self.connect_attempts = positive_int(card, "connect_attempts", extra.get("connect_attempts"), 3)
        self.address = f"[{card.host}]:{card.port}" if ":" in card.host else f"{card.host}:{card.port}"
        self.server = server_label(card)
        self._lock = threading.RLock()
        self._channel = None
        self._stub: Any = None   # LeRobot's AsyncInferenceStub and its services_pb2 module (imported at connect)
        self._pb: Any = None
        self._timestep = 0
        self._chunk_id = 0
        self.metadata: dict[str, Any] = {}

    def _camera_shapes(self, value: Any) -> dict[str, tuple[int, int, int]]:
        default = tuple(self.card.image_size) if self.card.image_size else (480, 640)
        value = value or {}
        if not isinstance(value, Mapping):
            raise ConfigError(f"policy card '{self.card.name}': field 'extra.camera_shapes' must map "
                              "server_key -> [H, W]")
        shapes = {}
        for key in self.card.cameras:
            hw = value.get(key, default)
            if not isinstance(hw, (list, tuple)) or len(hw) != 2 or not all(isinstance(v, int) and v > 0 for v in hw):
                raise ConfigError(f"policy card '{self.card.name}': field 'extra.camera_shapes.{key}' is {hw!r} "
                                  "(allowed: [height, width])")
            shapes[key] = (int(hw[0]), int(hw[1]), 3)
        return shapes

    # -- channel -----------------------------------------------------------------------------
    def _open(self) -> None:
        import grpc
        from lerobot.transport import services_pb2, services_pb2_grpc

        self._pb = services_pb2
        self._channel = grpc.insecure_channel(self.address, options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ])
        self._stub = services_pb2_grpc.AsyncInferenceStub(self._channel)

    def _close_channel(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            channel.close()

    def _rpc(self, name: str, call, request, timeout_s: float):
        import grpc

        try:
            return call(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            fault = PolicyFault(f"{self.server}: {name} failed ({code.name if code else 'error'}: {detail})")
            fault.grpc_code = code.name if code else None
            raise fault from None

    def _ready(self) -> None:
        self._rpc("Ready", self._stub.Ready, self._pb.Empty(), float(self.card.timeout_s))

    def _features(self) -> dict:
        from lerobot.utils.feature_utils import hw_to_dataset_features

        hw: dict[str, Any] = {f"{joint}.pos": float for joint in JOINTS}
        hw.update(self.camera_shapes)
        return hw_to_dataset_features(hw, "observation", use_video=False)

    # -- PolicyClient ------------------------------------------------------------------------
    def connect(self) -> dict:
        from lerobot.async_inference.helpers import RemotePolicyConfig

        with self._lock:
            self._close_channel()
            self._open()
            probe_with_retries(self._ready, self.connect_attempts, f"{self.server}: no answer to Ready")
            config = RemotePolicyConfig(
                policy_type=self.policy_type,
                pretrained_name_or_path=self.pretrained,
                lerobot_features=self._features(),
                actions_per_chunk=self.actions_per_chunk,
                device=self.policy_device,
                rename_map=dict(self.rename_map),
            )
            setup = self._pb.PolicySetup(data=pickle.dumps(config))
            self._rpc("SendPolicyInstructions", self._stub.SendPolicyInstructions, setup, self.load_timeout_s)
        self.metadata = {"protocol": "lerobot_grpc", "address": self.address, "policy_type": self.policy_type,
                         "pretrained_name_or_path": self.pretrained, "policy_device": self.policy_device,
                         "actions_per_chunk": self.actions_per_chunk, "pickle_hazard": PICKLE_HAZARD}
        return self.metadata

    def reset(self) -> None:
        """Episode start: `Ready` flushes the server's observation queue and predicted-timestep set."""
        with self._lock:
            if self._stub is None:
                raise PolicyFault(f"{self.server}: not connected (connect() not called, or the client was closed)")
            self._ready()

    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        from lerobot.async_inference.helpers import TimedObservation

        state = state_vector(obs, np.float64)
        raw: dict[str, Any] = {f"{joint}.pos": float(v) for joint, v in zip(JOINTS, state, strict=True)}
        raw.update(policy_images(obs, self.card))
        raw["task"] = str(instruction)
        with self._lock:
            if self._stub is None:
                raise PolicyFault(f"{self.server}: not connected (connect() not called, or the client was closed)")
            self._timestep += 1
            timestep = self._timestep
            # must_go: the server never drops this observation as "too similar" to the last one
            payload = pickle.dumps(TimedObservation(timestamp=time.time(), timestep=timestep,
                                                    observation=raw, must_go=True))
            budget = float(self.card.timeout_s)
            sent_t = time.monotonic()
            deadline = sent_t + budget
            self._rpc("SendObservations", self._stub.SendObservations, self._pieces(payload), budget)
            chunk, last_problem = None, "no Actions reply"
            while chunk is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PolicyFault(f"{self.server}: no action chunk for observation #{timestep} within "
                                      f"{budget:g} s ({last_problem})")
                try:
                    reply = self._rpc("GetActions", self._stub.GetActions, self._pb.Empty(), remaining)
                except PolicyFault as exc:
                    # The stock server answers a bare Empty when its queue wait times out or
                    # inference raises, which surfaces as UNKNOWN/INTERNAL: retry until the
                    # deadline. Anything else (server gone, cancelled, deadline) ends the request.
                    if getattr(exc, "grpc_code", None) not in _RETRYABLE_CODES:
                        raise
                    last_problem = str(exc)
                    time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                    continue
                if not reply.data:
                    last_problem = "server answered an empty Actions message"
                    continue
                chunk = self._decode(reply.data, timestep)
                if chunk is None:
                    last_problem = "only stale chunks (for earlier observations) arrived"
            received_t = time.monotonic()
        self._chunk_id += 1
        return ActionChunk(actions=chunk[: self.card.execute_steps, :6], chunk_id=self._chunk_id,
                           sent_t=sent_t, received_t=received_t, rtt_s=received_t - sent_t, server_ms=None)

    def close(self) -> None:
        """Idempotent; callable from another thread: closing the channel cancels in-flight RPCs."""
        self._close_channel()

    # -- helpers -----------------------------------------------------------------------------
    def _pieces(self, payload: bytes):
        total = len(payload)
        for start in range(0, max(total, 1), CHUNK_BYTES):
            end = min(start + CHUNK_BYTES, total)
            state = _TRANSFER_END if end >= total else (_TRANSFER_BEGIN if start == 0 else _TRANSFER_MIDDLE)
            yield self._pb.Observation(transfer_state=state, data=payload[start:end])

    def _decode(self, data: bytes, timestep: int) -> np.ndarray | None:
        """The chunk as (n, action_dim) float64; None when it answers an earlier observation."""
        import torch
        from lerobot.async_inference.helpers import TimedAction

        timed = restricted_loads(data, self.server)
        if not isinstance(timed, list) or not timed or not all(isinstance(a, TimedAction) for a in timed):
            raise ProtocolError(f"{self.server}: Actions payload is not a non-empty list of TimedAction")
        if timed[0].get_timestep() != timestep:
            return None  # stale: answers an observation sent before this request
        rows = []
        for i, item in enumerate(timed):
            action = item.get_action()
            if not isinstance(action, torch.Tensor):
                raise ProtocolError(f"{self.server}: reply field 'actions[{i}].action' is "
                                    f"{type(action).__name__}; expected a tensor ({self.card.action_dim},)")
            rows.append(action.detach().to("cpu", torch.float64).numpy().reshape(-1))
        try:
            stacked = np.stack(rows)
        except ValueError:
            raise ProtocolError(f"{self.server}: reply actions have unequal lengths; expected "
                                f"({self.actions_per_chunk}, {self.card.action_dim})") from None
        return check_action_array(stacked, field="actions", server=self.server,
                                  rows=self.actions_per_chunk, cols=self.card.action_dim)
