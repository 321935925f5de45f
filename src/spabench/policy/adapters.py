"""Observation -> server request, server reply -> joint actions, as a policy card says.

Shared by every protocol client: camera mapping (server key -> bench camera), optional client-side
resize with padding (openpi's `resize_with_pad`: keep the aspect ratio, bilinear, centre on a black
canvas), the 6-joint state vector, the instruction, sim-only extras; and strict validation of the
returned chunk (shape, numeric dtype, finite values) before any action can reach the robot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spabench.errors import ConfigError, ProtocolError
from spabench.suite.vocabulary import JOINTS

__all__ = [
    "resize_with_pad", "policy_images", "state_vector", "observation_extras", "openpi_request",
    "validate_actions", "decode_action_chunk", "server_timing_ms",
]

N_JOINTS = len(JOINTS)


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Fit an HxWx3 uint8 image into height x width without distortion, padding with zeros."""
    from PIL import Image

    if image.shape[:2] == (height, width):
        return image
    cur_h, cur_w = image.shape[:2]
    ratio = max(cur_w / width, cur_h / height)
    new_h, new_w = max(1, int(cur_h / ratio)), max(1, int(cur_w / ratio))
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), resample=Image.Resampling.BILINEAR))
    out = np.zeros((height, width, image.shape[2]), dtype=image.dtype)
    top, left = max(0, (height - new_h) // 2), max(0, (width - new_w) // 2)
    out[top:top + new_h, left:left + new_w] = resized
    return out


def policy_images(obs: Any, card) -> dict[str, np.ndarray]:
    """The card's cameras as {server_key: HxWx3 uint8}, resized with padding when the card says so."""
    out: dict[str, np.ndarray] = {}
    for server_key, camera in card.cameras.items():
        image = obs.images.get(camera) if obs.images is not None else None
        if image is None:
            raise ConfigError(
                f"policy card '{card.name}': field 'cameras.{server_key}' needs camera {camera!r}, "
                f"which the bench does not provide (available: {', '.join(sorted(obs.images or {}))})"
            )
        image = np.asarray(image)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ConfigError(f"camera {camera!r}: expected an HxWx3 uint8 image, got "
                              f"{image.dtype} {image.shape}")
        if card.image_size is not None:
            image = resize_with_pad(image, card.image_size[0], card.image_size[1])
        out[server_key] = np.ascontiguousarray(image)
    return out


def state_vector(obs: Any, dtype=np.float32) -> np.ndarray:
    """The measured joints (degrees, gripper 0..100) in joint order, unnormalised."""
    state = np.asarray(obs.state, dtype=np.float64)
    if state.shape != (N_JOINTS,) or not np.all(np.isfinite(state)):
        raise ConfigError(f"observation state must be {N_JOINTS} finite joint values "
                          f"({', '.join(JOINTS)}), got {state!r}")
    return state.astype(dtype)


def observation_extras(obs: Any, card) -> dict[str, Any]:
    """Sim-only extras the card forwards ({server_key: value}); missing ones are a config error."""
    out = {}
    extras = getattr(obs, "extras", None) or {}
    for server_key, source in card.extra_keys.items():
        if source not in extras:
            raise ConfigError(
                f"policy card '{card.name}': field 'extra_keys.{server_key}' needs observation extra "
                f"{source!r}, which this bench does not provide (only the sim bench does)"
            )
        out[server_key] = extras[source]
    return out


def openpi_request(obs: Any, instruction: str, card) -> dict[str, Any]:
    """The openpi observation dict: images, `state_key`, `prompt_key`, extras."""
    request: dict[str, Any] = dict(policy_images(obs, card))
    request[card.state_key] = state_vector(obs)
    request[card.prompt_key] = str(instruction)
    request.update(observation_extras(obs, card))
    return request


def validate_actions(value: Any, card, field: str = "actions") -> np.ndarray:
    """The server's chunk as a (horizon, action_dim) float64 array, or ProtocolError naming the field.

    A leading batch axis of size 1 is accepted and dropped.
    """
    expected = f"({card.horizon}, {card.action_dim})"
    where = f"policy '{card.name}': reply field '{field}'"
    if value is None:
        raise ProtocolError(f"{where} is missing; expected an array of shape {expected}")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"{where} is not an array ({exc}); expected shape {expected}") from None
    if arr.dtype.kind not in "iuf":
        raise ProtocolError(f"{where} has dtype {arr.dtype}; expected a numeric (int or float) array "
                            f"of shape {expected}")
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.shape != (card.horizon, card.action_dim):
        raise ProtocolError(f"{where} has shape {tuple(arr.shape)}; expected {expected} "
                            "(horizon, action_dim) as the policy card says")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = sorted(set(np.nonzero(bad)[0].tolist()))
        raise ProtocolError(f"{where} holds non-finite values (NaN/inf) in rows {rows[:10]}; "
                            f"expected finite joint targets of shape {expected}")
    return arr


def decode_action_chunk(value: Any, card, field: str = "actions") -> np.ndarray:
    """Validated joint actions to execute: (execute_steps, 6) float64 in `JOINTS` order."""
    arr = validate_actions(value, card, field)
    return np.ascontiguousarray(arr[: card.execute_steps, :N_JOINTS])


def server_timing_ms(reply: Any) -> float | None:
    """`server_timing.infer_ms` (or `policy_timing.infer_ms`) when the server reports it."""
    if not isinstance(reply, dict):
        return None
    for key in ("server_timing", "policy_timing"):
        timing = reply.get(key)
        if isinstance(timing, dict):
            value = timing.get("infer_ms")
            if isinstance(value, (int, float, np.number)) and np.isfinite(value):
                return float(value)
    return None
