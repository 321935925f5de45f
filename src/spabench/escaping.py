"""Escaping user-supplied labels (policy names, aliases, notes) for every place the tool prints them.

A policy name is whatever the operator typed: a newline or `|` must not break a Markdown table or
a figure label, and `=cmd|...` must not become a spreadsheet formula when summary.csv is opened in
Excel or LibreOffice (OWASP "CSV injection").
Everything here is display-only: the data files keep the exact names, except CSV cells that would
start a formula, which get a leading apostrophe (the spreadsheet convention for "this is text").
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_MD_SPECIAL = re.compile(r"([\\`*{}\[\]<>#|~$])")  # not _ (GFM ignores it inside words)


def printable(text: Any) -> str:
    """One line of text: control characters shown as escapes, newlines and tabs as spaces."""
    s = "" if text is None else str(text)
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def markdown_text(text: Any) -> str:
    """Inline Markdown showing `text` literally (one line, no emphasis, links, HTML or table breaks)."""
    return _MD_SPECIAL.sub(r"\\\1", printable(text))


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string starting like a formula gets a leading '.

    Numbers (including negative ones) are not strings here and pass unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_safe_frame(frame):
    """A copy of a pandas DataFrame with every text cell passed through `csv_cell`."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = out[column].map(csv_cell)
    out.columns = [csv_cell(c) for c in out.columns]
    return out
