"""Reading and writing the suite's YAML: one clear DataError per unreadable file, stable output.

Parsed documents are cached by content hash (the suite is read far more often than it changes, and
tests load many copies that differ in one file). Callers must treat the returned data as read-only.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import yaml

from spabench.errors import DataError

try:  # libyaml when available (10x faster on the 1,000-scene suite)
    _Loader = yaml.CSafeLoader
    _Dumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - pure-Python PyYAML
    _Loader = yaml.SafeLoader
    _Dumper = yaml.SafeDumper

_CACHE: dict[str, Any] = {}
_CACHE_LIMIT = 256


def read_yaml(path: Path) -> Any:
    """The parsed document, or a DataError naming the file (and line) that cannot be read."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(path, "file is missing") from None
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror or exc}") from None
    key = hashlib.sha256(raw).hexdigest()
    if key in _CACHE:
        return _CACHE[key]
    refuse_aliases(raw, path)
    try:
        data = yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DataError(path, f"not valid YAML{where}: {problem}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a 5,000-digit integer
        raise DataError(path, f"a value cannot be read: {(str(exc).splitlines() or [''])[0][:160]}") from None
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = data
    return data


def refuse_aliases(raw: bytes, path) -> None:
    """YAML anchors and aliases are refused: a few hundred bytes of nested aliases expand to 1e8
    leaves (the 'billion laughs'); suite and config files never need them."""
    if b"*" not in raw and b"&" not in raw:  # cheap: most files have neither
        return
    try:
        for event in yaml.parse(raw, Loader=_Loader):
            anchor = getattr(event, "anchor", None)
            if isinstance(event, yaml.AliasEvent) or anchor:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise DataError(path, f"YAML anchors and aliases (&{anchor} / *{anchor}) are not allowed "
                                f"(line {line}); write the value out")
    except yaml.YAMLError:
        return  # read_yaml reports the syntax error with its line


class Flow(dict):
    """A mapping written on one line ({a: 1, b: 2}) to keep scene files compact and diffable."""


class FlowList(list):
    """A list written on one line ([a, b])."""


class _SuiteDumper(_Dumper):  # type: ignore[misc, valid-type]
    pass


_SuiteDumper.add_representer(
    Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True))
_SuiteDumper.add_representer(
    FlowList, lambda d, data: d.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True))


def dump_yaml(data: Any, header: str = "") -> str:
    """Stable YAML text: keys in insertion order, no line wrapping, optional comment header."""
    body = yaml.dump(data, Dumper=_SuiteDumper, sort_keys=False, allow_unicode=True, width=10_000,
                     default_flow_style=False)
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lines + body


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
