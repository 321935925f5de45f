"""Pieces the GR00T, MolmoAct2, VLA-0 and LeRobot-gRPC clients share: card checks, reply checks,
backoff and connect retries, npy bytes.

The four clients differ in transport and codec but must fail the same way: a reply that is not a
finite numeric array of the expected shape is a `ProtocolError` naming the reply field and the
shape that was expected, never a half-trusted action (`adapters.validate_actions` covers whole
(horizon, action_dim) chunks; `check_action_array` here covers per-group and per-chunk-length
shapes). Nothing here imports LeRobot or torch.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.client import PolicyFault

__all__ = [
    "Backoff",
    "card_key",
    "card_extra",
    "check_action_array",
    "finite_or_none",
    "load_npy",
    "npy_bytes",
    "positive_int",
    "probe_with_retries",
    "require_cameras",
    "require_protocol",
    "server_label",
]


def server_label(card: Any) -> str:
    """'<protocol> server <name> at <host>:<port>' for error messages."""
    return f"{card.protocol} server '{card.name}' at {card.host}:{card.port}"


def require_protocol(card: Any, protocol: str, client: str) -> None:
    """ConfigError unless the card speaks `protocol` (the wire `client` implements)."""
    if card.protocol != protocol:
        raise ConfigError(f"policy card '{card.name}': {client} needs protocol '{protocol}', not {card.protocol!r}")


def require_cameras(card: Any, hint: str) -> None:
    """ConfigError when the card maps no cameras; `hint` says what the protocol expects there."""
    if not card.cameras:
        raise ConfigError(f"policy card '{card.name}': field 'cameras' is empty ({hint})")


def card_extra(card: Any) -> dict[str, Any]:
    """The card's protocol-specific `extra` mapping as a plain dict."""
    extra = getattr(card, "extra", None) or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"policy card '{card.name}': field 'extra' must be a mapping")
    return dict(extra)


def card_key(card: Any, attr: str, protocol_default: str) -> str:
    """The card's `state_key`/`prompt_key`, or the protocol's own key when the card left the
    generic (openpi) default in place."""
    value = getattr(card, attr)
    generic = {f.name: f.default for f in fields(type(card))}.get(attr) if _is_dataclass(card) else None
    return protocol_default if value in (None, "", generic) else str(value)


def _is_dataclass(obj: Any) -> bool:
    return hasattr(type(obj), "__dataclass_fields__")


# -- npy bytes -------------------------------------------------------------------------------


def npy_bytes(array: np.ndarray) -> bytes:
    """`np.save` bytes of a plain numeric array. Object arrays are refused (allow_pickle=False)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def load_npy(data: object, *, field: str, server: str) -> np.ndarray:
    """Decode `np.save` bytes without ever unpickling (object arrays -> ProtocolError)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError(f"{server}: reply field '{field}' should hold .npy bytes, got {type(data).__name__}")
    try:
        return np.load(io.BytesIO(bytes(data)), allow_pickle=False)
    except ValueError as exc:
        raise ProtocolError(
            f"{server}: reply field '{field}' is not a plain numeric .npy array ({exc}); "
            "object arrays are refused because loading them would unpickle server data"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any malformed npy payload is a protocol error
        raise ProtocolError(f"{server}: reply field '{field}' is not valid .npy data ({exc})") from None


# -- reply checks ----------------------------------------------------------------------------


def check_action_array(value: Any, *, field: str, server: str, rows: int | None, cols: int,
                       min_rows: int = 1) -> np.ndarray:
    """`value` as a float64 (rows, cols) array, or ProtocolError naming `field` and the expected shape.

    rows None means any count >= min_rows (servers whose horizon the card does not pin).
    """
    expected = f"({rows if rows is not None else f'>={min_rows}'}, {cols})"
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - ragged lists etc.
        raise ProtocolError(f"{server}: reply field '{field}' is not an array ({exc}); expected {expected}") from None
    if array.dtype.kind not in "fiu":
        raise ProtocolError(
            f"{server}: reply field '{field}' has dtype {array.dtype} (not numeric); "
            f"expected a float array of shape {expected}"
        )
    if array.ndim != 2 or array.shape[1] != cols or (
        array.shape[0] != rows if rows is not None else array.shape[0] < min_rows
    ):
        raise ProtocolError(f"{server}: reply field '{field}' has shape {tuple(array.shape)}; expected {expected}")
    array = array.astype(np.float64)
    finite = np.isfinite(array)
    if not finite.all():
        bad_rows = sorted({int(r) for r in np.argwhere(~finite)[:, 0]})
        raise ProtocolError(
            f"{server}: reply field '{field}' holds non-finite values (NaN/inf) in rows {bad_rows[:10]}; "
            f"expected finite {expected}"
        )
    return array


# -- reconnect backoff -----------------------------------------------------------------------


@dataclass
class Backoff:
    """Exponential backoff between reconnect attempts: first, first*factor, ... capped at `cap`.

    `wait(deadline)` sleeps the next delay but never past `deadline` (a monotonic time), so a
    reconnect never eats a whole request budget; `reset()` after a success.
    """

    first_s: float = 0.1
    factor: float = 2.0
    cap_s: float = 2.0
    _next: float = 0.0

    def delay(self) -> float:
        return self._next

    def wait(self, deadline: float | None = None) -> None:
        pause = self._next
        if deadline is not None:
            pause = min(pause, max(0.0, deadline - time.monotonic()))
        if pause > 0:
            time.sleep(pause)
        self._next = self.first_s if self._next <= 0 else min(self.cap_s, self._next * self.factor)

    def reset(self) -> None:
        self._next = 0.0


def probe_with_retries[T](probe: Callable[[], T], attempts: int, failure: str) -> T:
    """`probe()`'s answer, trying up to `attempts` times with `Backoff` pauses between tries.

    Each try that raises PolicyFault is retried; when all fail, one PolicyFault
    "<failure> after <attempts> attempt(s): <last fault>" (failure starts with the server label).
    Anything other than a PolicyFault (a ProtocolError, Ctrl-C) ends the retries at once.
    """
    last: Exception | None = None
    backoff = Backoff()
    for attempt in range(attempts):
        if attempt:
            backoff.wait()
        try:
            return probe()
        except PolicyFault as exc:
            last = exc
    raise PolicyFault(f"{failure} after {attempts} attempt(s): {last}")


def positive_int(card: Any, key: str, value: Any, default: int) -> int:
    """An integer `extra` option >= 1, or ConfigError naming it."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"policy card '{card.name}': field 'extra.{key}': {value!r} (allowed: an integer >= 1)")
    return value


def finite_or_none(value: Any, *, field: str, server: str) -> float | None:
    """A server timing value as float ms, None when absent; ProtocolError when it is not a number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ProtocolError(f"{server}: reply field '{field}' is {value!r}; expected a finite number (ms)")
    return float(value)
