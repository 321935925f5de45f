"""`spabench power`: how many trials a cell needs, and how many matched pairs a paired contrast needs.

- Trials per cell for a target half-width h of the 95% interval at an assumed success rate p: the
  Wilson answer (smallest n whose Wilson interval at observed rate p has half-width <= h) beside
  the textbook normal-approximation answer n = ceil(z^2 p (1 - p) / h^2) (97 for +-10 pp at
  p = 0.5, 385 for +-5 pp).
- Matched pairs to detect a paired difference d = p1 - p2 with the exact McNemar test at level
  alpha and the given power, from the two rates and the share of discordant pairs psi (default:
  the two outcomes independent, psi = p1 (1 - p2) + p2 (1 - p1)): Connor's (1987) normal
  approximation n = (z_{a/2} sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2, and the smallest n whose
  exact power (summed over the binomial number of discordant pairs) reaches the target.
- Beside the fixed-count answer, the pairs the sequential rule of `spabench compare` is expected to
  run (the hybrid with max_pairs = the fixed-count n, and the purely sequential test stopped there),
  simulated with `analysis.sequential.expected_pairs`, the code benchmarks/sequential.py runs.
- From a pilot campaign (outcomes CSV or campaign ledger) the same numbers with each cell's observed
  rate and each paired contrast's observed rates and discordance; the trials of a full campaign
  (the protocol's, and the cells at their needed trials) and, from a campaign's attempt times, its
  bench time. A cell with fewer than MIN_PILOT trials, successes or failures is warned about: its
  observed rate (0/20 says "needed 16") is no ground to plan on, so each cell is also planned at the
  rate of its pilot interval nearest 0.5.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TextIO

import numpy as np

from spabench.analysis.exact import wilson_half_width, z_value
from spabench.config import CampaignInput, LedgerKeys, opt
from spabench.errors import ConfigError
from spabench.paths import campaign_folder

MAX_TRIALS = 10 ** 6
MIN_PILOT = 5                # fewer trials (or successes, or failures) in a pilot cell: warned about
SEQUENTIAL_PATHS = 2000      # simulated comparisons per sequential answer (seeded: the same on every run)
SEQUENTIAL_SEED = 20261206   # benchmarks/sequential.py's seed
SEARCH_LIMIT = 1000          # above this fixed-count n the sequential answer is given at n only (time)


@dataclass
class PowerCommandConfig(CampaignInput, LedgerKeys):
    """`spabench power`."""

    command: ClassVar[str] = "power"

    outcomes: Path | None = opt(None, 'an outcomes CSV to report on (instead of campaign=DIR)')
    half_width: float | None = opt(None, 'target half-width of the 95% interval per cell (0.1 = +-10 pp)')
    rate: float = opt(0.5, 'assumed success rate for half_width (0.5 = the worst case)')
    rates: list[float] | None = opt(None, 'assumed rates of a paired contrast, e.g. rates=[0.3,0.6] (matched pairs needed)')
    discordance: float | None = opt(None, 'assumed share of discordant pairs (null: the outcomes independent)')
    alpha: float = opt(0.05, 'two-sided test level; at `compare` the chance of a false decision over all looks, in (0, 0.5)')
    power: float = opt(0.8, 'target power of the paired test')


@dataclass(frozen=True)
class PowerConfig:
    """What `spabench power` computes; one of half_width / rates, or a pilot with either."""
    half_width: float | None = None        # target half-width of the 95% interval (0.10 = +-10 pp)
    rate: float = 0.5                      # assumed success rate for half_width (0.5: the worst case)
    rates: tuple[float, ...] | None = None  # assumed rates (first, second) of a paired contrast (two: checked below)
    discordance: float | None = None       # assumed share of discordant pairs (None: independence)
    alpha: float = 0.05
    power: float = 0.8
    outcomes: Path | None = None           # a pilot campaign's outcomes CSV ...
    campaign_dir: Path | None = None       # ... or its campaign folder
    ledger_url: str | None = None          # the campaign's PostgreSQL ledger (ledger=), else its own

    def __post_init__(self):
        if self.half_width is None and self.rates is None and self.outcomes is None and self.campaign_dir is None:
            raise ConfigError("power needs half_width=H (trials per cell), rates=[P1,P2] (matched pairs), "
                              "or a pilot: outcomes=FILE.csv | campaign=DIR with half_width= and/or power=")
        if self.half_width is not None and not 0 < self.half_width < 0.5:
            raise ConfigError(f"half_width={self.half_width!r} must be in (0, 0.5), e.g. 0.10 for +-10 pp")
        if not 0 <= self.rate <= 1:
            raise ConfigError(f"rate={self.rate!r} must be in [0, 1]")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"alpha={self.alpha!r} must be in (0, 1)")
        if not 0 < self.power < 1:
            raise ConfigError(f"power={self.power!r} must be in (0, 1)")
        if self.rates is not None:
            if len(self.rates) != 2 or not all(0 <= r <= 1 for r in self.rates):
                raise ConfigError(f"rates={list(self.rates)!r} must be two rates in [0, 1], e.g. rates=[0.3,0.6]")
            discordant_shares(*self.rates, self.discordance)  # raises on an impossible combination
        if self.outcomes is not None and self.campaign_dir is not None:
            raise ConfigError("power takes one pilot: outcomes=FILE.csv or campaign=DIR, not both")


# ---------------------------------------------------------------- trials per cell

def wald_trials(rate: float, half_width: float, alpha: float = 0.05) -> int:
    """The textbook n = ceil(z^2 p (1 - p) / h^2) (at least 1)."""
    z = z_value(alpha)
    return max(1, math.ceil(z * z * rate * (1 - rate) / half_width ** 2 - 1e-9))


def wilson_trials(rate: float, half_width: float, alpha: float = 0.05) -> int:
    """The smallest n whose Wilson interval at observed rate `rate` is at most `half_width` wide
    on each side (the half-width falls with n for a fixed rate; bisection)."""
    if wilson_half_width(rate, MAX_TRIALS, alpha) > half_width:
        raise ConfigError(f"half_width={half_width} needs more than {MAX_TRIALS} trials")
    low, high = 1, MAX_TRIALS
    while low < high:
        mid = (low + high) // 2
        if wilson_half_width(rate, mid, alpha) <= half_width:
            high = mid
        else:
            low = mid + 1
    return low


# ---------------------------------------------------------------- matched pairs

def discordant_shares(first: float, second: float, discordance: float | None = None) -> tuple[float, float]:
    """(p10, p01): shares of pairs where only the first / only the second succeeds."""
    if discordance is None:
        discordance = first * (1 - second) + second * (1 - first)
    delta = first - second
    p10, p01 = (discordance + delta) / 2, (discordance - delta) / 2
    if p10 < -1e-12 or p01 < -1e-12 or first - p10 < -1e-12 or 1 - first - p01 < -1e-12 or discordance > 1:
        raise ConfigError(f"discordance={discordance} is impossible with rates {first} and {second}: it "
                          f"must lie in [{abs(delta)}, {min(first + second, 2 - first - second)}]")
    return max(p10, 0.0), max(p01, 0.0)


def connor_pairs(first: float, second: float, discordance: float | None = None, alpha: float = 0.05,
                 power: float = 0.8) -> int:
    """Connor (1987): n = (z_{a/2} sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2, rounded up."""
    p10, p01 = discordant_shares(first, second, discordance)
    psi, delta = p10 + p01, p10 - p01
    if delta == 0:
        return MAX_TRIALS
    z_a, z_b = z_value(alpha), z_value(2 * (1 - power))
    return math.ceil((z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta ** 2, 0.0))) ** 2 / delta ** 2 - 1e-9)


def exact_mcnemar_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Power of the two-sided exact McNemar test with n pairs: the number of discordant pairs D is
    Binomial(n, p10 + p01); given D = d the test rejects when the split lies in its exact
    Binomial(d, 1/2) rejection region, whose probability under the alternative is binomial too."""
    from scipy.stats import binom  # only here: the report never needs scipy

    psi = p10 + p01
    if psi <= 0:
        return 0.0
    d = np.arange(n + 1)
    # c_d: the largest c with 2 P(X <= c | d, 1/2) <= alpha (-1 when none): one below the smallest
    # c whose cdf exceeds alpha/2, found by ppf and checked against the cdf (ppf rounds)
    c = binom.ppf(alpha / 2, d, 0.5).astype(int)
    c = np.where(binom.cdf(c, d, 0.5) <= alpha / 2, c, c - 1)
    c = np.where(binom.cdf(c + 1, d, 0.5) <= alpha / 2, c + 1, c)
    q = p10 / psi
    reject = np.where(c >= 0, binom.cdf(c, d, q) + binom.sf(d - c - 1, d, q), 0.0)
    return float(np.sum(binom.pmf(d, n, psi) * reject))


def exact_pairs(first: float, second: float, discordance: float | None = None, alpha: float = 0.05,
                power: float = 0.8, limit: int = 5000) -> int | None:
    """The smallest n whose exact McNemar power reaches `power` (None beyond `limit`). Exact power
    is saw-toothed in n, so a slightly larger n can fall short again; the report says so."""
    p10, p01 = discordant_shares(first, second, discordance)
    if p10 == p01:
        return None
    start = max(2, connor_pairs(first, second, discordance, alpha, power) // 2)
    for n in range(start, limit + 1):
        if exact_mcnemar_power(n, p10, p01, alpha) >= power:
            return n
    return None


# ---------------------------------------------------------------- the sequential rule

def sequential_lines(p10: float, p01: float, horizon: int | None, alpha: float = 0.05,
                     power: float = 0.8) -> list[str]:
    """The pairs `spabench compare` is expected to run where the fixed-count test needs `horizon`:
    the hybrid with max_pairs=horizon, and with the smallest max_pairs (tried in steps of 5% of the
    horizon, up to twice it) whose simulated power reaches `power` (simulated: `expected_pairs`)."""
    if p10 == p01:
        return ["sequential rule: no difference assumed, so nothing to detect"]
    if horizon is None:
        return ["sequential rule: not simulated (the fixed-count test needs more than 5000 pairs)"]
    if not 0 < alpha < 0.5:
        return [f"sequential rule: not simulated (alpha {alpha:g}; `compare` takes alpha in (0, 0.5))"]
    at_n = _expected(p10, p01, horizon, alpha)
    lines = [f"sequential rule, `compare max_pairs={horizon}` (the hybrid): expected {at_n.mean:.0f} pairs (median "
             f"{at_n.median:g}, 90% within {at_n.p90:g}), power {100 * at_n.right:.1f}%"]
    if at_n.right < power and horizon <= SEARCH_LIMIT:
        step = max(1, round(0.05 * horizon))
        for longer in range(horizon + step, 2 * horizon + 1, step):
            e = _expected(p10, p01, longer, alpha)
            if e.right >= power:
                lines.append(f"sequential rule at power {power:g}: `compare max_pairs={longer}`: expected {e.mean:.0f} "
                             f"pairs (median {e.median:g}, 90% within {e.p90:g}), power {100 * e.right:.1f}%")
                break
    lines.append(f"  (simulated: {SEQUENTIAL_PATHS:,} comparisons each, seed {SEQUENTIAL_SEED}, with the code "
                 "benchmarks/sequential.py runs; power +-2 points)")
    return lines


@dataclass(frozen=True)
class Pace:
    """A pilot campaign's pace at the bench: seconds from one attempt's start to the next on the same
    bench (median: rollout, scoring and reset; breaks do not move it), attempts per valid trial
    (invalid attempts are re-run) and how many attempts it was measured on."""

    seconds_per_attempt: float
    attempts_per_trial: float
    attempts: int
    rollout_only: bool    # fewer than two attempts on a bench: the rollout's own length, no reset


def campaign_pace(campaign_dir: Path, url: str | None = None) -> Pace | None:
    """The pace of a campaign's finished, counted attempts (None when none has both times)."""
    from datetime import datetime

    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        attempts = [a for a in ledger.attempts() if a.status in ("complete", "invalid") and not a.dry_run
                    and a.started_at and a.ended_at]
    if not attempts:
        return None
    when = lambda text: datetime.fromisoformat(str(text)).timestamp()  # noqa: E731
    gaps: list[float] = []
    by_bench: dict[str, list] = {}
    for a in attempts:
        by_bench.setdefault(a.bench_id or "", []).append(a)
    for mine in by_bench.values():
        starts = sorted(when(a.started_at) for a in mine)
        gaps += [later - earlier for earlier, later in zip(starts, starts[1:], strict=False) if later > earlier]
    rollout_only = not gaps
    seconds = float(np.median(gaps)) if gaps else float(np.median([when(a.ended_at) - when(a.started_at)
                                                                    for a in attempts]))
    valid = len({a.trial_id for a in attempts if a.status == "complete"})
    return Pace(seconds, len(attempts) / valid if valid else math.inf, len(attempts), rollout_only)


def full_campaign_trials(policies: int) -> int:
    """The protocol's trials for `policies` policies (vocabulary.CONDITION_COUNTS: 900 per policy)."""
    from spabench.suite.vocabulary import CONDITION_COUNTS

    return policies * sum(sum(counts.values()) for counts in CONDITION_COUNTS.values())


def bench_hours(trials: int, pace: Pace | None) -> float | None:
    """Hours at the bench for `trials` valid trials at the pilot's pace (None: no pace)."""
    if pace is None or not math.isfinite(pace.attempts_per_trial):
        return None
    return trials * pace.attempts_per_trial * pace.seconds_per_attempt / 3600


def pace_line(pace: Pace | None) -> str:
    """How the bench times were found, or why there are none."""
    if pace is None:
        return ("pilot: bench time unknown: an outcomes CSV holds no attempt times (give the pilot as "
                "campaign=DIR)")
    if not math.isfinite(pace.attempts_per_trial):
        return "pilot: bench time unknown: the pilot has no valid attempt"
    how = ("the rollouts' own length, no reset measured: a lower bound" if pace.rollout_only
           else "the median from one attempt's start to the next on a bench: rollout, scoring and reset")
    return (f"pilot: bench time at the pilot's pace: {pace.seconds_per_attempt:.0f} s per attempt ({how}), "
            f"{pace.attempts_per_trial:.2f} attempts per valid trial (invalid ones re-run), over {pace.attempts} "
            "attempts")


def _hours(trials: int, pace: Pace | None) -> str:
    hours = bench_hours(trials, pace)
    return "" if hours is None else f", about {hours:,.1f} h at the bench"


def planning_rate(low: float, high: float) -> float:
    """The rate in a pilot's interval [low, high] that needs the most trials: the one nearest 0.5."""
    return min(max(0.5, low), high)


# ---------------------------------------------------------------- the command

def _pilot(config: PowerConfig):
    from spabench.analysis.commands import load_campaign
    from spabench.analysis.outcomes import load_outcomes

    if config.outcomes is not None:
        return load_outcomes(config.outcomes)
    if config.campaign_dir is None:
        raise ConfigError("power's pilot needs outcomes=FILE or campaign=FOLDER")
    return load_campaign(config.campaign_dir, url=config.ledger_url)[0]


def run_power(config: PowerConfig, out: TextIO | None = None) -> int:
    """Print the answers for `config` (nothing is written to disk)."""
    out = out or sys.stdout
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    if config.half_width is not None and config.outcomes is None and config.campaign_dir is None:
        h, p = config.half_width, config.rate
        print(f"trials per cell for a {100 * (1 - config.alpha):.0f}% interval of +-{100 * h:.1f} pp at "
              f"rate {pct(p)}:", file=out)
        print(f"  Wilson: {wilson_trials(p, h, config.alpha)} trials (Wilson half-width at that n: "
              f"{100 * wilson_half_width(p, wilson_trials(p, h, config.alpha), config.alpha):.2f} pp)", file=out)
        print(f"  normal approximation (textbook z^2 p(1-p)/h^2): {wald_trials(p, h, config.alpha)} trials",
              file=out)
    if config.rates is not None:
        first, second = config.rates
        p10, p01 = discordant_shares(first, second, config.discordance)
        exact = exact_pairs(first, second, config.discordance, config.alpha, config.power)
        print(f"matched pairs to detect {pct(first)} vs {pct(second)} (discordant pairs {pct(p10 + p01)}: "
              f"{pct(p10)} first only, {pct(p01)} second only) with the exact McNemar test, "
              f"alpha {config.alpha}, power {config.power}:", file=out)
        print(f"  Connor (1987) normal approximation: {connor_pairs(first, second, config.discordance, config.alpha, config.power)} pairs",
              file=out)
        print(f"  exact power: {exact if exact is not None else '> 5000'} pairs", file=out)
        for line in sequential_lines(p10, p01, exact, config.alpha, config.power):
            print(f"  {line}", file=out)
    if config.outcomes is not None or config.campaign_dir is not None:
        pace = campaign_pace(config.campaign_dir, config.ledger_url) if config.campaign_dir is not None else None
        _pilot_report(config, _pilot(config), out, pace)
    return 0


def _pilot_report(config: PowerConfig, outcomes, out: TextIO, pace: Pace | None = None) -> None:
    """The pilot's cells and paired contrasts at their observed rates, the full campaign's trials and
    bench time, and a warning for every cell too small to plan on. Why so long: one table each."""
    from spabench.analysis.contrasts import PAIRED_CONTRASTS
    from spabench.analysis.matching import matched_pairs, valid_rollouts
    from spabench.analysis.rates import success_table

    summary = success_table(outcomes, config.alpha)
    summary = summary[~summary["task"].isin(["all", "non_relational"])]
    policies = list(dict.fromkeys(outcomes["policy"]))
    thin = summary[(summary["trials"] < MIN_PILOT) | (summary["successes"] < MIN_PILOT)
                   | (summary["trials"] - summary["successes"] < MIN_PILOT)]
    if config.half_width is not None:
        h = config.half_width
        print(f"pilot: trials per cell for +-{100 * h:.1f} pp at each cell's observed rate, and at the rate of its "
              f"pilot interval nearest 0.5 (plan on that where the pilot is thin)", file=out)
        print(f"  {'policy':<16} {'task':<24} {'condition':<20} {'k/n':>8} {'now +-pp':>9} {'needed':>7} "
              f"{'at bound':>9}", file=out)
        observed_total = bound_total = 0
        for r in summary.itertuples():
            now = 100 * wilson_half_width(r.rate, r.trials, config.alpha)
            needed = wilson_trials(r.rate, h, config.alpha)
            bound = wilson_trials(planning_rate(r.wilson_low, r.wilson_high), h, config.alpha)
            observed_total, bound_total = observed_total + needed, bound_total + bound
            mark = " !" if r.Index in thin.index else ""
            print(f"  {r.policy:<16} {r.task:<24} {r.condition:<20} {f'{r.successes}/{r.trials}':>8} "
                  f"{now:>9.1f} {needed:>7} {bound:>9}{mark}", file=out)
        print(f"pilot: these {len(summary)} cells at their needed trials: {observed_total:,} trials at the observed "
              f"rates{_hours(observed_total, pace)}; {bound_total:,} at the interval bounds"
              f"{_hours(bound_total, pace)}", file=out)
    full = full_campaign_trials(len(policies))
    print(f"pilot: a full campaign (the protocol's {full_campaign_trials(1)} trials per policy) for its "
          f"{len(policies)} polic{'y' if len(policies) == 1 else 'ies'}: {full:,} trials{_hours(full, pace)}",
          file=out)
    print(pace_line(pace), file=out)
    valid = valid_rollouts(outcomes)
    print(f"pilot: matched pairs for each paired contrast at its observed rates and discordance "
          f"(exact McNemar, alpha {config.alpha}, power {config.power}; sequential: the pairs `spabench compare` "
          f"is expected to run with max_pairs = that n)", file=out)
    few_pairs = []
    for name, (first, second) in PAIRED_CONTRASTS.items():
        pairs = matched_pairs(valid, first, second)
        for policy, mine in pairs.groupby("policy", sort=False):
            a, b = mine["first"].to_numpy(), mine["second"].to_numpy()
            p1, p2, psi = a.mean(), b.mean(), float(np.mean(a != b))
            if len(a) < MIN_PILOT:
                few_pairs.append(f"{policy} {name} ({len(a)} pairs)")
            if p1 == p2:
                answer = "no difference observed"
            else:
                exact = exact_pairs(p1, p2, psi, config.alpha, config.power)
                answer = f"{exact if exact is not None else '> 5000'} pairs (Connor {connor_pairs(p1, p2, psi, config.alpha, config.power)})"
                if exact is not None and 0 < config.alpha < 0.5:
                    p10, p01 = discordant_shares(p1, p2, psi)
                    e = _expected(p10, p01, exact, config.alpha)
                    answer += f"; sequential: expected {e.mean:.0f} (median {e.median:g}, power {100 * e.right:.0f}%)"
            print(f"  {policy:<16} {name:<34} {len(a):>4} pairs now, {100 * p1:.1f}% vs {100 * p2:.1f}%, "
                  f"discordant {100 * psi:.1f}%: {answer}", file=out)
    for line in thin_warnings(thin, few_pairs, table=config.half_width is not None):
        print(line, file=out)


def _expected(p10: float, p01: float, horizon: int, alpha: float):
    from spabench.analysis.sequential import expected_pairs

    return expected_pairs(p10, p01, horizon, alpha, hybrid=True, paths=SEQUENTIAL_PATHS, seed=SEQUENTIAL_SEED)


def thin_warnings(thin, few_pairs: list[str], table: bool = False) -> list[str]:
    """One warning for the cells (and paired contrasts) a pilot is too small to plan on."""
    lines = []
    if len(thin):
        shown = ", ".join(f"{r.policy} {r.task} {r.condition} {r.successes}/{r.trials}"
                          for r in thin.head(8).itertuples())
        more = f" and {len(thin) - 8} more" if len(thin) > 8 else ""
        lines.append(f"warning: {len(thin)} pilot cell(s) with fewer than {MIN_PILOT} trials, successes or "
                     f"failures ({shown}{more}{'; marked !' if table else ''}): a rate observed on so few is no "
                     "ground to plan on (0/20 would say 16 trials suffice for +-10 pp); "
                     + ("plan on the 'at bound' column or run a larger pilot" if table else "run a larger pilot"))
    if few_pairs:
        lines.append(f"warning: {len(few_pairs)} paired contrast(s) with fewer than {MIN_PILOT} pairs in the pilot "
                     f"({', '.join(few_pairs[:8])}{' ...' if len(few_pairs) > 8 else ''}): their pairs needed rest on "
                     "too few to plan on")
    return lines


def power(cfg: PowerCommandConfig) -> int:
    """The thin adapter from the typed root config (top-level keys) to `PowerConfig`."""
    rates = None
    if cfg.rates is not None:
        if not all(isinstance(r, int | float) and not isinstance(r, bool) for r in cfg.rates):
            raise ConfigError(f"rates={cfg.rates!r} must be two numbers, e.g. rates=[0.3,0.6]")
        rates = tuple(float(r) for r in cfg.rates)
    config = PowerConfig(
        half_width=cfg.half_width, rate=cfg.rate, rates=rates, discordance=cfg.discordance,
        alpha=cfg.alpha, power=cfg.power, outcomes=cfg.outcomes,
        campaign_dir=campaign_folder(cfg.campaign_dir, "power") if cfg.campaign_dir is not None else None,
        ledger_url=cfg.ledger_url,
    )
    return run_power(config)
