"""A comparison campaign's stopping rule at `run`: once the sequential test of policies a and b decides
(or max_pairs pairs ran), their remaining trials are not scheduled; other policies' trials run on.

The rule is the one `spabench plan` recorded (campaign.stopping in DIR/config.yaml); the evidence is
the ledger's valid, scored pairs in the order their attempts ended, exactly what `spabench compare
campaign=DIR` reads, so the terminal and a later `compare` agree. Policies are named by their
aliases (a blinded campaign's terminal never shows a policy's name).
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
        a, b = self.aliases.get(self.rule.a, self.rule.a), self.aliases.get(self.rule.b, self.rule.b)
        head = f"comparison {a} vs {b} (stopping rule, alpha {self.rule.alpha:g})"
        if result is None:
            state: tuple = (0,)
            line = f"{head}: no pair yet: keep going"
        else:
            state = (result.pairs_used, result.discordant, self.over)
            threshold = 1.0 / result.split.alpha_seq
            evidence = (f"{result.pairs_used} pairs, discordant {result.discordant} ({b} won {result.b_wins}, {a} won "
                        f"{result.a_wins}), e-value {_number(result.e_value)} of {_number(threshold)}")
            if result.decision is not None:
                winner = a if result.decision == "a" else b
                verdict = (f"decided: {winner} after {result.pairs_used} pairs ({result.stopped_by}); "
                           f"their remaining trials are not run")
            elif self.over:
                verdict = (f"not decided at max_pairs={self.rule.max_pairs}: no difference shown; their remaining "
                           "trials are not run")
            else:
                verdict = "keep going"
            line = f"{head}: {evidence}: {verdict}"
        if state != self._said:
            self.say(line)
            self._said = state
        return self.over


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "inf"
