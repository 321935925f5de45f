"""GR00T (Isaac-GR00T N1.5 / N1.6+) over ZeroMQ REQ/REP + msgpack.

Wire facts (policies/groot.md has the server side): the server is a `zmq.REP` socket on tcp://host:5555;
every request is a msgpack map `{"endpoint", "data"?, "api_token"?}`; numpy arrays travel as
`{"__ndarray_class__": True, "as_npy": <np.save bytes>}` written and read with allow_pickle=False;
a failed request answers `{"error": "..."}`. Endpoints: ping, get_modality_config, reset (N1.6+
only), get_action.

N1.5 servers squeeze their reply (upstream `Gr00tPolicy.get_action` applies np.squeeze to every
action array), so a one-joint group such as the gripper arrives as (horizon,), not (horizon, 1);
both are accepted. Isaac-GR00T servers from before the msgpack wire (N1.5's `TorchSerializer`:
torch.save pickles both ways) are recognised by their reply bytes and refused with one clear error;
their replies are never unpickled (a pickle can run code).

N1.6+ sends a nested observation `{video: {key: uint8 (1,1,H,W,3)}, state: {group: float32 (1,1,D)},
language: {key: [[text]]}}` inside `{"observation", "options"}` and answers `[action_dict, info]`
with `{group: (1, horizon, D)}`. N1.5 sends flat keys (`video.<key>` (1,H,W,3), `state.<group>`
(1,D), the language key -> [text]) and answers `{"action.<group>": (horizon, D)}`.

Card `extra` keys read here:
  groot_version   "n1.6" (default; also N1.7) or "n1.5"
  state_groups    {group: [joint names]} in the order the checkpoint expects
                  (default single_arm = first five joints, gripper = [gripper])
  action_groups   {group: [joint names]}; must name all six joints once (default: state_groups)
  options         N1.6 `options` map sent with get_action/reset (default null)
  connect_attempts  ping attempts at connect, with backoff (default 3)
The language key is the card's `prompt_key` unless left at the generic default, in which case it
is GR00T's `annotation.human.task_description`.

A REQ socket whose reply never came is unusable (strict send/recv alternation), so after a timeout,
a transport error or an interruption (Ctrl-C) the socket is closed with linger 0 and a new one is
made for the next request: a late reply can never be read as the answer to a newer request.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.adapters import policy_images, state_vector
from spabench.policy.client import ActionChunk, PolicyClient, PolicyFault
from spabench.policy.wire_common import (
    Backoff,
    card_extra,
    card_key,
    check_action_array,
    load_npy,
    npy_bytes,
    positive_int,
    probe_with_retries,
    require_cameras,
    require_protocol,
    server_label,
)
from spabench.suite.vocabulary import JOINTS

__all__ = ["GrootClient", "GROOT_VERSIONS", "encode_message", "decode_message", "DEFAULT_LANGUAGE_KEY"]

GROOT_VERSIONS: tuple[str, ...] = ("n1.6", "n1.5")
DEFAULT_LANGUAGE_KEY = "annotation.human.task_description"
DEFAULT_STATE_GROUPS: dict[str, list[str]] = {"single_arm": list(JOINTS[:5]), "gripper": [JOINTS[5]]}
NDARRAY_TAG = "__ndarray_class__"
MODALITY_TAG = "__ModalityConfig_class__"


# -- codec -----------------------------------------------------------------------------------


def _encode_custom(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        # np.save(allow_pickle=False) raises for object arrays: they are never put on the wire.
        return {NDARRAY_TAG: True, "as_npy": npy_bytes(obj)}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot send {type(obj).__name__} to a GR00T server")


def encode_message(obj: Any) -> bytes:
    """msgpack bytes with GR00T's numpy codec."""
    import msgpack

    return msgpack.packb(obj, default=_encode_custom, use_bin_type=True)


def torch_pickle_kind(data: bytes) -> str | None:
    """'zip' / 'legacy' when `data` is a torch.save file (zip archive, or a bare pickle stream with
    protocol 2-5) instead of msgpack; None otherwise. A msgpack reply never starts like either: a
    zip starts with 'PK\\x03\\x04' (msgpack 'P' is a lone int), and 0x80 is msgpack's empty map, which
    is a whole message, never followed by a protocol byte."""
    if data[:4] == b"PK\x03\x04":
        return "zip"
    if len(data) > 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return "legacy"
    return None


def decode_message(data: bytes, server: str = "GR00T server") -> Any:
    """Decode a GR00T reply. Arrays are read with allow_pickle=False; a ModalityConfig becomes a
    plain dict (its JSON), so the gr00t package is never needed on the robot computer."""
    import msgpack

    if torch_pickle_kind(data) is not None:
        raise ProtocolError(
            f"{server}: replied with a torch.save pickle, the wire of older Isaac-GR00T N1.5 servers "
            "(TorchSerializer, before the msgpack protocol); spabench speaks the msgpack generation only "
            "and never unpickles a reply. Update the server to an Isaac-GR00T release with the msgpack "
            "wire (gr00t/eval/service.py MsgSerializer).")

    def hook(obj: dict) -> Any:
        if NDARRAY_TAG in obj:
            return load_npy(obj.get("as_npy"), field="as_npy", server=server)
        if MODALITY_TAG in obj:
            raw = obj.get("as_json")
            if isinstance(raw, (str, bytes)):
                try:
                    return json.loads(raw)
                except ValueError:
                    raise ProtocolError(f"{server}: a ModalityConfig's 'as_json' is not JSON") from None
            return raw
        return obj

    try:
        return msgpack.unpackb(data, object_hook=hook, raw=False, strict_map_key=False)
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - any undecodable reply breaks the protocol
        raise ProtocolError(f"{server}: reply is not valid msgpack ({type(exc).__name__}: {exc})") from None


# -- card parsing ----------------------------------------------------------------------------


def _groups(card: Any, key: str, value: Any, default: Mapping[str, list[str]]) -> dict[str, list[str]]:
    if value is None:
        return {g: list(j) for g, j in default.items()}
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"policy card '{card.name}': field 'extra.{key}' must map group -> [joint names]")
    groups: dict[str, list[str]] = {}
    seen: set[str] = set()
    for group, joints in value.items():
        names = [joints] if isinstance(joints, str) else list(joints or [])
        for name in names:
            if name not in JOINTS:
                raise ConfigError(f"policy card '{card.name}': field 'extra.{key}.{group}' names joint "
                                  f"{name!r} (allowed: {', '.join(JOINTS)})")
            if name in seen:
                raise ConfigError(f"policy card '{card.name}': field 'extra.{key}' names joint {name!r} twice")
            seen.add(name)
        if not names:
            raise ConfigError(f"policy card '{card.name}': field 'extra.{key}.{group}' names no joints")
        groups[str(group)] = names
    return groups


class GrootClient(PolicyClient):
    """PolicyClient for a GR00T policy server (`groot` cards)."""

    def __init__(self, card: Any) -> None:
        require_protocol(card, "groot", "GrootClient")
        require_cameras(card, "GR00T needs >= 1 video key")
        extra = card_extra(card)
        version = str(extra.get("groot_version", "n1.6")).lower()
        if version == "n1.7":
            version = "n1.6"  # same wire as N1.6
        if version not in GROOT_VERSIONS:
            raise ConfigError(f"policy card '{card.name}': field 'extra.groot_version' is {version!r} "
                              f"(allowed: {', '.join(GROOT_VERSIONS)}, n1.7)")
        self.card = card
        self.version = version
        self.state_groups = _groups(card, "state_groups", extra.get("state_groups"), DEFAULT_STATE_GROUPS)
        self.action_groups = _groups(card, "action_groups", extra.get("action_groups"), self.state_groups)
        missing = [j for j in JOINTS if not any(j in js for js in self.action_groups.values())]
        if missing:
            raise ConfigError(f"policy card '{card.name}': field 'extra.action_groups' leaves joints "
                              f"{missing} without an action (every joint needs one)")
        self.language_key = card_key(card, "prompt_key", DEFAULT_LANGUAGE_KEY)
        self.options = extra.get("options")
        self.connect_attempts = positive_int(card, "connect_attempts", extra.get("connect_attempts"), 3)
        self.api_token = card.api_key() if hasattr(card, "api_key") else None
        self.endpoint = f"tcp://{card.host}:{card.port}"
        self.server = server_label(card)
        self.timeout_ms = max(1, int(round(float(card.timeout_s) * 1000)))
        self._lock = threading.RLock()
        self._context: Any = None   # a zmq.Context once a socket is made (zmq is imported lazily)
        self._socket = None
        self._broken = False
        self._closed = False
        self._backoff = Backoff()
        self._chunk_id = 0
        self.metadata: dict[str, Any] = {}

    # -- socket lifecycle --------------------------------------------------------------------
    def _ensure_socket(self):
        import zmq

        if self._socket is not None:
            return self._socket
        if self._broken:
            # reconnect with backoff after a failure, never longer than one request budget
            self._backoff.wait(time.monotonic() + float(self.card.timeout_s))
        if self._context is None:
            self._context = zmq.Context()
        sock = self._context.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
        sock.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
        sock.connect(self.endpoint)
        self._socket = sock
        return sock

    def _discard_socket(self) -> None:
        sock, self._socket = self._socket, None
        self._broken = True
        if sock is not None:
            sock.close(linger=0)

    def _call(self, endpoint: str, data: Any = None, *, requires_input: bool = True) -> Any:
        """One request/reply. Server `{"error": ...}` -> PolicyFault; no reply -> PolicyFault."""
        import zmq

        request: dict[str, Any] = {"endpoint": endpoint}
        if requires_input:
            request["data"] = data
        if self.api_token:
            request["api_token"] = self.api_token
        payload = encode_message(request)
        with self._lock:
            if self._closed:
                raise PolicyFault(f"{self.server}: client is closed")
            sock = self._ensure_socket()
            try:
                sock.send(payload)
                raw = sock.recv()
            except zmq.Again:
                self._discard_socket()
                raise PolicyFault(f"{self.server}: no reply to '{endpoint}' within {self.card.timeout_s:g} s "
                                  "(socket recreated for the next request)") from None
            except zmq.ZMQError as exc:
                self._discard_socket()
                raise PolicyFault(f"{self.server}: '{endpoint}' failed: {exc}") from None
            except BaseException:
                self._discard_socket()  # interrupted between send and recv: never reuse this socket
                raise
            self._broken = False
            self._backoff.reset()
        if raw == b"ERROR":
            raise PolicyFault(f"{self.server}: answered ERROR to '{endpoint}' (is this a GR00T policy server?)")
        reply = decode_message(raw, self.server)
        if isinstance(reply, Mapping) and "error" in reply:
            raise PolicyFault(f"{self.server}: error on '{endpoint}': {reply['error']}")
        return reply

    # -- PolicyClient ------------------------------------------------------------------------
    def connect(self) -> dict:
        self._closed = False
        pong = probe_with_retries(lambda: self._call("ping", requires_input=False), self.connect_attempts,
                                  f"{self.server}: no answer to 'ping'")
        if not isinstance(pong, Mapping):
            raise ProtocolError(f"{self.server}: reply to 'ping' is {type(pong).__name__}; expected a map")
        modality = self._call("get_modality_config", requires_input=False)
        self._check_modality(modality)
        self.metadata = {"protocol": "groot", "groot_version": self.version, "endpoint": self.endpoint,
                         "ping": dict(pong), "modality_config": modality}
        return self.metadata

    def reset(self) -> None:
        """Episode start: N1.6+ `reset` endpoint; N1.5 servers have none, so a ping proves liveness."""
        if self.version == "n1.5":
            self._call("ping", requires_input=False)
        else:
            self._call("reset", {"options": self.options})

    def infer(self, obs: Any, instruction: str) -> ActionChunk:
        request = self._observation(obs, instruction)
        sent_t = time.monotonic()
        reply = self._call("get_action", request)
        received_t = time.monotonic()
        actions = self._actions(reply)
        self._chunk_id += 1
        return ActionChunk(actions=actions[: self.card.execute_steps], chunk_id=self._chunk_id,
                           sent_t=sent_t, received_t=received_t, rtt_s=received_t - sent_t, server_ms=None)

    def close(self) -> None:
        """Idempotent; safe from another thread: terminating the context makes an in-flight
        recv fail at once (ETERM), and that thread then closes its own socket."""
        self._closed = True
        ctx = self._context
        if self._lock.acquire(blocking=False):
            try:
                sock, self._socket = self._socket, None
                if sock is not None:
                    sock.close(linger=0)
            finally:
                self._lock.release()
        if ctx is not None:
            ctx.term()
        self._context = None

    def __del__(self) -> None:
        # A dropped client must not leave an open socket behind: zmq's Context.__del__ would
        # then block forever in term().
        with contextlib.suppress(Exception):  # noqa: BLE001 - interpreter shutdown
            self.close()

    # -- observation / action layout ---------------------------------------------------------
    def _observation(self, obs: Any, instruction: str) -> dict:
        state = state_vector(obs, np.float64)
        frames = policy_images(obs, self.card)
        groups = {g: state[[JOINTS.index(j) for j in js]] for g, js in self.state_groups.items()}
        if self.version == "n1.5":
            flat: dict[str, Any] = {f"video.{k}": f[np.newaxis] for k, f in frames.items()}
            flat.update({f"state.{g}": v.astype(np.float64)[np.newaxis] for g, v in groups.items()})
            flat[self.language_key] = [str(instruction)]
            return flat
        observation = {
            "video": {k: f[np.newaxis, np.newaxis] for k, f in frames.items()},
            "state": {g: v.astype(np.float32)[np.newaxis, np.newaxis] for g, v in groups.items()},
            "language": {self.language_key: [[str(instruction)]]},
        }
        return {"observation": observation, "options": self.options}

    def _actions(self, reply: Any) -> np.ndarray:
        horizon = self.card.horizon
        if self.version == "n1.5":
            if not isinstance(reply, Mapping):
                raise ProtocolError(f"{self.server}: get_action reply is {type(reply).__name__}; "
                                    "expected a map of 'action.<group>' arrays")
            per_group = {}
            for group, joints in self.action_groups.items():
                field = f"action.{group}"
                if field not in reply:
                    raise ProtocolError(f"{self.server}: get_action reply lacks field '{field}' "
                                        f"(got {sorted(map(str, reply))}); expected ({horizon}, {len(joints)})")
                value = reply[field]
                if len(joints) == 1 and isinstance(value, np.ndarray) and value.ndim == 1:
                    value = value[:, np.newaxis]  # upstream np.squeeze dropped the one-joint axis
                per_group[group] = check_action_array(value, field=field, server=self.server,
                                                      rows=horizon, cols=len(joints))
        else:
            if not isinstance(reply, (list, tuple)) or len(reply) != 2 or not isinstance(reply[0], Mapping):
                raise ProtocolError(f"{self.server}: get_action reply must be [action_dict, info]; "
                                    f"got {type(reply).__name__}")
            action_dict = reply[0]
            per_group = {}
            for group, joints in self.action_groups.items():
                expected = f"(1, {horizon}, {len(joints)})"
                if group not in action_dict:
                    raise ProtocolError(f"{self.server}: get_action reply lacks action field '{group}' "
                                        f"(got {sorted(map(str, action_dict))}); expected {expected}")
                value = action_dict[group]
                if not isinstance(value, np.ndarray) or value.ndim != 3 or value.shape[0] != 1:
                    shape = getattr(value, "shape", type(value).__name__)
                    raise ProtocolError(f"{self.server}: reply field '{group}' has shape {shape}; expected {expected}")
                per_group[group] = check_action_array(value[0], field=group, server=self.server,
                                                      rows=horizon, cols=len(joints))
        out = np.empty((horizon, len(JOINTS)), dtype=np.float64)
        for group, joints in self.action_groups.items():
            out[:, [JOINTS.index(j) for j in joints]] = per_group[group]
        return out

    def _check_modality(self, modality: Any) -> None:
        """Fail at connect, not mid-episode, when the card's keys are not the checkpoint's."""
        if not isinstance(modality, Mapping):
            return
        wanted = {"video": list(self.card.cameras), "state": list(self.state_groups),
                  "action": list(self.action_groups), "language": [self.language_key]}
        for modality_name, keys in wanted.items():
            entry = modality.get(modality_name)
            server_keys = entry.get("modality_keys") if isinstance(entry, Mapping) else None
            if not isinstance(server_keys, list):
                continue
            server_keys = [str(k) for k in server_keys]
            unknown = [k for k in keys if k not in server_keys and f"{modality_name}.{k}" not in server_keys]
            if unknown:
                raise ConfigError(
                    f"policy card '{self.card.name}': {modality_name} key(s) {unknown} are not in the "
                    f"server's modality config (allowed: {', '.join(server_keys)})"
                )
