"""Blind aliases: the operator sees "P1".."Pn", never which policy is running.

The mapping is a seeded permutation so that a campaign's plan is reproducible from its config; it is
stored in the ledger's meta and kept out of operator-facing output.
"""

from __future__ import annotations

import random


def seeded_rng(seed: int, purpose: str) -> random.Random:
    """An independent, reproducible stream per purpose (str seeds hash with SHA-512, not PYTHONHASHSEED)."""
    return random.Random(f"spabench:{seed}:{purpose}")


def assign_aliases(policies: list[str], seed: int, blind: bool = True) -> dict[str, str]:
    """policy -> alias. Blind: a seeded permutation of P1..Pn; otherwise the policy name itself."""
    if not blind:
        return {p: p for p in policies}
    numbers = list(range(1, len(policies) + 1))
    seeded_rng(seed, "aliases").shuffle(numbers)
    return {p: f"P{n}" for p, n in zip(policies, numbers, strict=True)}
