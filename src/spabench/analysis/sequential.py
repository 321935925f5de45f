"""Sequential comparison of two policies on matched pairs: stop as soon as the evidence decides.

Only discordant pairs (one policy succeeds, the other fails) carry evidence about which policy is
better, as in McNemar's test: given that a pair is discordant, "b wins" is Bernoulli(q), and the null
hypothesis is q = 1/2 (given the past, a discordant pair is as likely to favour a as b). Concordant
pairs (both succeed, both fail) leave the evidence unchanged.

The evidence is a test martingale (an e-process): the likelihood ratio of the discordant pairs' signs
against q = 1/2, averaged over a Beta(1, 1) prior on q (a conjugate mixture, in closed form),

    E_n = 2^m B(1 + w_b, 1 + w_a) / B(1, 1),    m = w_b + w_a discordant pairs so far.

Under the null E_n is a nonnegative martingale starting at 1, so Ville's inequality (Ville, 1939)
gives P(sup_n E_n >= 1/alpha) <= alpha: stopping at the first n where E_n >= 1/alpha (or at any other
stopping time, for any reason, looking after every pair) decides wrongly with probability at most
alpha. E_n is the average of the two one-sided mixtures over q > 1/2 and q < 1/2; the larger one
names the winner (b when w_b > w_a), and each one-sided mixture is a supermartingale under every q on
its wrong side, so a decision for the worse policy is also at most alpha. `two_sided=False` tests
"b is better than a" alone with the one-sided mixture over q > 1/2.

A purely sequential test pays for looking after every pair: on small gaps it loses power against a
fixed-count test. The hybrid (when `max_pairs` is given) spends a quarter of alpha (SEQUENTIAL_SHARE)
on the e-process, whose threshold is then 4/alpha, and the rest on the exact McNemar test (the
binomial test of the discordant split, scipy.stats.binomtest) at `max_pairs` pairs. The e-process
spends less than its Ville bound: under the null the discordant signs are fair coin flips (optional
skipping), so the probability that it crosses within `max_pairs` discordant pairs is computed exactly
by dynamic programming over the random walk, and the final test gets alpha minus that probability.
The union bound then holds by construction: P(a false decision) <= P(cross) + alpha_final = alpha.

This follows the mathematics (test martingales, e-processes, Ville's inequality) of the published
work, not any implementation: Snyder et al., "Is your imitation learning policy better than mine?
Policy comparison with near-optimal stopping" (STEP, RSS 2025), which stops policy comparisons on
matched binary outcomes with error control at every look; and Turner & Grünwald (2023) for
anytime-valid tests of two proportions with e-processes. No code of either was used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from spabench.errors import DataError
from spabench.suite.vocabulary import policy_name

PRIOR = 1.0                  # Beta(PRIOR, PRIOR) mixing prior over q; 1 is uniform (closed-form e-values)
SEQUENTIAL_SHARE = 0.25      # the hybrid's share of alpha for the e-process (tuned: benchmarks/sequential.py)
EXACT_HORIZON = 4000         # above this many pairs the hybrid credits the e-process with its Ville bound
PAIR_KEY: tuple[str, ...] = ("task", "condition", "evaluation_id", "instruction_variant")
LAB = "lab"                  # when the outcomes name labs, evaluation ids pair only within a lab
UNPAIRED_CHOICES = ("error", "exclude")
PATH_COLUMNS: tuple[str, ...] = ("n", "a", "b", "discordant", "b_wins", "a_wins", "log_e", "e_value", "decided")


@dataclass(frozen=True)
class AlphaSplit:
    """How alpha is spent: the e-process's Ville level, what it can spend at most within max_pairs
    (its exact crossing probability under the null; equal to alpha_seq in the pure mode), and the
    final exact McNemar test's level (0 in the pure mode)."""

    alpha: float
    alpha_seq: float
    alpha_seq_spent: float
    alpha_final: float


@dataclass(frozen=True)
class SequentialResult:
    """The outcome of a sequential comparison of a and b (see `sequential_decision`)."""

    decision: str | None          # "a", "b" or None (not decided: keep going, or the final test did not reject)
    pairs_used: int               # pairs looked at up to the decision (all of them when undecided)
    discordant: int
    b_wins: int
    a_wins: int
    e_value: float                # the e-process at the last pair used
    stopped_by: str | None        # "e-process", "final test" or None
    test: str                     # which test, in words
    two_sided: bool
    max_pairs: int | None
    split: AlphaSplit
    final_pvalue: float | None    # the exact McNemar p-value when the final test ran

    @property
    def alpha(self) -> float:
        return self.split.alpha

    def summary(self) -> str:
        """One line: the decision, the pairs used and the test."""
        decided = self.decision if self.decision is not None else "none"
        return f"decision: {decided} after {self.pairs_used} pairs ({self.test})"


# ---------------------------------------------------------------------------- the e-process

def discordant_log_evalue(b_wins, a_wins, two_sided: bool = True):
    """log E after `b_wins` and `a_wins` discordant pairs (vectorised over equal-shaped arrays).

    Two-sided: log(2^m B(c + w_b, c + w_a) / B(c, c)), c = PRIOR. One-sided ("b better"): the mixture
    over q > 1/2 alone, log 2 more and the prior's posterior share above 1/2,
    log(1 - I_{1/2}(c + w_b, c + w_a)) (I the regularised incomplete beta function).
    """
    from scipy.special import betainc, betaln

    wb, wa = np.asarray(b_wins, dtype=float), np.asarray(a_wins, dtype=float)
    log_e = (wb + wa) * math.log(2.0) + betaln(PRIOR + wb, PRIOR + wa) - betaln(PRIOR, PRIOR)
    if not two_sided:
        with np.errstate(divide="ignore"):
            # 1 - I_{1/2}(x, y) = I_{1/2}(y, x): no cancellation when the upper share is tiny
            log_e = log_e + math.log(2.0) + np.log(betainc(PRIOR + wa, PRIOR + wb, 0.5))
    return log_e


@lru_cache(maxsize=64)
def crossing_probability(horizon: int, threshold: float, two_sided: bool = True) -> float:
    """P(the e-process reaches `threshold` within `horizon` discordant pairs) under the null, where
    the discordant pairs' signs are fair coin flips: absorbed mass of the random walk over (w_b, w_a)."""
    log_threshold = math.log(threshold)
    mass = np.ones(1)             # P(w_b = j, not crossed) after k discordant pairs, j = 0..k
    crossed = 0.0
    for k in range(1, horizon + 1):
        step = np.zeros(k + 1)
        step[:-1] += 0.5 * mass   # a wins: w_b stays
        step[1:] += 0.5 * mass    # b wins
        wb = np.arange(k + 1)
        hit = discordant_log_evalue(wb, k - wb, two_sided) >= log_threshold
        crossed += float(step[hit].sum())
        step[hit] = 0.0
        mass = step
    return crossed


def alpha_split(alpha: float = 0.05, max_pairs: int | None = None, two_sided: bool = True) -> AlphaSplit:
    """The alpha split: all of alpha on the e-process without `max_pairs`; with it, SEQUENTIAL_SHARE
    of alpha as the e-process's Ville level and alpha minus its exact crossing probability within
    `max_pairs` pairs (at least the remaining share) for the final exact McNemar test."""
    _check_alpha(alpha)
    if max_pairs is None:
        return AlphaSplit(alpha, alpha, alpha, 0.0)
    _check_max_pairs(max_pairs)
    alpha_seq = alpha * SEQUENTIAL_SHARE
    spent = alpha_seq
    if max_pairs <= EXACT_HORIZON:
        spent = min(alpha_seq, crossing_probability(int(max_pairs), 1.0 / alpha_seq, two_sided))
    return AlphaSplit(alpha, alpha_seq, spent, alpha - spent)


# ---------------------------------------------------------------------------- on 0/1 sequences

def paired_evalue_path(a, b, alpha: float = 0.05, max_pairs: int | None = None,
                       two_sided: bool = True) -> pd.DataFrame:
    """The running evidence, one row per pair: n, a, b (0/1), discordant, b_wins, a_wins (cumulative
    counts), log_e, e_value (the e-process) and decided (the e-process has reached 1/alpha_seq by
    this pair; with `max_pairs`, the last row is also decided when the final test rejects there).
    With `max_pairs`, pairs beyond it are not part of the comparison and are left out."""
    first, second = _as_pairs(a, b)
    split = alpha_split(alpha, max_pairs, two_sided)
    if max_pairs is not None:
        first, second = first[:max_pairs], second[:max_pairs]
    b_wins = np.cumsum((first == 0) & (second == 1))
    a_wins = np.cumsum((first == 1) & (second == 0))
    log_e = discordant_log_evalue(b_wins, a_wins, two_sided)
    decided = np.maximum.accumulate(log_e >= math.log(1.0 / split.alpha_seq))
    if max_pairs is not None and len(first) == max_pairs and not decided[-1]:
        decided[-1] = _final_pvalue(int(b_wins[-1]), int(a_wins[-1]), two_sided) <= split.alpha_final
    with np.errstate(over="ignore"):
        e_value = np.exp(log_e)
    return pd.DataFrame({
        "n": np.arange(1, len(first) + 1), "a": first, "b": second, "discordant": b_wins + a_wins,
        "b_wins": b_wins, "a_wins": a_wins, "log_e": log_e, "e_value": e_value, "decided": decided,
    }, columns=list(PATH_COLUMNS))


def sequential_decision(a, b, alpha: float = 0.05, max_pairs: int | None = None,
                        two_sided: bool = True) -> SequentialResult:
    """Decide which of two policies is better from matched pairs in their recorded order.

    `a`, `b`: equal-length 0/1 outcomes, pair i being a's and b's rollouts of the same evaluation.
    Without `max_pairs`: the e-process at level alpha, decided at the first pair where it reaches
    1/alpha (else None: keep going). With `max_pairs`: the hybrid (see the module doc); undecided
    before `max_pairs`, the exact McNemar test at `max_pairs` pairs decides (or not) at alpha_final.
    Two-sided, the decision names the better policy; one-sided only "b" can be decided.
    """
    path = paired_evalue_path(a, b, alpha, max_pairs, two_sided)
    split = alpha_split(alpha, max_pairs, two_sided)
    crossed = np.flatnonzero(path["log_e"].to_numpy() >= math.log(1.0 / split.alpha_seq))
    final_pvalue, stopped_by = None, None
    if len(crossed):
        last = path.iloc[int(crossed[0])]
        stopped_by = "e-process"
        decided = True
    else:
        last = path.iloc[-1] if len(path) else None
        decided = False
        if max_pairs is not None and len(path) == max_pairs and last is not None:
            final_pvalue = _final_pvalue(int(last["b_wins"]), int(last["a_wins"]), two_sided)
            decided = final_pvalue <= split.alpha_final
            stopped_by = "final test" if decided else None
    wb, wa = (int(last["b_wins"]), int(last["a_wins"])) if last is not None else (0, 0)
    decision = ("b" if wb > wa else "a") if decided else None
    return SequentialResult(
        decision=decision, pairs_used=int(last["n"]) if last is not None else 0, discordant=wb + wa,
        b_wins=wb, a_wins=wa, e_value=float(last["e_value"]) if last is not None else 1.0,
        stopped_by=stopped_by, test=_test_name(split, max_pairs, two_sided), two_sided=two_sided,
        max_pairs=max_pairs, split=split, final_pvalue=final_pvalue)


def _final_pvalue(b_wins: int, a_wins: int, two_sided: bool) -> float:
    """The exact McNemar p-value: the binomial test of b's share of the discordant pairs against 1/2."""
    from scipy.stats import binomtest

    if b_wins + a_wins == 0:
        return 1.0
    return float(binomtest(b_wins, b_wins + a_wins, 0.5, alternative="two-sided" if two_sided else "greater").pvalue)


def _test_name(split: AlphaSplit, max_pairs: int | None, two_sided: bool) -> str:
    sides = "two-sided" if two_sided else "one-sided (b better)"
    eprocess = f"Beta({PRIOR:g},{PRIOR:g})-mixture e-process on discordant pairs, {sides}"
    if max_pairs is None:
        return f"{eprocess}, alpha {split.alpha:g} at every look"
    return (f"hybrid: {eprocess} at level {split.alpha_seq:g} (spends at most {split.alpha_seq_spent:.4g} "
            f"within {max_pairs} pairs) + exact McNemar at {max_pairs} pairs, alpha {split.alpha_final:.4g}; "
            f"total alpha {split.alpha:g}")


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5:
        raise ValueError(f"alpha={alpha!r} must be a number in (0, 0.5): the chance of a false decision "
                         "over all looks (0.05 is usual)")


def _check_max_pairs(max_pairs: int) -> None:
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, int | np.integer) or max_pairs < 1:
        raise ValueError(f"max_pairs={max_pairs!r} must be a whole number of pairs >= 1 (or None: no final test)")


def _as_pairs(a, b) -> tuple[np.ndarray, np.ndarray]:
    """a and b as int arrays of 0/1 of equal length, or one ValueError saying what is wrong."""
    arrays = []
    for name, values in (("a", a), ("b", b)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"{name} must be a one-dimensional sequence of 0/1 outcomes (got shape {array.shape})")
        if array.dtype == bool:
            array = array.astype(np.int64)
        try:
            numbers = array.astype(float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must hold 0/1 outcomes (1 = success); got {array[:5].tolist()!r}") from None
        bad = ~np.isin(numbers, (0.0, 1.0))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}[{i}] = {array[i].item()!r}: outcomes must be 0 or 1 (1 = success); "
                             "leave invalid rollouts out before pairing")
        arrays.append(numbers.astype(np.int64))
    if len(arrays[0]) != len(arrays[1]):
        raise ValueError(f"a and b must be matched pairs of equal length (got {len(arrays[0])} and {len(arrays[1])})")
    return arrays[0], arrays[1]


# ---------------------------------------------------------------------------- many comparisons at once

def simulate_pairs(p10: float, p01: float, p11: float, pairs: int, paths: int, seed: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): 0/1 arrays of shape (paths, pairs), each pair drawn independently with the joint shares
    p10 (only a succeeds), p01 (only b), p11 (both) and the rest (neither). One uniform draw per pair,
    so a seed gives the same pairs whatever the shares (benchmarks/sequential.py and `power` share it)."""
    if min(p10, p01, p11) < 0 or p10 + p01 + p11 > 1 + 1e-12:
        raise ValueError(f"joint shares p10={p10}, p01={p01}, p11={p11} must be >= 0 and sum to at most 1")
    u = np.random.default_rng(seed).random((paths, pairs))
    a = u < p10 + p11                           # [0, p10): only a; [p10, p10 + p11): both
    b = (u >= p10) & (u < p10 + p11 + p01)      # [p10 + p11, p10 + p11 + p01): only b
    return a.astype(np.int8), b.astype(np.int8)


def mcnemar_pvalues(b_wins, a_wins):
    """Two-sided exact McNemar p-values, vectorised: min(1, 2 P(X <= min)), X ~ Bin(m, 1/2)."""
    from scipy.stats import binom

    m = np.asarray(b_wins) + np.asarray(a_wins)
    return np.where(m > 0, np.minimum(1.0, 2.0 * binom.cdf(np.minimum(b_wins, a_wins), m, 0.5)), 1.0)


def decide_paths(a: np.ndarray, b: np.ndarray, alpha: float = 0.05, max_pairs: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of (paths, pairs) arrays, the two-sided rule of `sequential_decision`, vectorised:
    decision (+1 b, -1 a, 0 none), pairs used (all of them when undecided) and whether the e-process
    crossed. With `max_pairs` the rows are exactly max_pairs long and the final test runs at the end."""
    paths, n = a.shape
    split = alpha_split(alpha, max_pairs)
    b_wins = np.cumsum((a == 0) & (b == 1), axis=1)
    a_wins = np.cumsum((a == 1) & (b == 0), axis=1)
    hit = discordant_log_evalue(b_wins, a_wins) >= math.log(1.0 / split.alpha_seq)
    crossed = hit.any(axis=1)
    first = np.where(crossed, hit.argmax(axis=1), n - 1)
    rows = np.arange(paths)
    sign = np.sign(b_wins[rows, first] - a_wins[rows, first])
    decision = np.where(crossed, sign, 0)
    used = np.where(crossed, first + 1, n)
    if max_pairs is not None:
        if max_pairs != n:
            raise ValueError(f"decide_paths: rows of {n} pairs, max_pairs={max_pairs}: the final test needs them equal")
        final = mcnemar_pvalues(b_wins[:, -1], a_wins[:, -1]) <= split.alpha_final
        decision = np.where(~crossed & final, np.sign(b_wins[:, -1] - a_wins[:, -1]), decision)
    return decision, used, crossed


@dataclass(frozen=True)
class ExpectedPairs:
    """What the rule does on simulated comparisons: pairs run (mean, median, 90th percentile; a
    comparison stops when decided, else at the horizon) and the shares decided right and wrong."""

    horizon: int
    hybrid: bool
    mean: float
    median: float
    p90: float
    right: float
    wrong: float
    paths: int


def expected_pairs(p10: float, p01: float, horizon: int, alpha: float = 0.05, hybrid: bool = True,
                   paths: int = 2000, seed: int = 20261206) -> ExpectedPairs:
    """Simulated pairs run by the sequential rule (the hybrid with max_pairs = horizon, or the purely
    sequential test stopped at the horizon) when only a succeeds in a share p10 of pairs and only b in
    p01. "Right" is the policy with the larger share (with p10 == p01 every decision is wrong)."""
    a, b = simulate_pairs(p10, p01, 0.0, int(horizon), paths, seed)
    decision, used, _ = decide_paths(a, b, alpha, int(horizon) if hybrid else None)
    better = int(np.sign(p01 - p10))
    right = float(np.mean(decision == better)) if better else 0.0
    wrong = float(np.mean((decision != 0) & (decision != better)))
    return ExpectedPairs(int(horizon), hybrid, float(used.mean()), float(np.median(used)),
                         float(np.percentile(used, 90)), right, wrong, paths)


# ---------------------------------------------------------------------------- from an outcomes table

def paired_outcomes(outcomes: pd.DataFrame, a: str, b: str, unpaired: str = "error") -> pd.DataFrame:
    """Policies a's and b's valid rollouts paired by evaluation, in recorded order.

    `outcomes` is the validated table (`load_outcomes`, or a campaign's outcomes view). A pair is
    one (task, condition, evaluation_id, instruction_variant), within a lab when the table names
    labs; invalid attempts are never evidence. Rows are in recorded order (a CSV's file order, the
    ledger's run order); a pair takes the place of its evaluation's last row in the table (any
    policy, valid or not), so the same rows in another order within one evaluation give the same
    sequence. Returns the key columns, `a`, `b` (0/1) and `row` (that place); `attrs` hold the
    policy names and, with `unpaired="exclude"`, the rows left out.

    One clear DataError when a or b has no valid rollout, when they share no evaluation, or (with
    `unpaired="error"`, the default) when a row of either has no partner of the other.
    """
    source = str(outcomes.attrs.get("source", "outcomes"))
    if unpaired not in UNPAIRED_CHOICES:
        raise DataError("unpaired", f"unknown choice {unpaired!r}", allowed=UNPAIRED_CHOICES)
    a, b = policy_name(str(a)), policy_name(str(b))
    if a == b:
        raise DataError(source, f"a and b are the same policy '{a}'; a comparison needs two", field="policy")
    key = ([LAB] if LAB in outcomes.columns else []) + list(PAIR_KEY)
    valid = outcomes[outcomes["valid"] & outcomes["success"].notna()]
    present = list(dict.fromkeys(valid["policy"]))
    for name, side in (("a", a), ("b", b)):
        if side not in present:
            raise DataError(source, f"policy {name}='{side}' has no valid rollout in the outcomes", field="policy",
                            allowed=present or "(no valid rollout at all)")
    place = outcomes.groupby(key, sort=False)["row"].max().rename("row")
    sides = {name: valid[valid["policy"] == side].set_index(key)["success"].astype(int).rename(name)
             for name, side in (("a", a), ("b", b))}
    pairs = pd.concat([sides["a"], sides["b"]], axis=1, join="inner")
    if pairs.empty:
        raise DataError(source, f"policies '{a}' and '{b}' share no evaluation (the same "
                        f"{', '.join(key)}), so there is nothing to pair", field="evaluation_id")
    lonely = valid[valid["policy"].isin((a, b)) & ~valid.set_index(key).index.isin(pairs.index)]
    if len(lonely) and unpaired == "error":
        row = lonely.sort_values("row").iloc[0]
        other = b if row["policy"] == a else a
        raise DataError(source, f"this rollout of policy '{row['policy']}' (evaluation_id '{row['evaluation_id']}', "
                        f"{row['task']} / {row['condition']}) has no valid rollout of '{other}' to pair with",
                        row=int(row["row"]), field="evaluation_id",
                        allowed="rows of both policies on the same evaluations (or unpaired=exclude to leave "
                                "such rows out, listed)")
    pairs = pairs.join(place).sort_values("row", kind="stable").reset_index()
    pairs = pairs[[*key, "a", "b", "row"]]
    pairs.attrs.update({"source": source, "a": a, "b": b, "unpaired_rows": sorted(int(r) for r in lonely["row"])})
    return pairs

