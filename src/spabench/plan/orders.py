"""Run orders: which evaluation comes next and in which order the policies run on it.

Both orders keep the policies of one evaluation adjacent (one scene set-up serves every policy, the
protocol's scene matching) and counterbalance them: the n policies follow the rows of a rotating
Latin square whose base row is shuffled by the seed, each row used once per n evaluations in a seeded
random sequence, so every policy runs first (and in every other position) equally often, +-1.

- blocked: by task (campaign order), then condition (vocabulary order), then scene id.
- interleaved: scene-major; physical scenes in a seeded random order, the conditions run on one
  scene (e.g. ood, direct, paraphrase_ood, paraphrase_direct) in a seeded random order, each with
  every policy before the next.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence, TypeVar

from spabench.plan.aliases import seeded_rng
from spabench.suite.vocabulary import CONDITIONS

E = TypeVar("E")


def latin_rows(policies: Sequence[str], rng: random.Random) -> list[list[str]]:
    """The n rows of a rotating Latin square over a seeded base order."""
    base = list(policies)
    rng.shuffle(base)
    return [base[r:] + base[:r] for r in range(len(base))]


def counterbalanced(policies: Sequence[str], n_blocks: int, rng: random.Random) -> list[list[str]]:
    """A policy order for each of n_blocks consecutive blocks (each Latin row once per n blocks)."""
    rows = latin_rows(policies, rng)
    sequence: list[int] = []
    while len(sequence) < n_blocks:
        cycle = list(range(len(rows)))
        rng.shuffle(cycle)
        sequence.extend(cycle)
    return [rows[i] for i in sequence[:n_blocks]]


def order_blocks(evaluations: Sequence[E], order: str, seed: int, task_order: Sequence[str],
                 key: Callable[[E], tuple[str, str, str]]) -> list[E]:
    """Evaluations in run order. `key(e)` gives (task, condition, scene_id)."""
    if order == "blocked":
        t_rank = {t: i for i, t in enumerate(task_order)}
        c_rank = {c: i for i, c in enumerate(CONDITIONS)}
        return sorted(evaluations, key=lambda e: (t_rank[key(e)[0]], c_rank[key(e)[1]], key(e)[2]))
    if order == "interleaved":
        rng = seeded_rng(seed, "interleaved")
        by_scene: dict[str, list[E]] = {}
        for e in sorted(evaluations, key=lambda e: (key(e)[2], key(e)[1])):
            by_scene.setdefault(key(e)[2], []).append(e)
        scenes = sorted(by_scene)
        rng.shuffle(scenes)
        out: list[E] = []
        for scene in scenes:
            group = by_scene[scene]
            rng.shuffle(group)
            out.extend(group)
        return out
    raise ValueError(f"unknown order {order!r}")


def run_order(evaluations: Sequence[E], policies: Sequence[str], order: str, seed: int,
              task_order: Sequence[str], key: Callable[[E], tuple[str, str, str]]) -> list[tuple[E, str]]:
    """(evaluation, policy) pairs in run order; each evaluation's policies adjacent, counterbalanced."""
    blocks = order_blocks(evaluations, order, seed, task_order, key)
    policy_rows = counterbalanced(policies, len(blocks), seeded_rng(seed, f"counterbalance:{order}"))
    return [(e, p) for e, row in zip(blocks, policy_rows) for p in row]
