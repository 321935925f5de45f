"""Names that become file names or ids (policy, alias, campaign, card): validated like scene ids.

A policy named `../../outside/pwn` would otherwise become the alias, the trial and attempt ids and the
episode folder, and write outside the campaign. The rule: a letter or digit first, then letters,
digits, `_`, `.`, `-` (no `..`, no path separators, no control characters, no spaces), at most 64.
"""

from __future__ import annotations

import re

from spabench.errors import shown

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
NAME_RULE = "a letter or digit, then letters, digits, '_', '.', '-' (at most 64, no '..')"


def name_problem(value: object) -> str | None:
    """Why `value` is not a safe name, or None."""
    if not isinstance(value, str):
        return f"must be a string, got {shown(value)}"
    if not NAME_RE.match(value) or ".." in value:
        return f"{shown(value)} is not a safe name ({NAME_RULE}); it becomes file and folder names"
    return None
