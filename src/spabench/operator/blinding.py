"""Blinding: with aliases on, nothing the operator sees names a policy or its card.

Applied once, where text leaves the harness for the operator: the stream the session and its
operator print to (checklists, status line, fault lines, progress and summaries) and the log
handlers. Every policy and card name of the campaign is replaced, as a whole word, by its alias;
messages from the policy clients and the bench need no knowledge of blinding.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from spabench.ledger.schema import TrialRow
    from spabench.policy.card import PolicyCard

NEUTRAL = "policy"


class Blinder:
    """Replaces each name (policy, card) by its alias, and each word that tells a policy family
    (the card's family, its wire protocol: "openpi server ...") by "policy", as whole words."""

    def __init__(self, names_to_alias: dict[str, str], family_words: Iterable[str] = ()):
        self.names_to_alias = {n: a for n, a in names_to_alias.items() if n and n != a}
        for word in family_words:
            if word and word not in self.names_to_alias and word != NEUTRAL:
                self.names_to_alias[word] = NEUTRAL
        names = sorted(self.names_to_alias, key=len, reverse=True)  # longest first: pi05_fast before pi05
        self._pattern = (re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])")
                         if names else None)

    @classmethod
    def for_trials(cls, trials: Iterable[TrialRow], cards: dict[str, PolicyCard] | None = None) -> Blinder | None:
        """The campaign's blinder, or None when its aliases are the policy names (not blind)."""
        mapping: dict[str, str] = {}
        family_words: set[str] = set()
        blind = False
        for t in trials:
            blind = blind or t.alias != t.policy
            mapping.setdefault(t.policy, t.alias)
            mapping.setdefault(t.card, t.alias)
            card = (cards or {}).get(t.card)
            if card is not None:
                if card.name:
                    mapping.setdefault(card.name, t.alias)
                family_words |= {card.family, card.protocol}
        return cls(mapping, sorted(family_words)) if blind else None

    def redact(self, text: str) -> str:
        if self._pattern is None or not isinstance(text, str):
            return text
        return self._pattern.sub(lambda m: self.names_to_alias[m.group(1)], text)


class BlindStream(io.TextIOBase):
    """A text stream that redacts every write; terminal queries pass through (rich, key reader)."""

    def __init__(self, inner: TextIO, blinder: Blinder):
        self.inner, self.blinder = inner, blinder

    def write(self, text: str) -> int:
        self.inner.write(self.blinder.redact(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        try:
            return self.inner.isatty()
        except (AttributeError, ValueError):
            return False

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # typeshed: a plain attribute; at run time read-only
        return getattr(self.inner, "encoding", None) or "utf-8"

    def getvalue(self) -> str:  # the inner StringIO's text (tests, captured sessions)
        return self.inner.getvalue()  # type: ignore[attr-defined]


class BlindFilter(logging.Filter):
    """Redacts log records on their way to a handler (the operator reads stderr too)."""

    def __init__(self, blinder: Blinder):
        super().__init__()
        self.blinder = blinder

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        redacted = self.blinder.redact(text)
        if redacted != text:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self.blinder.redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self.blinder.redact(record.exc_text)
        return True


class blind_logging:
    """Context: every handler of the root logger redacts through `blinder` (None: no-op)."""

    def __init__(self, blinder: Blinder | None):
        self.filter = BlindFilter(blinder) if blinder is not None else None
        self.handlers: list[logging.Handler] = []

    def __enter__(self) -> blind_logging:
        if self.filter is not None:
            self.handlers = list(logging.getLogger().handlers)
            for handler in self.handlers:
                handler.addFilter(self.filter)
        return self

    def __exit__(self, *exc) -> None:
        if self.filter is not None:
            for handler in self.handlers:
                handler.removeFilter(self.filter)
        self.handlers = []
