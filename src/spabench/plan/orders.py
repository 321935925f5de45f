"""Run orders: which evaluation comes next and in which order the policies run on it.

Both orders keep the policies of one evaluation adjacent (one scene set-up serves every policy, the
protocol's scene matching) and balance them for carryover with a Williams design: the rows of a
Williams square over a seeded order of the n policies (for odd n, the square and its mirror image,
2n rows), each row used once per cycle in a seeded random sequence. Then every policy runs in every
position equally often and every policy directly follows every other policy equally often (exactly
so per complete cycle). Evaluations with different policy sets (ID-only baselines) are balanced
within each set.

- blocked: by task (campaign order), then condition (vocabulary order), then scene id.
- interleaved: scene-major; physical scenes in a seeded random order, the conditions run on one
  scene (e.g. ood, direct, paraphrase_ood, paraphrase_direct) in a seeded random order, each with
  every policy before the next.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from spabench.plan.aliases import seeded_rng
from spabench.suite.vocabulary import CONDITIONS


def williams_rows(policies: Sequence[str], rng: random.Random) -> list[list[str]]:
    """A Williams design over a seeded order of the policies: n rows for even n, 2n for odd n.

    Row r is (first + r) mod n with first = 0, 1, n-1, 2, n-2, ...; for odd n the mirrored rows are
    added, so each ordered pair of neighbours occurs equally often over the rows.
    """
    base = list(policies)
    rng.shuffle(base)
    n = len(base)
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[base[(f + r) % n] for f in first] for r in range(n)]
    if n % 2 == 1 and n > 1:
        rows += [list(reversed(row)) for row in rows]
    return rows


latin_rows = williams_rows  # the older name


def counterbalanced(policies: Sequence[str], n_blocks: int, rng: random.Random) -> list[list[str]]:
    """A policy order for each of n_blocks consecutive blocks (each Williams row once per cycle)."""
    rows = williams_rows(policies, rng)
    sequence: list[int] = []
    while len(sequence) < n_blocks:
        cycle = list(range(len(rows)))
        rng.shuffle(cycle)
        sequence.extend(cycle)
    return [rows[i] for i in sequence[:n_blocks]]


def order_blocks[E](evaluations: Sequence[E], order: str, seed: int, task_order: Sequence[str],
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


def run_order[E](evaluations: Sequence[E], policies: Sequence[str], order: str, seed: int,
              task_order: Sequence[str], key: Callable[[E], tuple[str, str, str]],
              policies_for: Callable[[E], Sequence[str]] | None = None) -> list[tuple[E, str]]:
    """(evaluation, policy) pairs in run order; each evaluation's policies adjacent, carryover-balanced.

    `policies_for(e)` (default: all) names the policies that run evaluation e; each distinct policy set
    gets its own Williams design over the blocks that have it.
    """
    blocks = order_blocks(evaluations, order, seed, task_order, key)
    rank = {p: i for i, p in enumerate(policies)}
    sets = [tuple(sorted(policies_for(e) if policies_for else policies, key=rank.__getitem__)) for e in blocks]
    rows_by_set: dict[tuple[str, ...], list[list[str]]] = {}
    for members in dict.fromkeys(sets):
        label = "" if len(members) == len(policies) else ":" + ",".join(members)
        rows_by_set[members] = counterbalanced(members, sets.count(members),
                                               seeded_rng(seed, f"counterbalance:{order}{label}"))
    used = {members: 0 for members in rows_by_set}
    out: list[tuple[E, str]] = []
    for e, members in zip(blocks, sets, strict=True):
        row = rows_by_set[members][used[members]]
        used[members] += 1
        out.extend((e, p) for p in row)
    return out


def design_record(policies: Sequence[str], seed: int, order: str) -> dict:
    """What the plan records about its carryover design (campaign config.yaml / ledger meta)."""
    return {"design": "williams", "mirrored": len(policies) % 2 == 1 and len(policies) > 1,
            "seed": int(seed), "rows": williams_rows(policies, seeded_rng(seed, f"counterbalance:{order}"))}
