"""`spabench compare`: is policy b better than a? The sequential test of `analysis.sequential` on the
matched pairs of an outcomes CSV or a campaign, with the running evidence as a CSV and a figure.

The statistics live in `spabench.analysis.sequential`; this module reads the input, pairs it, says
what the test decided (one line per look with `verbose`) and writes the evidence. The last line it
prints is always `decision: <policy>|none after <N> pairs`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

from spabench.config import CampaignInput, FigureKeys, LedgerKeys, opt
from spabench.errors import ConfigError, DataError
from spabench.paths import campaign_folder

if TYPE_CHECKING:   # pandas loads when a comparison runs, not when the CLI lists its commands
    import pandas as pd

    from spabench.analysis.figures import FigureSettings
    from spabench.analysis.sequential import SequentialResult

EVIDENCE_CSV = "evidence.csv"
EVIDENCE_FIGURE = "evidence"
SUMMARY_MD = "compare.md"


@dataclass
class CompareConfig(CampaignInput, FigureKeys, LedgerKeys):
    """`spabench compare`."""

    command: ClassVar[str] = "compare"

    out: Path | None = opt(None, "a folder for the evidence figure and its table (null: print the decision only)")
    outcomes: Path | None = opt(None, 'an outcomes CSV to report on (instead of campaign=DIR)')
    unpaired: str | None = opt(None, "a direct/paraphrase row without its partner: error (the default for a CSV) | exclude (the default for a campaign, whose partner trials may still be pending); at `compare`, a rollout of a or b without the other's on its evaluation", choices=('error', 'exclude'))
    alpha: float = opt(0.05, 'two-sided test level; at `compare` the chance of a false decision over all looks, in (0, 0.5)')
    a: str | None = opt(None, 'the first policy of the comparison (as the outcomes name it)')
    b: str | None = opt(None, 'the second policy of the comparison')
    max_pairs: int | None = opt(None, 'the most pairs the comparison will run: the hybrid test, with a final exact McNemar test at max_pairs (null: the purely sequential test)', lo=1)
    verbose: bool = opt(False, 'print one line per look (pair) as well as the decision (also --verbose)')


def check_request(cfg: CompareConfig) -> None:
    """Everything the command line alone can get wrong, before any input is read."""
    if (cfg.outcomes is None) == (cfg.campaign_dir is None):
        raise ConfigError("compare needs exactly one input: outcomes=FILE.csv or campaign=DIR "
                          f"(got outcomes={cfg.outcomes}, campaign={cfg.campaign_dir})")
    missing = [name for name in ("a", "b") if not getattr(cfg, name)]
    if missing:
        raise ConfigError(f"compare needs {' and '.join(f'{m}=POLICY' for m in missing)}: the two policies to "
                          "compare, as the outcomes name them (e.g. a=pi05 b=vla0)")
    if not 0 < cfg.alpha < 0.5:
        raise ConfigError(f"alpha={cfg.alpha!r} must be in (0, 0.5): the chance of a false decision over all "
                          "looks (0.05 is usual)")


def recorded_order(outcomes: pd.DataFrame, campaign_dir: Path, url: str | None = None) -> pd.DataFrame:
    """A campaign's outcomes in the order their attempts ended (see `order_by_end`)."""
    from spabench.ledger import Ledger

    if "attempt_id" not in outcomes.columns or outcomes.empty:
        return outcomes
    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        ended = {a.attempt_id: a.ended_at or "" for a in ledger.attempts()}
    return order_by_end(outcomes, ended)


def order_by_end(outcomes: pd.DataFrame, ended: dict[str, str]) -> pd.DataFrame:
    """Outcomes in the order their attempts ended (`ended`: attempt id -> ISO time). The ledger's
    view is in plan order; re-run and multi-bench attempts end later than planned. `row` becomes the
    place in that order (ties keep plan order)."""
    if "attempt_id" not in outcomes.columns or outcomes.empty:
        return outcomes
    attrs = dict(outcomes.attrs)
    order = outcomes["attempt_id"].map(lambda attempt: ended.get(attempt, "")).rename("_ended")
    frame = outcomes.assign(_ended=order).sort_values(["_ended", "row"], kind="stable").drop(columns="_ended")
    frame = frame.reset_index(drop=True)
    frame["row"] = range(2, len(frame) + 2)
    frame.attrs.update(attrs)
    return frame


def ledger_comparison(ledger, a: str, b: str, alpha: float, max_pairs: int | None) -> SequentialResult | None:
    """The sequential test on an open ledger's pairs of a and b so far, in the order their attempts
    ended (dry runs and invalid attempts are no evidence); None while they share no valid pair."""
    from spabench.analysis.outcomes import outcomes_from_frame
    from spabench.analysis.sequential import paired_outcomes, sequential_decision

    frame = ledger.outcomes()
    frame = frame[~frame["dry_run"]].reset_index(drop=True)
    if frame.empty:
        return None
    outcomes = outcomes_from_frame(frame, source=f"{ledger.path} (outcomes view)", unpaired="exclude")
    outcomes = order_by_end(outcomes, {x.attempt_id: x.ended_at or "" for x in ledger.attempts()})
    try:
        pairs = paired_outcomes(outcomes, a, b, unpaired="exclude")
    except DataError:   # no valid rollout of a or b yet, or no evaluation both ran yet
        return None
    return sequential_decision(pairs["a"], pairs["b"], alpha=alpha, max_pairs=max_pairs)


def comparison_over(result: SequentialResult | None) -> bool:
    """Decided, or max_pairs pairs ran (the hybrid's final test found no difference): run no more pairs."""
    if result is None:
        return False
    return result.decision is not None or (result.max_pairs is not None and result.pairs_used >= result.max_pairs)


def load_pairs(cfg: CompareConfig, say: Callable[[str], None]) -> pd.DataFrame:
    """a's and b's valid rollouts paired by evaluation, in recorded order (see `paired_outcomes`)."""
    from spabench.analysis.commands import load_campaign, one_bench_kind
    from spabench.analysis.outcomes import load_outcomes
    from spabench.analysis.sequential import paired_outcomes

    if cfg.outcomes is not None:
        unpaired = cfg.unpaired or "error"
        outcomes = load_outcomes(cfg.outcomes, unpaired=unpaired)
    else:
        # a live campaign: b's rollout of an evaluation may still be pending when a's is in
        unpaired = cfg.unpaired or "exclude"
        folder = campaign_folder(cfg.campaign_dir, "compare")
        outcomes = recorded_order(load_campaign(folder, unpaired, say=say, url=cfg.ledger_url)[0], folder,
                                  cfg.ledger_url)
    outcomes = one_bench_kind(outcomes, cfg.bench_kind, say=lambda line: say(line.replace("report:", "compare:")))
    pairs = paired_outcomes(outcomes, str(cfg.a), str(cfg.b), unpaired=unpaired)
    left_out = pairs.attrs.get("unpaired_rows") or []
    if left_out:
        say(f"compare: {len(left_out)} rollout(s) of {pairs.attrs['a']} or {pairs.attrs['b']} without the other's "
            "on their evaluation left out (not evidence)")
    return pairs


def look_line(row, pair: pd.Series, threshold: float, decided_here: bool, winner: str | None) -> str:
    """One look: the pair, the discordant counts so far and the e-value against its threshold."""
    from spabench.analysis.sequential import LAB

    where = "/".join(str(pair[k]) for k in ([LAB] if LAB in pair.index else []) + ["task", "condition",
                                                                                  "evaluation_id"])
    verdict = f"decided: {winner}" if decided_here else "keep going"
    return (f"look {int(row.n)}: {where}: a {int(row.a)}, b {int(row.b)}; discordant {int(row.discordant)} "
            f"(b won {int(row.b_wins)}, a won {int(row.a_wins)}); e-value {_number(row.e_value)} of "
            f"{_number(threshold)}: {verdict}")


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "inf"


def compare(cfg: CompareConfig, out: TextIO | None = None) -> int:
    """Pair, decide, print (the final line: the decision) and, with out=, write the evidence."""
    from spabench.analysis.sequential import sequential_decision

    stream = out or sys.stdout
    say = lambda line: print(line, file=stream)  # noqa: E731
    from spabench.analysis.figures import FigureSettings

    settings = FigureSettings.from_mapping(cfg.figures)
    check_request(cfg)
    if cfg.out is not None:
        settings.check_style()
    pairs = load_pairs(cfg, say)
    names = {"a": pairs.attrs["a"], "b": pairs.attrs["b"]}
    result = sequential_decision(pairs["a"], pairs["b"], alpha=cfg.alpha, max_pairs=cfg.max_pairs)
    path = evidence(pairs, cfg.alpha, cfg.max_pairs)
    threshold = 1.0 / result.split.alpha_seq
    winner = names[result.decision] if result.decision is not None else None
    say(f"compare: a = {names['a']}, b = {names['b']}: {len(pairs)} matched pairs "
        f"(same evaluation), in recorded order")
    say(f"test: {result.test}")
    if cfg.verbose:
        crossed = result.pairs_used if result.stopped_by == "e-process" else None
        for row in path.iloc[: result.pairs_used].itertuples():
            say(look_line(row, pairs.iloc[int(row.n) - 1], threshold, int(row.n) == crossed, winner))
    if result.final_pvalue is not None:
        say(f"final exact McNemar at {result.max_pairs} pairs: b won {result.b_wins}, a won {result.a_wins}, "
            f"p = {result.final_pvalue:.4g} {'<=' if result.stopped_by else '>'} {result.split.alpha_final:.4g}")
    for line in pending_lines(result, len(pairs)):
        say(line)
    if cfg.out is not None:
        written = write_evidence(cfg.out, pairs, path, result, names, settings, cfg)
        say(f"compare: evidence per pair and its figure -> {written}")
    say(decision_line(result, names))
    return 0


def decision_line(result: SequentialResult, names: dict[str, str]) -> str:
    """The last line `compare` prints, always: `decision: <policy>|none after <N> pairs`."""
    decided = names[result.decision] if result.decision is not None else "none"
    return f"decision: {decided} after {result.pairs_used} pairs"


def pending_lines(result: SequentialResult, available: int) -> list[str]:
    """What an undecided comparison means: keep going, or (the hybrid at max_pairs) no difference shown."""
    if result.decision is not None:
        how = "the e-process reached its threshold" if result.stopped_by == "e-process" else "the final test rejected"
        return [f"decided after {result.pairs_used} of {available} pairs ({how}); the remaining pairs are not "
                "evidence"]
    if result.max_pairs is not None and result.pairs_used >= result.max_pairs:
        return [f"not decided at max_pairs={result.max_pairs}: no difference shown at alpha {result.alpha:g}; stop"]
    more = f" (up to max_pairs={result.max_pairs})" if result.max_pairs is not None else ""
    return [f"not decided yet after {result.pairs_used} pairs: keep going{more}"]


def evidence(pairs: pd.DataFrame, alpha: float, max_pairs: int | None) -> pd.DataFrame:
    """The running evidence per pair (`paired_evalue_path`) beside each pair's evaluation and the
    e-process's threshold."""
    from spabench.analysis.sequential import LAB, PAIR_KEY, alpha_split, paired_evalue_path

    path = paired_evalue_path(pairs["a"], pairs["b"], alpha=alpha, max_pairs=max_pairs)
    split = alpha_split(alpha, max_pairs)
    key = [c for c in ([LAB, *PAIR_KEY]) if c in pairs.columns]
    import pandas as pd

    frame = pd.concat([path[["n"]], pairs[key].iloc[: len(path)].reset_index(drop=True),
                       path.drop(columns="n")], axis=1)
    frame["threshold"] = 1.0 / split.alpha_seq
    return frame


def write_evidence(out: Path, pairs: pd.DataFrame, path: pd.DataFrame, result: SequentialResult,
                   names: dict[str, str], settings: FigureSettings, cfg: CompareConfig) -> Path:
    """evidence.csv, the evidence figure and compare.md into `out` (one step: all or nothing)."""
    from spabench.analysis.figures import CAPTIONS_COMPARE, evidence_figure, save
    from spabench.escaping import csv_safe_frame, markdown_text
    from spabench.outputs import replace_output

    source = pairs.attrs.get("source", cfg.outcomes or cfg.campaign_dir)
    with replace_output(out, "compare") as staging:
        csv_safe_frame(path).to_csv(staging / EVIDENCE_CSV, index=False)
        figure = evidence_figure(path, result, names, settings)
        files = save(figure, staging / EVIDENCE_FIGURE, settings.formats, CAPTIONS_COMPARE, settings)
        shown = next(p.name for fmt in ("svg", "png") for p in files if p.suffix == f".{fmt}")
        lines = [
            f"# Sequential comparison: {markdown_text(names['a'])} (a) vs {markdown_text(names['b'])} (b)", "",
            f"- Source: {markdown_text(Path(str(source)).name)}",
            f"- Pairs: {len(pairs)} matched (the same evaluation), in recorded order; invalid attempts are "
            "never evidence",
            f"- Test: {markdown_text(result.test)}",
            f"- Alpha: {result.alpha:g} (a false decision at most this likely over every look)",
            f"- {markdown_text(decision_line(result, names))}"
            + (f" ({result.stopped_by})" if result.stopped_by else ""),
            f"- Discordant pairs up to then: {result.discordant} (b won {result.b_wins}, a won {result.a_wins}); "
            f"e-value {_number(result.e_value)} (threshold {_number(1.0 / result.split.alpha_seq)})",
            *([f"- Final exact McNemar p-value: {result.final_pvalue:.4g} (level {result.split.alpha_final:.4g})"]
              if result.final_pvalue is not None else []),
            "", f"![{CAPTIONS_COMPARE}]({shown})", "", CAPTIONS_COMPARE, "",
            f"`{EVIDENCE_CSV}`: per pair its evaluation, a's and b's outcome (1 = success), the discordant "
            "counts so far, the e-value (log_e its natural log), the threshold and whether the comparison "
            "is decided by then.", "",
        ]
        (staging / SUMMARY_MD).write_text("\n".join(lines), encoding="utf-8")
    return Path(out)



@dataclass(frozen=True)
class CampaignStopping:
    """What a comparison campaign's stopping rule did, for its report: the rule, the test's result on
    the pairs so far, the pairs planned and the trials of a and b the rule left unrun."""

    rule: Any                        # plan.config.StoppingRule
    result: SequentialResult | None
    planned_pairs: int
    unrun: int

    def markdown(self, name: Callable[[str], str]) -> list[str]:
        from spabench.escaping import markdown_text

        a, b = markdown_text(name(self.rule.a)), markdown_text(name(self.rule.b))
        lines = ["## Stopping rule", "",
                 f"This campaign compared {a} (a) and {b} (b) with a stopping rule: `run` stops scheduling their "
                 f"pairs once the sequential test decides{' or max_pairs pairs ran' if self.rule.max_pairs else ''}"
                 " (the same test as `spabench compare`; invalid attempts are re-run and are no evidence).", ""]
        if self.result is None:
            return lines + [f"- Test: alpha {self.rule.alpha:g}; no pair of {a} and {b} yet.", ""]
        r = self.result
        decided = {"a": a, "b": b}.get(r.decision or "", "none")
        status = (f"decided for {decided} by the {r.stopped_by}" if r.decision is not None else
                  "not decided at max_pairs: no difference shown" if comparison_over(r) else
                  "not decided yet: the comparison keeps going")
        return lines + [
            f"- Test: {markdown_text(r.test)}",
            f"- Decision: {status}, after {r.pairs_used} of {self.planned_pairs} planned pairs (discordant "
            f"{r.discordant}: {b} won {r.b_wins}, {a} won {r.a_wins}; e-value {_number(r.e_value)}, threshold "
            f"{_number(1.0 / r.split.alpha_seq)})",
            f"- Trials of {a} and {b} the rule left unrun: {self.unrun} (they appear as never run under "
            "completeness; the rates above are over the trials that ran)", ""]


def campaign_stopping(campaign_dir: Path, url: str | None = None) -> CampaignStopping | None:
    """The stopping rule `plan` recorded for the campaign and what it did (None: no rule)."""
    from spabench.ledger import Ledger
    from spabench.plan.config import StoppingRule
    from spabench.plan.planner import CONFIG_YAML, read_campaign_config

    if not (Path(campaign_dir) / CONFIG_YAML).is_file():
        return None
    recorded = read_campaign_config(campaign_dir)["campaign"].get("stopping")
    if not recorded:
        return None
    rule = StoppingRule(**recorded)
    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        result = ledger_comparison(ledger, rule.a, rule.b, rule.alpha, rule.max_pairs)
        trials = ledger.trials()
        pending = ledger.pending_trials()
    by_policy: dict[str, set[str]] = {rule.a: set(), rule.b: set()}
    for t in trials:
        if t.policy in by_policy:
            by_policy[t.policy].add(t.evaluation_id)
    unrun = sum(1 for t in pending if t.policy in by_policy) if comparison_over(result) else 0
    return CampaignStopping(rule, result, len(by_policy[rule.a] & by_policy[rule.b]), unrun)
