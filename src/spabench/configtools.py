"""Small helpers the config loaders share (bench, campaign, ...).

Loaders accept either a plain mapping or the node Hydra composed; turning the node into plain
containers first means validation sees ordinary dicts and lists with interpolations resolved.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_container"]


def plain_container(data: Any) -> Any:
    """An OmegaConf DictConfig or ListConfig as plain containers (interpolations resolved);
    anything else as is."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(data, (DictConfig, ListConfig)):
            return OmegaConf.to_container(data, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a core dependency
        pass
    return data
