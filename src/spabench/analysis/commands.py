"""`spabench report`: outcomes (CSV or a campaign's ledger) -> tables, figures and report.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from spabench.config import CampaignInput, FigureKeys, LedgerKeys, ReportKeys, opt
from spabench.errors import ConfigError, DataError
from spabench.paths import campaign_folder

if TYPE_CHECKING:  # annotations only: spabench.config builds the groups and sits above every package
    from spabench.analysis.report import Analysis

# pandas, scipy and matplotlib are imported inside the functions: the CLI imports `report` at start-up.


@dataclass
class ReportConfig(CampaignInput, FigureKeys, LedgerKeys, ReportKeys):
    """`spabench report`."""

    command: ClassVar[str] = "report"

    out: Path | None = opt(None, "the report folder")
    outcomes: Path | None = opt(None, 'an outcomes CSV to report on (instead of campaign=DIR)')
    display_names: dict[str, str] = opt({}, "policy -> its name in figures and report.md, e.g. 'display_names.groot_fllm=GR00T-N1.7 F-LLM'")


def load_campaign_outcomes(campaign_dir: Path, unpaired: str = "exclude"):
    """The outcomes view of a campaign's ledger, validated like a CSV (see `load_campaign`)."""
    return load_campaign(campaign_dir, unpaired)[0]


def load_campaign(campaign_dir: Path, unpaired: str = "exclude", say=print, url: str | None = None):
    """(outcomes, plan, ratings) of a campaign: the validated outcomes view, the planned trials per
    cell, and every rater's score of the attempts scored more than once. `url` (ledger=) replaces a
    PostgreSQL pointer's URL, e.g. to connect as the read-only analyst role."""
    from spabench.analysis.agreement import ledger_ratings
    from spabench.analysis.comparisons import ledger_plan
    from spabench.analysis.outcomes import outcomes_from_frame
    from spabench.ledger import Ledger  # lazy: the ledger is only needed for campaign input
    from spabench.ledger.checks import duplicate_lines, split_lines

    if not Ledger.exists(campaign_dir):
        raise ConfigError(f"campaign={campaign_dir} has no ledger.sqlite or ledger.pg.json "
                          "(is it a campaign folder written by `spabench plan`?)")
    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:   # the ledger alone: episodes may be elsewhere
        if ledger.meta().get("kind") == "review":
            raise ConfigError(f"campaign={campaign_dir} is a review campaign (recordings imported without cells=): its "
                              "tasks are the dataset's own words, not Spa-Bench cells, so it has no protocol outcomes "
                              "table. `spabench report campaign=DIR out=OUT` reports it (per-task success, failure "
                              "modes, kappa); for the protocol's tables import it again with cells=FILE.csv")
        duplicates = duplicate_lines(ledger, campaign_dir)
        if duplicates:   # which attempt counts is a rater's decision, never the report's
            raise DataError(ledger.path, f"{len(duplicates)} trial(s) with more than one complete attempt; the "
                            "protocol counts one valid rollout per trial:\n  " + "\n  ".join(duplicates))
        for line in split_lines(ledger):
            say(f"report: warning: {line}")
        frame = ledger.outcomes()
        dry = frame[frame["dry_run"]].reset_index(drop=True)   # listed by themselves, never validated as counted
        frame = frame[~frame["dry_run"]].reset_index(drop=True)
        outcomes = outcomes_from_frame(frame, source=f"{ledger.path} (outcomes view)", unpaired=unpaired)
        outcomes.attrs["dry_runs"] = dry.to_dict("records")   # records: pandas compares attrs when it combines
        return outcomes, ledger_plan(ledger), ledger_ratings(ledger, frame)


def campaign_limit_changes(campaign_dir: Path, url: str | None = None) -> list[dict]:
    """The safety-limit changes `run` recorded (ledger events 'safety_limits_changed'), oldest first."""
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        return [{"at": e["t"], "changed": e["payload"].get("changed", {})}
                for e in ledger.events(kind="safety_limits_changed")]


def policy_cards(outcomes, plan, folders: list[Path]) -> dict:
    """policy -> its PolicyCard, for the protocol-differences section: the card each policy was
    planned with (a campaign), else a card named like the policy (a CSV); none when there is none."""
    from spabench.policy.card import load_card

    names = {}
    if plan is not None and "card" in plan.columns:
        names = dict(plan.drop_duplicates("policy")[["policy", "card"]].itertuples(index=False, name=None))
    cards = {}
    for policy in dict.fromkeys(outcomes["policy"]):
        try:
            cards[policy] = load_card(names.get(policy, policy), folders)
        except ConfigError:
            continue  # no such card here: the report says the settings are unknown
    return cards


def _display_names(names: dict, policies: list[str]) -> dict[str, str]:
    """`display_names.<policy>=<name>`: how figures and report.md name each policy; a name for a policy
    the report does not hold (a typo) is refused, naming the policies it does."""
    for policy, name in names.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"display_names.{policy}={name!r} must be non-empty text")
        if str(policy) not in policies:
            raise ConfigError(f"display_names.{policy}: no policy '{policy}' in these outcomes (policies: "
                              f"{', '.join(policies)})")
    return {str(k): v for k, v in names.items()}


BENCH_WORDS = {"so101": "SO-101 robot", "sim": "MuJoCo twin"}


def one_bench_kind(outcomes, bench_kind: str | None, say=print):
    """The rollouts of one bench kind: twin and robot rollouts are never pooled.

    Dry-run rollouts (`run dry_run=true`, on any bench) count nowhere: they are moved to
    `outcomes.attrs["dry_runs"]` (the report lists them by themselves) and said so. Outcomes without a
    bench_kind column (another lab's CSV) are taken as they are."""
    dry_rows = outcomes.attrs.get("dry_runs")
    if "dry_run" in outcomes.columns:
        dry = outcomes["dry_run"].astype(str).str.strip().str.lower().isin(("true", "1", "yes"))
        if dry.any():
            dry_rows = outcomes[dry].to_dict("records")
            outcomes = outcomes[~dry].reset_index(drop=True)
    if dry_rows is not None and len(dry_rows):
        say(f"report: {len(dry_rows)} dry-run rollout(s) (dry_run=true) not counted; listed under 'Dry runs' "
            "in report.md and in dry_runs.csv")
    outcomes.attrs["dry_runs"] = dry_rows
    if "bench_kind" not in outcomes.columns:
        if bench_kind is not None:
            raise ConfigError(f"bench_kind={bench_kind}: these outcomes have no bench_kind column")
        return outcomes
    kinds = outcomes["bench_kind"].astype(str).str.strip()
    present = sorted(k for k in kinds.unique() if k)
    if bench_kind is not None:
        if bench_kind not in present:
            raise ConfigError(f"bench_kind={bench_kind}: no rollouts of that kind (present: "
                              f"{', '.join(present) or 'none recorded'})")
        outcomes = outcomes[kinds == bench_kind].reset_index(drop=True)
        outcomes.attrs["dry_runs"] = dry_rows
    elif len(present) > 1:
        counts = ", ".join(f"{(kinds == k).sum()} on the {BENCH_WORDS.get(k, k)} ({k})" for k in present)
        raise ConfigError(f"these outcomes hold rollouts from more than one bench kind ({counts}); twin and "
                          "robot rollouts are never pooled. Report one kind at a time: "
                          + " or ".join(f"bench_kind={k}" for k in present))
    kind = bench_kind or (present[0] if present else None)
    if kind is not None:
        say(f"report: {BENCH_WORDS.get(kind, kind)} rollouts only (bench_kind {kind})")
    return outcomes


def report(cfg: ReportConfig) -> int:
    """Validate the outcomes completely, then write summary/contrasts/failure/invalid CSVs, figures
    and report.md into `out` in one step. Keys: outcomes | campaign, out, bootstrap_seed, bootstrap,
    figures.width, figures.style, figures.formats."""
    import pandas as pd

    from spabench.analysis.figures import FigureSettings
    from spabench.analysis.outcomes import load_outcomes
    from spabench.analysis.report import analyse_and_write

    settings = FigureSettings.from_mapping(cfg.figures)
    settings.check_style()   # a lab's style sheet is read before anything is computed or written
    if (cfg.outcomes is None) == (cfg.campaign_dir is None):
        raise ConfigError("report needs exactly one input: outcomes=FILE.csv or campaign=DIR "
                          f"(got outcomes={cfg.outcomes}, campaign={cfg.campaign_dir})")
    if cfg.out is None:
        raise ConfigError("report needs out=DIR (the report directory to write)")
    plan = ratings = None
    if cfg.campaign_dir is not None:
        from spabench.analysis.review_report import is_review, write_review_report

        folder = campaign_folder(cfg.campaign_dir, "report")
        if is_review(folder, cfg.ledger_url):   # imported without cells=: not a Spa-Bench grid
            written_md, scored = write_review_report(folder, cfg.out, cfg.ledger_url)
            print(f"report: review campaign (recordings imported without cells=): {scored} scored episode(s), "
                  f"per-task success and failure modes -> {written_md.parent}")
            return 0
    if cfg.outcomes is not None:
        outcomes = load_outcomes(cfg.outcomes, unpaired=cfg.unpaired or "error")
    else:
        outcomes, plan, ratings = load_campaign(campaign_folder(cfg.campaign_dir, "report"),
                                                cfg.unpaired or "exclude", url=cfg.ledger_url)
    source = outcomes.attrs.get("source", cfg.outcomes or cfg.campaign_dir)
    left_out = outcomes.attrs.get("unpaired_rows") or []
    if left_out:
        shown_rows = ", ".join(map(str, left_out[:20])) + (" ..." if len(left_out) > 20 else "")
        print(f"report: {len(left_out)} unpaired direct/paraphrase row(s) left out (no partner row on the "
              f"same matched OOD scene): rows {shown_rows}")
    outcomes = one_bench_kind(outcomes, cfg.bench_kind)
    if outcomes.empty:
        raise DataError(source, "no rollouts: the outcomes table has a header but no data rows")
    names = _display_names(cfg.display_names, [str(p) for p in dict.fromkeys(outcomes["policy"])])
    dry_runs = outcomes.attrs.get("dry_runs")

    def campaign_extras(analysis: Analysis) -> None:
        analysis.dry_runs = pd.DataFrame.from_records(dry_runs) if dry_runs else None
        if cfg.campaign_dir is not None:
            from spabench.analysis.alignment import campaign_below_threshold
            from spabench.analysis.cameras import campaign_cameras
            from spabench.analysis.health import campaign_health
            from spabench.analysis.servers import campaign_server_provenance

            analysis.servers = campaign_server_provenance(cfg.campaign_dir)
            analysis.health = campaign_health(campaign_folder(cfg.campaign_dir, "report"), url=cfg.ledger_url)
            analysis.cameras = campaign_cameras(campaign_folder(cfg.campaign_dir, "report"), url=cfg.ledger_url)
            analysis.below_threshold = campaign_below_threshold(campaign_folder(cfg.campaign_dir, "report"),
                                                                url=cfg.ledger_url)
            analysis.limit_changes = campaign_limit_changes(campaign_folder(cfg.campaign_dir, "report"),
                                                            cfg.ledger_url)
            from spabench.analysis.bench_checks import campaign_bench_checks
            from spabench.analysis.compare import campaign_stopping

            analysis.bench_checks = campaign_bench_checks(campaign_folder(cfg.campaign_dir, "report"), cfg.ledger_url)
            analysis.stopping = campaign_stopping(campaign_folder(cfg.campaign_dir, "report"), cfg.ledger_url)

    analysis, written = analyse_and_write(
        outcomes, cfg.out, figure_settings=settings, complete=campaign_extras, n_resamples=cfg.bootstrap,
        seed=cfg.bootstrap_seed, names=names, plan=plan, ratings=ratings,
        gathered=lambda: {"cards": policy_cards(outcomes, plan, cfg.group_dirs("policy"))})
    print(f"report: {len(outcomes)} rollouts, {len(analysis.policies)} policies -> {written[0].parent}")
    return 0
