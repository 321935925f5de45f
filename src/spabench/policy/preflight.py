"""Pre-flight: what a policy server advertises at connect time, compared with its card.

Run after `client.connect()` and before the robot connects, so that a card that does not fit its
server (a chunk of 20 where the card says 100, a missing image key) is one clear error instead of
an invalid first trial after the arm has homed. Only facts the server states are checked; a server
that advertises nothing (stock openpi metadata is free-form) passes.

What is read, by protocol (each protocol's wire is in policies/<family>.md and its client module):
  openpi / `spabench serve`  metadata `action_horizon` | `horizon` | `chunk_size`, `action_dim`,
                             `inputs` ({request key: feature} or a list of request keys)
  GR00T                      modality config: `action.delta_indices` (one per chunk step)
  VLA-0, MolmoAct2, gRPC     status/health replies: `horizon`, `action_dim` when present
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spabench.errors import ConfigError

HORIZON_KEYS: tuple[str, ...] = ("action_horizon", "horizon", "chunk_size")


def _int(value: Any) -> int | None:
    try:
        if isinstance(value, bool):
            return None
        number = int(value)
        return number if number == value else None
    except (TypeError, ValueError):
        return None


def advertised(metadata: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """card field -> (the server's key, the server's value), for what the server states."""
    out: dict[str, tuple[str, Any]] = {}
    if not isinstance(metadata, Mapping):
        return out
    for key in HORIZON_KEYS:
        if _int(metadata.get(key)) is not None:
            out["horizon"] = (key, int(metadata[key]))
            break
    modality = metadata.get("modality_config")
    if "horizon" not in out and isinstance(modality, Mapping):
        action = modality.get("action")
        indices = action.get("delta_indices") if isinstance(action, Mapping) else None
        if isinstance(indices, (list, tuple)) and indices:
            out["horizon"] = ("modality_config.action.delta_indices", len(indices))
    if _int(metadata.get("action_dim")) is not None:
        out["action_dim"] = ("action_dim", int(metadata["action_dim"]))
    inputs = metadata.get("inputs")
    if isinstance(inputs, Mapping):
        out["inputs"] = ("inputs", sorted(map(str, inputs)))
    elif isinstance(inputs, (list, tuple)) and all(isinstance(k, str) for k in inputs):
        out["inputs"] = ("inputs", sorted(inputs))
    return out


def card_inputs(card: Any) -> list[str]:
    """The request keys the harness fills for this card (images, state, extras)."""
    return sorted({*card.cameras, card.state_key, *card.extra_keys})


def mismatches(card: Any, metadata: Mapping[str, Any]) -> list[str]:
    """One sentence per card field the server contradicts (empty: the card fits)."""
    out = []
    facts = advertised(metadata)
    for field in ("horizon", "action_dim"):
        if field in facts:
            key, value = facts[field]
            if value != getattr(card, field):
                out.append(f"card field '{field}' is {getattr(card, field)}, the server's '{key}' is {value}")
    if "inputs" in facts:
        key, server_keys = facts["inputs"]
        missing = [k for k in server_keys if k not in card_inputs(card) and k != card.prompt_key]
        if missing:
            out.append(f"the server's '{key}' expect {', '.join(missing)}, which the card does not send "
                       f"(card fields 'cameras', 'state_key', 'extra_keys' give {', '.join(card_inputs(card))})")
    return out


def check_card_against_server(card: Any, metadata: Mapping[str, Any], server: str) -> None:
    """Raise one ConfigError listing every advertised fact the card contradicts."""
    problems = mismatches(card, metadata)
    if problems:
        raise ConfigError(f"pre-flight: policy card '{card.name}' does not fit its server {server}: "
                          + "; ".join(problems) + ". Fix the card (or `cards.<name>.<field>=...`) "
                          "or start the server the card describes; nothing has moved.")
