"""`make_client(card)`: the client class for a card's wire protocol, imported only when needed."""

from __future__ import annotations

import importlib

from spabench.errors import ConfigError
from spabench.policy.card import PROTOCOLS
from spabench.policy.client import PolicyClient

__all__ = ["make_client", "CLIENTS"]

# protocol -> (module, class); each class is constructed as Cls(card).
CLIENTS: dict[str, tuple[str, str]] = {
    "openpi": ("spabench.policy.openpi_client", "OpenPiClient"),
    "groot": ("spabench.policy.groot_client", "GrootClient"),
    "molmoact2": ("spabench.policy.molmoact2_client", "MolmoAct2Client"),
    "vla0": ("spabench.policy.vla0_client", "Vla0Client"),
    "lerobot_grpc": ("spabench.policy.lerobot_grpc_client", "LeRobotGrpcClient"),
}
assert set(CLIENTS) == set(PROTOCOLS)


def make_client(card) -> PolicyClient:
    """A new, unconnected client for `card` (call `connect()` before use)."""
    if card.protocol not in CLIENTS:
        raise ConfigError(f"policy card '{card.name}': field 'protocol' is {card.protocol!r} "
                          f"(allowed: {', '.join(CLIENTS)})")
    module_name, class_name = CLIENTS[card.protocol]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise ConfigError(f"policy protocol {card.protocol!r} needs the Python package "
                              f"{exc.name!r}, which is not installed (pip install 'spabench[bench]')"
                              ) from None
        raise ConfigError(f"policy protocol {card.protocol!r}: client module {module_name} "
                          "is not available in this installation") from None
    return getattr(module, class_name)(card)
