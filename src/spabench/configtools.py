"""Small helpers the config loaders share (bench, campaign, operator, policy, suite, console).

Composing an option file (`load_option`, Hydra's `defaults:` lists and resolvers) and a lab's folder
over conf/ (`overlay`); the typed loading of what was composed is `spabench.config.typed_node`.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["plain_container", "overlay", "load_option", "required"]


def required[T](value: T | None, key: str, command: str, what: str) -> T:
    """A key the command cannot run without: its value, or one error naming the command, the key and what
    it takes."""
    if value is None:
        from spabench.errors import ConfigError

        raise ConfigError(f"{command}: {key} is missing ({what})")
    return value


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


OPTION_FILE = "_file_"   # the name a file given by path takes among its group's options


@contextlib.contextmanager
def overlay(dirs: list[Path], option: tuple[str, Path] | None = None):
    """A config folder Hydra can read: the data root's conf/ alone, or a symlink tree of the lab's
    files over it (Hydra appends `hydra.searchpath` entries; the lab must come first).
    `option` (group, file): a file from anywhere joins its group as `<group>/_file_`, so its
    `defaults:` list names the group's options exactly as a lab's own option file does."""
    if len(dirs) == 1 and option is None:
        yield dirs[0]
        return
    with tempfile.TemporaryDirectory(prefix="spabench-conf-") as tmp:
        root = Path(tmp)
        links = [(p.relative_to(d), p) for d in reversed(dirs) for p in d.rglob("*.yaml")]  # the lab's win
        if option is not None:
            links.append((Path(option[0]) / f"{OPTION_FILE}.yaml", option[1].resolve()))
        for relative, path in links:
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.symlink_to(path)
        yield root


def load_option(group: str, option: str | Path, dirs: list[Path]) -> Any:
    """One option of `group` (a name among `dirs`' <group>/ files, or a file given by path) composed as
    the command line composes it: Hydra's `defaults:` list, interpolation and resolvers
    (`${oc.env:VAR,default}`). `dirs` are config folders, the lab's first, then the checkout's. A required
    `???` value stays as that mark, for the group's own check to name."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from spabench.errors import ConfigError

    path = option if isinstance(option, Path) else None
    try:
        with overlay(dirs, (group, path) if path else None) as conf, \
                initialize_config_dir(config_dir=str(conf), version_base=None):
            node = compose(config_name=f"{group}/{OPTION_FILE if path else option}")
        return OmegaConf.to_container(node.get(group, node), resolve=True)   # `???` kept: the caller names it
    except Exception as exc:  # noqa: BLE001 - Hydra and OmegaConf errors: one line naming the file
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{path or f'{group}={option}'}: {first}") from None
