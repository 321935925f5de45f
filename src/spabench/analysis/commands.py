"""`spabench report`: outcomes (CSV or a campaign's ledger) -> tables, figures and report.md."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from spabench.analysis.outcomes import load_outcomes, outcomes_from_frame
from spabench.analysis.report import analyse, write_report
from spabench.errors import ConfigError, DataError

from spabench.analysis.contrasts import DEFAULT_RESAMPLES, PUBLISHED_SEED

DEFAULT_SEED = PUBLISHED_SEED          # the published analysis's seed (20260906)
DEFAULT_BOOTSTRAP = DEFAULT_RESAMPLES  # the published analysis's 100,000 resamples


def _get(cfg: DictConfig, key: str, default=None):
    value = OmegaConf.select(cfg, key, default=default)
    return default if value is None else value


def _integer(cfg: DictConfig, key: str, default: int, minimum: int) -> int:
    value = _get(cfg, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}={value!r} must be an integer >= {minimum}")
    return value


def _display_names(cfg: DictConfig) -> dict[str, str]:
    """`display_names.<policy>=<name>`: how figures and report.md name each policy."""
    value = _get(cfg, "display_names", {})
    if not isinstance(value, DictConfig | dict):
        raise ConfigError(f"display_names={value!r} must be a mapping policy -> display name, "
                          "e.g. display_names.pi05=pi0.5")
    names = OmegaConf.to_container(value) if isinstance(value, DictConfig) else dict(value)
    for policy, name in names.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"display_names.{policy}={name!r} must be non-empty text")
    return {str(k): v for k, v in names.items()}


def load_campaign_outcomes(campaign_dir: Path, unpaired: str = "exclude"):
    """The outcomes view of a campaign's ledger, validated like a CSV (see `load_campaign`)."""
    return load_campaign(campaign_dir, unpaired)[0]


def load_campaign(campaign_dir: Path, unpaired: str = "exclude"):
    """(outcomes, plan, ratings) of a campaign: the validated outcomes view, the planned trials per
    cell, and every rater's score of the attempts scored more than once."""
    from spabench.analysis.agreement import ledger_ratings
    from spabench.analysis.comparisons import ledger_plan
    from spabench.ledger import Ledger  # lazy: the ledger is only needed for campaign input

    if not Ledger.exists(campaign_dir):
        raise ConfigError(f"campaign_dir={campaign_dir} has no ledger.sqlite or ledger.pg.json "
                          "(is it a campaign directory?)")
    with Ledger.open(campaign_dir, readonly=True) as ledger:   # the ledger alone: episodes may be elsewhere
        frame = ledger.outcomes()
        outcomes = outcomes_from_frame(frame, source=f"{ledger.path} (outcomes view)", unpaired=unpaired)
        return outcomes, ledger_plan(ledger), ledger_ratings(ledger, frame)


def report(cfg: DictConfig) -> int:
    """Validate the outcomes completely, then write summary/contrasts/failure/invalid CSVs, figures
    and report.md into `out` in one step. Keys: outcomes | campaign_dir, out, bootstrap_seed, bootstrap."""
    outcomes_path = _get(cfg, "outcomes")
    campaign_dir = _get(cfg, "campaign_dir")
    out = _get(cfg, "out")
    if (outcomes_path is None) == (campaign_dir is None):
        raise ConfigError("report needs exactly one input: outcomes=FILE.csv or campaign=DIR "
                          f"(got outcomes={outcomes_path!r}, campaign_dir={campaign_dir!r})")
    if out is None or not str(out).strip():
        raise ConfigError("report needs out=DIR (the report directory to write)")
    seed = _integer(cfg, "bootstrap_seed", DEFAULT_SEED, 0)
    n_resamples = _integer(cfg, "bootstrap", DEFAULT_BOOTSTRAP, 1)

    plan = ratings = None
    unpaired = _get(cfg, "unpaired")
    if unpaired is not None and unpaired not in ("error", "exclude"):
        raise ConfigError(f"unpaired={unpaired!r} (allowed: error, exclude; default error for a CSV, "
                          "exclude for a campaign whose partner trials may still be pending)")
    if outcomes_path is not None:
        outcomes = load_outcomes(Path(outcomes_path), unpaired=unpaired or "error")
    else:
        outcomes, plan, ratings = load_campaign(Path(campaign_dir), unpaired or "exclude")
    left_out = outcomes.attrs.get("unpaired_rows") or []
    if left_out:
        shown_rows = ", ".join(map(str, left_out[:20])) + (" ..." if len(left_out) > 20 else "")
        print(f"report: {len(left_out)} unpaired direct/paraphrase row(s) left out (no partner row on the "
              f"same matched OOD scene): rows {shown_rows}")
    if outcomes.empty:
        raise DataError(outcomes.attrs.get("source", outcomes_path or campaign_dir),
                        "no rollouts: the outcomes table has a header but no data rows")
    analysis = analyse(outcomes, n_resamples=n_resamples, seed=seed, names=_display_names(cfg),
                       plan=plan, ratings=ratings)
    jobs = _get(cfg, "jobs")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ConfigError(f"jobs={jobs!r} must be an integer >= 1 (processes drawing the figures)")
    written = write_report(analysis, Path(out), jobs=jobs)
    print(f"report: {len(outcomes)} rollouts, {len(analysis.policies)} policies -> {written[0].parent}")
    return 0
