"""The report of a review campaign (`import lerobot` without cells=): recordings made elsewhere, scored here.

Such a campaign is not a Spa-Bench grid: its tasks are the dataset's own task texts, it has no
conditions, no matched scenes and no paired contrasts. The report says so and gives what the scores
support: per task (and policy) the success rate with a 95% Wilson interval, the failure modes of the
failures, the raters' agreement (Cohen's kappa) where attempts were scored twice, and how many
episodes are still unscored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from spabench.analysis.agreement import ledger_ratings, rater_agreement
from spabench.analysis.failures import UNANNOTATED, failure_mode_label
from spabench.analysis.rates import wilson_interval

REVIEW_COLUMNS = ("policy", "task", "episodes", "scored", "successes", "rate", "wilson_low", "wilson_high")
REVIEW_FAILURE_COLUMNS = ("policy", "task", "failure_mode", "label", "count")


def review_tables(ledger: Any) -> dict[str, pd.DataFrame]:
    """summary (per policy x task), failure modes, rater agreement, from the ledger's outcomes view."""
    frame = ledger.outcomes()
    frame = frame[frame["valid"]]
    complete = pd.DataFrame([{"policy": t.policy, "task": t.task}
                             for t in ledger.trials()
                             for a in ledger.attempts_for(t.trial_id) if a.status == "complete"],
                            columns=["policy", "task"])
    rows = []
    for (policy, task), group in complete.groupby(["policy", "task"], sort=False):
        scored = frame[(frame["policy"] == policy) & (frame["task"] == task)]
        n, k = len(scored), int(scored["success"].sum())
        low, high = wilson_interval(k, n) if n else (float("nan"), float("nan"))
        rows.append((policy, task, len(group), n, k, k / n if n else float("nan"), low, high))
    summary = pd.DataFrame(rows, columns=list(REVIEW_COLUMNS))
    failed = frame[~frame["success"]].copy()
    failed["failure_mode"] = failed["failure_mode"].fillna("").replace("", UNANNOTATED)
    counts = failed.groupby(["policy", "task", "failure_mode"], sort=False).size().reset_index(name="count")
    counts["label"] = counts["failure_mode"].map(failure_mode_label)
    failures = counts[list(REVIEW_FAILURE_COLUMNS)] if len(counts) else pd.DataFrame(columns=list(REVIEW_FAILURE_COLUMNS))
    agreement = rater_agreement(ledger_ratings(ledger, frame))
    return {"summary": summary, "failures": failures, "agreement": agreement}


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.1f}%"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    clean = [[str(c).replace("|", "/") for c in r] for r in rows]
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in clean)]


def review_markdown(campaign: str, imported: dict, tables: dict[str, pd.DataFrame]) -> str:
    summary, failures, agreement = tables["summary"], tables["failures"], tables["agreement"]
    unscored = int((summary["episodes"] - summary["scored"]).sum()) if len(summary) else 0
    lines = [f"# Review of recordings made elsewhere: {campaign}", "",
             f"Imported from the LeRobotDataset at `{imported.get('dataset', '?')}` "
             f"(repo id {imported.get('repo_id', '?')}, {imported.get('fps', '?')} fps). This is a review "
             "campaign, not a Spa-Bench grid: the tasks are the dataset's own task texts, and there are no "
             "conditions, matched scenes or paired contrasts, so none are reported. Give `import lerobot` a "
             "cells= mapping to place the episodes in Spa-Bench cells for the full protocol report.", "",
             "## Success per task", "",
             "Success rate over the scored episodes with a 95% Wilson score interval (the first rater's score "
             "of each episode).", ""]
    lines += _md_table(["policy", "task", "episodes", "scored", "successes", "rate [95% CI]"],
                       [[r.policy, r.task, r.episodes, r.scored, r.successes,
                         f"{_pct(r.rate)} [{_pct(r.wilson_low)}, {_pct(r.wilson_high)}]"]
                        for r in summary.itertuples()])
    if unscored:
        lines += ["", f"{unscored} episode(s) are not scored yet (`spabench score campaign=DIR`)."]
    lines += ["", "## Failure modes", ""]
    lines += (_md_table(["policy", "task", "failure mode", "count"],
                        [[r.policy, r.task, r.label, r.count] for r in failures.itertuples()])
              if len(failures) else ["No scored failures."])
    lines += ["", "## Rater agreement", ""]
    if len(agreement):
        lines += ["Cohen's kappa between raters over the episodes both scored (95% bootstrap interval).", ""]
        lines += _md_table(["rater a", "rater b", "score", "n", "agreement", "kappa [95% CI]"],
                           [[r.rater_a, r.rater_b, r.score, r.n, _pct(r.observed_agreement),
                             f"{r.kappa:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"] for r in agreement.itertuples()])
    else:
        lines += ["No episode was scored by two raters (`spabench score campaign=DIR second_rater=true`)."]
    return "\n".join(lines) + "\n"


def write_review_report(campaign_dir: Path, out: Path, url: str | None = None) -> tuple[Path, int]:
    """report.md and its CSVs for a review campaign; (report.md, scored episodes)."""
    from spabench.ledger import Ledger
    from spabench.outputs import replace_output

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        meta = ledger.meta()
        tables = review_tables(ledger)
    text = review_markdown(str(meta.get("campaign", campaign_dir)), meta.get("imported") or {}, tables)
    with replace_output(out, "report") as staging:
        tables["summary"].to_csv(staging / "review_summary.csv", index=False)
        tables["failures"].to_csv(staging / "failure_modes.csv", index=False)
        tables["agreement"].to_csv(staging / "rater_agreement.csv", index=False)
        (staging / "report.md").write_text(text, encoding="utf-8")
    return Path(out) / "report.md", int(tables["summary"]["scored"].sum()) if len(tables["summary"]) else 0


def is_review(campaign_dir: Path, url: str | None = None) -> bool:
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        return ledger.meta().get("kind") == "review"
