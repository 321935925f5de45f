"""A comparison campaign's stopping rule at `run`: once the sequential test of policies a and b decides
(or max_pairs pairs ran), their remaining trials are not scheduled; other policies' trials run on.

The rule is the one `spabench plan` recorded (campaign.stopping in DIR/config.yaml); the evidence is
the ledger's valid, scored pairs in the order their attempts ended, exactly what `spabench compare
campaign=DIR` reads, so the terminal and a later `compare` agree. Policies are named by their
aliases (a blinded campaign's terminal never shows a policy's name). One ComparisonEvidence per look is
what the terminal line is made from and what the browser console's bench page shows (`public()`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spabench.plan.config import StoppingRule
from spabench.plan.planner import CONFIG_YAML, read_campaign_config


class ComparisonStop:
    """The stopping rule of one campaign, checked against its ledger after each of a's and b's attempts."""

    def __init__(self, rule: StoppingRule, aliases: dict[str, str], say: Callable[[str], None]):
        self.rule = rule
        self.aliases = aliases
        self.say = say
        self.over = False
        self.evidence: ComparisonEvidence | None = None   # the last look's
        self._said: tuple | None = None

    @classmethod
    def for_campaign(cls, campaign_dir: Path, ledger: Any, say: Callable[[str], None]) -> ComparisonStop | None:
        """The campaign's rule, or None when it was planned without one."""
        if not (Path(campaign_dir) / CONFIG_YAML).is_file():
            return None
        recorded = read_campaign_config(campaign_dir)["campaign"].get("stopping")
        if not recorded:
            return None
        aliases = {t.policy: t.alias for t in ledger.trials()}
        return cls(StoppingRule(**recorded), aliases, say)

    @property
    def policies(self) -> set[str]:
        return {self.rule.a, self.rule.b}

    def update(self, ledger: Any) -> bool:
        """Recompute the evidence; say it when it changed; True once the comparison is over."""
        from spabench.analysis.compare import comparison_over, ledger_comparison  # pandas/scipy: only here

        result = ledger_comparison(ledger, self.rule.a, self.rule.b, self.rule.alpha, self.rule.max_pairs)
        self.over = comparison_over(result)
        self.evidence = ComparisonEvidence.of(self.rule, self.aliases, result, self.over)
        if self.evidence.state != self._said:
            self.say(self.evidence.line)
            self._said = self.evidence.state
        return self.over


@dataclass(frozen=True)
class ComparisonEvidence:
    """The evidence after one look, by aliases only: the numbers and the words the terminal prints."""

    a: str                  # aliases
    b: str
    alpha: float
    max_pairs: int | None
    pairs: int
    discordant: int
    a_wins: int
    b_wins: int
    e_value: float | None   # None before the first pair
    threshold: float | None
    verdict: str            # "keep going" | "decided" | "not decided"
    winner: str | None      # the alias the test decided for
    text: str               # what follows the head: evidence and verdict, as the terminal says them

    @classmethod
    def of(cls, rule: StoppingRule, aliases: dict[str, str], result: Any, over: bool) -> ComparisonEvidence:
        a, b = aliases.get(rule.a, rule.a), aliases.get(rule.b, rule.b)
        if result is None:
            return cls(a, b, rule.alpha, rule.max_pairs, 0, 0, 0, 0, None, None, "keep going", None,
                       "no pair yet: keep going")
        threshold = 1.0 / result.split.alpha_seq
        evidence = (f"{result.pairs_used} pairs, discordant {result.discordant} ({b} won {result.b_wins}, {a} won "
                    f"{result.a_wins}), e-value {_number(result.e_value)} of {_number(threshold)}")
        winner = None
        if result.decision is not None:
            winner = a if result.decision == "a" else b
            verdict = "decided"
            said = f"decided: {winner} after {result.pairs_used} pairs ({result.stopped_by}); their remaining trials are not run"
        elif over:
            verdict = "not decided"
            said = f"not decided at max_pairs={rule.max_pairs}: no difference shown; their remaining trials are not run"
        else:
            verdict = said = "keep going"
        return cls(a, b, rule.alpha, rule.max_pairs, result.pairs_used, result.discordant, result.a_wins,
                   result.b_wins, float(result.e_value), threshold, verdict, winner, f"{evidence}: {said}")

    @property
    def head(self) -> str:
        return f"comparison {self.a} vs {self.b} (stopping rule, alpha {self.alpha:g})"

    @property
    def line(self) -> str:
        """The terminal's line."""
        return f"{self.head}: {self.text}"

    @property
    def state(self) -> tuple:
        """What changes the line worth saying again."""
        return (self.pairs, self.discordant, self.verdict) if self.e_value is not None else (0,)

    def public(self) -> dict[str, Any]:
        """The bench page's panel (JSON: an infinite e-value as the terminal writes it)."""
        return {"a": self.a, "b": self.b, "alpha": self.alpha, "max_pairs": self.max_pairs, "pairs": self.pairs,
                "discordant": self.discordant, "a_wins": self.a_wins, "b_wins": self.b_wins,
                "e_value": None if self.e_value is None else _number(self.e_value),
                "threshold": None if self.threshold is None else _number(self.threshold),
                "verdict": self.verdict, "winner": self.winner, "head": self.head, "text": self.text}


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "inf"
