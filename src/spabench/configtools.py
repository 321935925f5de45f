"""Small helpers the config loaders share (bench, campaign, ...).

Loaders accept either a plain mapping or the node Hydra composed; turning the node into plain
containers first means validation sees ordinary dicts and lists with interpolations resolved.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_container", "from_known_fields"]


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


def from_known_fields(cls: type, data: Any, where: str) -> Any:
    """`cls(**data)` for a dataclass, after refusing keys it has no field for (one error naming `where`,
    the unknown keys and the allowed ones), so a typo never reaches a TypeError traceback."""
    from dataclasses import fields

    from spabench.errors import ConfigError

    data = dict(plain_container(data) or {})
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(map(str, set(data) - set(allowed)))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})")
    return cls(**data)
