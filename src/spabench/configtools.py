"""Small helpers the config loaders share (bench, campaign, operator, policy, suite, console).

Loaders accept either a plain mapping or the node Hydra composed; turning the node into plain
containers first means validation sees ordinary dicts and lists with interpolations resolved.
`typed_fields` checks each given value against the dataclass field's annotation (the one place a
boolean must be a boolean and `???` means "required"), so every group reads its types from its
dataclass: a field another engineer adds is checked without a list kept here.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

__all__ = ["plain_container", "from_known_fields", "typed_fields", "field_kind", "MISSING_VALUE", "overlay",
           "load_option", "number_in", "int_in"]

MISSING_VALUE = "???"   # OmegaConf's mark of a required value


def required[T](value: T | None, key: str, command: str, what: str) -> T:
    """A key the command cannot run without: its value, or one error naming the command, the key and what
    it takes."""
    if value is None:
        from spabench.errors import ConfigError

        raise ConfigError(f"{command}: {key} is missing ({what})")
    return value


def number_in(where: str, value: Any, lo: float, hi: float) -> float:
    """`value` as a float when it is a finite real number in [lo, hi] (an int is accepted, a bool is
    not); otherwise one ConfigError "<where>: <value> (allowed: a number from lo to hi)"."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not lo <= value <= hi):
        from spabench.errors import ConfigError

        raise ConfigError(f"{where}: {value!r} (allowed: a number from {lo:g} to {hi:g})")
    return float(value)


def int_in(where: str, value: Any, lo: int, hi: int, note: str = "") -> int:
    """`value` when it is an integer in [lo, hi] (a bool is not); otherwise one ConfigError
    "<where>: <value> (allowed: an integer lo..hi<note>)"."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        from spabench.errors import ConfigError

        raise ConfigError(f"{where}: {value!r} (allowed: an integer {lo}..{hi}{note})")
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


def _hints(cls: type) -> dict[str, Any]:
    """Each field's annotation, evaluated one by one in its module (a field named `type` must not
    shadow the builtin, and one unresolvable annotation must not hide the others)."""
    import sys

    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        module = sys.modules.get(klass.__module__)
        for name, hint in vars(klass).get("__annotations__", {}).items():
            if isinstance(hint, str):
                try:
                    hint = eval(hint, dict(vars(module)) if module else {}, {})  # noqa: S307 - own source
                except Exception:  # noqa: BLE001 - not checked then
                    continue
            out[name] = hint
    return out


def field_kind(cls: type, name: str) -> tuple[Any, bool]:
    """(the scalar type of field `name` of dataclass `cls` or None when not a scalar, optional?)."""
    hint = _hints(cls).get(name)
    optional = False
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        optional = True
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else None
    return (hint if hint in (bool, int, float, str) else None), optional


def _allowed(kind: type, optional: bool) -> str:
    text = {bool: "true | false", int: "an integer", float: "a number", str: "a string"}[kind]
    return text + (", or null" if optional else "")


def typed_fields(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """`data` with each scalar field (bool, int, float, str; optional or not) checked against `cls`'s
    annotation: a bool is only true/false (never "no"), an int never a bool, a float finite, `???`
    refused as a required value not given. Numbers given for a string field become strings
    (host=10, api_key=1234 arrive as numbers from the command line)."""
    from spabench.errors import ConfigError

    out = dict(data)
    for name, value in data.items():
        if isinstance(value, str) and value == MISSING_VALUE:
            raise ConfigError(f"{where}: field '{name}' is required (???) and was not given "
                              f"(set it, e.g. {name}=...)")
        kind, optional = field_kind(cls, name)
        if kind is None:
            continue
        if value is None:
            if optional:
                continue
            ok = False
        elif kind is bool:
            ok = isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if ok:
                out[name] = float(value)
        else:
            ok = isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))
            if ok:
                out[name] = str(value)
        if not ok:
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise ConfigError(f"{where}: field '{name}': {shown} (allowed: {_allowed(kind, optional)})")
    return out


def from_known_fields(cls: type, data: Any, where: str) -> Any:
    """`cls(**data)` for a dataclass, after refusing keys it has no field for (one error naming `where`,
    the unknown keys and the allowed ones) and checking scalar types (`typed_fields`), so a typo or a
    wrong type never reaches a TypeError traceback or a truthy string."""
    from spabench.errors import ConfigError

    data = dict(plain_container(data) or {})
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(map(str, set(data) - set(allowed)))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})")
    return cls(**typed_fields(cls, data, where))


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
