"""Small field checks for hand-edited YAML: each failure is one DataError naming file, field, allowed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from spabench.errors import DataError, shown


def mapping(value: Any, path: Path, field: str | None) -> dict:
    if not isinstance(value, dict):
        raise DataError(path, f"expected a mapping, got {type(value).__name__}", field=field)
    return value


def keys(data: dict, path: Path, field: str | None, required: Sequence[str], optional: Sequence[str] = ()) -> None:
    allowed = list(required) + list(optional)
    for key in data:
        if key not in allowed:
            raise DataError(path, f"unknown key {shown(key)}", field=_join(field, str(key)), allowed=allowed)
    for key in required:
        if key not in data:
            raise DataError(path, f"missing key {shown(key)}", field=_join(field, key), allowed=allowed)


def _join(field: str | None, key: str) -> str:
    return key if not field else f"{field}.{key}"


def text(value: Any, path: Path, field: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise DataError(path, f"expected a non-empty string, got {shown(value)}", field=field)
    return value


def number(value: Any, path: Path, field: str, *, positive: bool = False, minimum: float | None = None) -> float:
    try:
        finite = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise DataError(path, f"expected a finite number, got {shown(value)}", field=field)
    if positive and value <= 0:
        raise DataError(path, f"expected a number > 0, got {shown(value)}", field=field)
    if minimum is not None and value < minimum:
        raise DataError(path, f"expected a number >= {minimum}, got {shown(value)}", field=field)
    return float(value)


def integer(value: Any, path: Path, field: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(path, f"expected an integer, got {shown(value)}", field=field)
    if minimum is not None and value < minimum:
        raise DataError(path, f"expected an integer >= {minimum}, got {shown(value)}", field=field)
    return value


def boolean(value: Any, path: Path, field: str) -> bool:
    if not isinstance(value, bool):
        raise DataError(path, f"expected true or false, got {shown(value)}", field=field, allowed=("true", "false"))
    return value


def numbers(value: Any, path: Path, field: str, n: int, *, positive: bool = False) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise DataError(path, f"expected a list of {n} numbers, got {shown(value)}", field=field)
    return tuple(number(v, path, f"{field}[{i}]", positive=positive) for i, v in enumerate(value))


def string_list(value: Any, path: Path, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise DataError(path, f"expected a list, got {shown(value)}", field=field)
    return tuple(text(v, path, f"{field}[{i}]") for i, v in enumerate(value))


def choice[T: str](value: Any, allowed: Iterable[T], path: Path, field: str, what: str) -> T:
    options = list(allowed)
    if value not in options:
        raise DataError(path, f"unknown {what} {shown(value)}", field=field, allowed=options)
    return value


def choices(values: Iterable[str], allowed: Iterable[str], path: Path, field: str, what: str) -> tuple[str, ...]:
    allowed = list(allowed)
    return tuple(choice(v, allowed, path, f"{field}[{i}]", what) for i, v in enumerate(values))
