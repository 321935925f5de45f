"""Issue 38: one ComparisonEvidence per look is both the terminal's line and the bench page's panel, by
aliases only. Hand case: b wins 4 discordant pairs at alpha 0.45 (pure e-process), E = 2^4 4!/5! = 3.2
>= 1/0.45 at the fourth pair; before it, 2^3 3!/4! = 2 < 2.222: keep going."""

from __future__ import annotations

from spabench.analysis.sequential import sequential_decision
from spabench.plan.config import StoppingRule
from spabench.rollout.stopping import ComparisonEvidence

RULE = StoppingRule("sequential", "policy_a_name", "policy_b_name", 0.45)
ALIASES = {"policy_a_name": "P1", "policy_b_name": "P2"}


def _evidence(pairs: int) -> ComparisonEvidence:
    result = sequential_decision([0] * pairs, [1] * pairs, alpha=RULE.alpha) if pairs else None
    return ComparisonEvidence.of(RULE, ALIASES, result, over=result is not None and result.decision is not None)


def test_the_terminal_line_and_the_page_state_are_one_object():
    decided = _evidence(4)
    assert decided.line == ("comparison P1 vs P2 (stopping rule, alpha 0.45): 4 pairs, discordant 4 (P2 won 4, P1 won "
                            "0), e-value 3.2 of 2.222: decided: P2 after 4 pairs (e-process); their remaining trials "
                            "are not run")
    shown = decided.public()
    assert shown == {"a": "P1", "b": "P2", "alpha": 0.45, "max_pairs": None, "pairs": 4, "discordant": 4, "a_wins": 0,
                     "b_wins": 4, "e_value": "3.2", "threshold": "2.222", "verdict": "decided", "winner": "P2",
                     "head": "comparison P1 vs P2 (stopping rule, alpha 0.45)", "text": decided.text}
    assert f"{shown['head']}: {shown['text']}" == decided.line
    assert "policy_" not in repr(shown) and "policy_" not in decided.line   # aliases only


def test_keep_going_before_the_threshold_and_before_any_pair():
    going = _evidence(3)
    assert (going.verdict, going.winner, going.public()["e_value"]) == ("keep going", None, "2")
    assert going.line.endswith("3 pairs, discordant 3 (P2 won 3, P1 won 0), e-value 2 of 2.222: keep going")
    none = _evidence(0)
    assert none.line == "comparison P1 vs P2 (stopping rule, alpha 0.45): no pair yet: keep going"
    assert none.public()["pairs"] == 0 and none.public()["e_value"] is None and none.state == (0,)
