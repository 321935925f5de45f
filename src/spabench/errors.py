"""Errors that reach the operator. Each says which file, which field and what is allowed."""

from __future__ import annotations


def shown(value, limit: int = 80) -> str:
    """A bounded repr for error messages: a hostile value (a YAML alias tree, a 5,000-digit number,
    a megabyte string) is shown as its first `limit` characters, never expanded in full."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 3, 4, 4, 4, 4
    r.maxstring, r.maxother, r.maxlong = limit, limit, limit
    try:
        text = r.repr(value)
    except Exception:  # a repr that raises (e.g. int too large to convert) is still one line
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit + 3 else text[:limit] + "..."


class SpabenchError(Exception):
    """Base class: an error whose message is fit to show the operator as is."""


class ConfigError(SpabenchError):
    """A Hydra config value is missing, unknown or out of range."""


class DataError(SpabenchError):
    """A data file (scene, suite, outcomes CSV, calibration) is malformed."""

    def __init__(self, path, message: str, *, field: str | None = None, row: int | None = None,
                 allowed=None):
        where = str(path)
        if row is not None:
            where += f", row {row}"
        if field is not None:
            where += f", field '{field}'"
        text = f"{where}: {message}"
        if allowed is not None:
            allowed_text = ", ".join(map(str, allowed)) if not isinstance(allowed, str) else allowed
            text += f" (allowed: {allowed_text})"
        super().__init__(text)
        self.path, self.field, self.row, self.allowed = path, field, row, allowed


class SafetyError(SpabenchError):
    """A limit, envelope or calibration check failed; the robot must not move."""


class ProtocolError(SpabenchError):
    """A policy server broke its wire protocol (bad reply, wrong shape, non-finite values)."""
