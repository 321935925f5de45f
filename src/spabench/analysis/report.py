"""The report: every table computed in memory, then written all at once (or not at all).

Outputs go to a temporary sibling of `out` that is renamed into place only when every file is
written, so a failure never leaves a half-written report behind.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from spabench.analysis import figures
from spabench.analysis.agreement import AGREEMENT_COLUMNS, rater_agreement
from spabench.analysis.attempts import estop_table, invalid_attempt_table
from spabench.analysis.bench_checks import bench_check_lines
from spabench.analysis.comparisons import (
    between_policy_table,
    completeness_table,
    contrasts_with_holm,
    protocol_plan,
)
from spabench.analysis.contrasts import DEFAULT_RESAMPLES, PAIRED_CONTRASTS, PUBLISHED_SEED, contrast_table
from spabench.analysis.failures import FAILURE_MODE_ORDER, failure_mode_label, failure_mode_table
from spabench.analysis.html import markdown_to_html
from spabench.analysis.labels import display_names
from spabench.analysis.labs import bench_names, factor_files, factor_lines, names_of
from spabench.analysis.outcomes import invalid_rollouts, policies_in_order
from spabench.analysis.protocol import differences, protocol_settings
from spabench.analysis.ranking import bradley_terry_ranking
from spabench.analysis.rates import (
    ALL_TASKS,
    NON_RELATIONAL,
    NON_RELATIONAL_TASKS,
    TASK_ORDER,
    success_table,
    summary_cells,
)
from spabench.analysis.servers import servers_section
from spabench.escaping import csv_safe_frame, markdown_text, printable
from spabench.outputs import replace_output
from spabench.suite.rules import UNSAFE

OUTPUT_FILES = ("summary.csv", "contrasts.csv", "failure_modes.csv", "invalid.csv", "invalid_by_reason.csv",
                "estops.csv",
                "comparisons.csv", "ranking.csv", "completeness.csv", "agreement.csv", "protocol_settings.csv",
                "report.md", "report.html")

RANKING_RESAMPLES = 1000   # cluster-bootstrap replicates of the ranking (a secondary summary)
HEADLINE_CONDITIONS = ("id", "ood", "ood_matched", "direct", "paraphrase_ood", "paraphrase_direct",
                       "cross_task", "novel_object", "no_intervention", "no_movement", "movement_required")
# (title, context conditions shown only beside the section's own, the section's own conditions)
SECTIONS = (
    ("Spatial grounding: ID, OOD and the matched direct control", (), ("id", "ood", "ood_matched", "direct")),
    ("Paraphrase subset (four conditions on the same scenes)", (),
     ("ood_paraphrase_subset", "paraphrase_ood", "direct_paraphrase_subset", "paraphrase_direct")),
    ("Cross-task objects (descriptive; not paired scenes)", ("id",), ("cross_task", "novel_object")),
    ("No intervention", (), ("no_intervention", "no_movement", "movement_required")),
)
# In the cross-task table the 'all' ID cell is ID on the cross-task tasks only (like for like).
ALL_ROW = {("id", SECTIONS[2][0]): "id_cross_task_subset"}
INVALID_LIST_COLUMNS = ("row", "policy", "task", "condition", "evaluation_id", "matched_group",
                        "instruction_variant")


@dataclass
class Analysis:
    """Everything the report shows, computed from one validated outcomes table."""
    outcomes: pd.DataFrame
    summary: pd.DataFrame
    contrasts: pd.DataFrame
    failures: pd.DataFrame
    invalid: pd.DataFrame
    policies: list[str]
    n_resamples: int
    seed: int
    id_only: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # policy id -> display name
    comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)  # between policies, same scenes
    ranking: pd.DataFrame = field(default_factory=pd.DataFrame)      # Bradley-Terry per component (secondary)
    completeness: pd.DataFrame = field(default_factory=pd.DataFrame)
    plan_source: str = "the protocol's trial counts"
    agreement: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(AGREEMENT_COLUMNS)))
    servers: list = field(default_factory=list)   # analysis.servers.ServerProvenance rows (campaign input)
    invalid_by_reason: pd.DataFrame = field(default_factory=pd.DataFrame)
    estops: pd.DataFrame = field(default_factory=pd.DataFrame)   # e-stopped attempts by policy and cause
    settings: pd.DataFrame = field(default_factory=pd.DataFrame)  # per-policy protocol settings
    health: Any = None   # spabench.analysis.health.CampaignHealth (campaign input only)
    cameras: Any = None  # spabench.analysis.cameras.CameraHealth (campaign input only)
    below_threshold: list | None = None  # analysis.alignment.BelowThreshold rows (campaign input only)
    dry_runs: pd.DataFrame | None = None   # rollouts of `run dry_run=true`: listed, never counted
    limit_changes: list | None = None   # safety-limit changes during the campaign (ledger events)
    bench_checks: list | None = None    # `spabench bench check` records of the campaign (ledger events)
    stopping: Any = None   # analysis.compare.CampaignStopping: a comparison campaign's stopping rule

    def name(self, policy: str) -> str:
        return self.names.get(policy, policy)


def analyse(outcomes: pd.DataFrame, n_resamples: int = DEFAULT_RESAMPLES, seed: int = PUBLISHED_SEED,
            names: dict[str, str] | None = None, plan: pd.DataFrame | None = None,
            ratings: pd.DataFrame | None = None, plan_source: str | None = None,
            cards: dict | None = None, summary: pd.DataFrame | None = None,
            failures: pd.DataFrame | None = None) -> Analysis:
    """Compute every table of the report from a validated outcomes frame.

    `plan`: planned trials per policy x task x condition (a campaign's ledger); without it the
    protocol's counts for the cells each policy took part in. `ratings`: attempt_id, rater,
    success, failure_mode of attempts scored by more than one rater (for rater agreement). `cards`:
    policy -> PolicyCard, for the protocol-differences section. `summary`, `failures`: the success
    and failure tables when the caller computed them already (for the figures).
    """
    valid = outcomes[outcomes["valid"]]
    policies = policies_in_order(valid)  # a policy with invalid attempts only appears in invalid.csv
    conditions = valid.groupby("policy", sort=False)["condition"].unique()   # one pass, not a filter per policy
    id_only = [p for p in policies if set(conditions[p]) == {"id"}]
    return Analysis(
        outcomes=outcomes,
        summary=success_table(outcomes) if summary is None else summary,
        contrasts=contrasts_with_holm(contrast_table(outcomes, n_resamples=n_resamples, seed=seed)),
        failures=failure_mode_table(outcomes) if failures is None else failures,
        invalid=invalid_rollouts(outcomes),
        policies=policies,
        n_resamples=n_resamples,
        seed=seed,
        id_only=id_only,
        names=display_names(policies_in_order(outcomes), names),
        comparisons=between_policy_table(outcomes),
        ranking=bradley_terry_ranking(outcomes, n_resamples=min(n_resamples, RANKING_RESAMPLES), seed=seed),
        completeness=completeness_table(outcomes, protocol_plan(outcomes) if plan is None else plan),
        plan_source=plan_source or ("the campaign's plan" if plan is not None else "the protocol's trial counts"),
        agreement=rater_agreement(ratings if ratings is not None else pd.DataFrame(), seed=seed),
        invalid_by_reason=invalid_attempt_table(outcomes),
        estops=estop_table(outcomes),
        settings=protocol_settings(policies_in_order(outcomes), plan, cards or {}),
    )


# ---------------------------------------------------------------- formatting

def format_rate(rate: float, low: float, high: float) -> str:
    """'73.3% [64.8, 80.4]': a rate and its interval in percent, one decimal."""
    return f"{100 * rate:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"


def format_difference(estimate: float, low: float, high: float) -> str:
    """'+25.0 pp [5.0, 45.0]': a difference of rates in percentage points."""
    return f"{100 * estimate:+.1f} pp [{100 * low:.1f}, {100 * high:.1f}]"


def format_contrast(r) -> str:
    """A contrast's difference and interval; a degenerate bootstrap is flagged, never printed as a
    zero-width interval; bootstrap bounds carry their Monte Carlo error."""
    if getattr(r, "degenerate", False):
        return (f"{100 * r.estimate:+.1f} pp (degenerate bootstrap: all {int(r.n_pairs)} pairs differ "
                f"alike, no interval)")
    text = format_difference(r.estimate, r.ci_low, r.ci_high)
    low_se, high_se = getattr(r, "ci_low_mc_se", math.nan), getattr(r, "ci_high_mc_se", math.nan)
    if getattr(r, "ci_method", "") == "bootstrap_percentile" and not (math.isnan(low_se) or math.isnan(high_se)):
        text += f" (MC error ±{100 * low_se:.2f}/±{100 * high_se:.2f})"
    return text


def format_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(printable(c).replace("|", "\\|") for c in cells) + " |"

    lines = [line(header), "|" + "|".join(["---"] * len(header)) + "|"]
    lines += [line(row) for row in rows]
    return lines + [""]


def _cell(cells: dict, policy: str, task: str, condition: str) -> str:
    row = cells.get((policy, task, condition))
    if row is None:
        return ""
    successes, trials, rate, low, high = row
    return f"{format_rate(rate, low, high)} ({int(successes)}/{int(trials)})"


def _by_policy(table: pd.DataFrame, columns: list[str] | None = None) -> dict[str, list]:
    """The rows of `table` (named tuples, or plain tuples of `columns`) bucketed by policy, in order:
    one pass instead of a filter per policy."""
    rows: dict[str, list] = {}
    if columns is None:
        for r in table.itertuples():
            rows.setdefault(r.policy, []).append(r)
    else:
        for r in zip(*(table[c].to_numpy() for c in ["policy"] + columns), strict=True):
            rows.setdefault(r[0], []).append(r[1:])
    return rows


def _label(condition: str) -> str:
    return figures.CONDITION_LABELS.get(condition, condition)


def _task_label(task: str) -> str:
    return figures.TASK_LABELS.get(task, task).replace("\n", " ")


# ---------------------------------------------------------------- markdown

def score_audit(outcomes: pd.DataFrame) -> str:
    """One line on score corrections and operator-invalidated attempts (empty when there were none)."""
    corrected = (pd.to_numeric(outcomes["corrections"], errors="coerce").fillna(0).astype(int)
                 if "corrections" in outcomes.columns else None)
    reasons = outcomes["invalid_reason"].fillna("").astype(str) if "invalid_reason" in outcomes.columns else None
    n_corr = int(corrected.sum()) if corrected is not None else 0
    n_void = int(reasons.str.startswith("operator_invalidated").sum()) if reasons is not None else 0
    if not n_corr and not n_void:
        return ""
    return (f"Score corrections: {n_corr} on {int((corrected > 0).sum()) if corrected is not None else 0} "
            f"attempt(s) (each outcome is its primary rater's latest score; the history is in the ledger); "
            f"{n_void} complete attempt(s) declared invalid afterwards by an operator.")


def source_label(source: str) -> str:
    """The outcomes' source without its folders (a report is shared; the analyst's paths stay home)."""
    text = str(source)
    view = " (outcomes view)"
    if text.endswith(view):
        return Path(text[: -len(view)]).name + view
    return Path(text).name


def render_markdown(analysis: Analysis, drawn: dict[str, list[Path]] | None = None,
                    figure_policies: list[str] | None = None) -> str:
    """The human-readable report: headline table, per-policy tables, contrasts, failures, notes.
    `figure_policies`: the policies the figures show, when not all (figures.figure_policies)."""
    cells = summary_cells(analysis.summary)
    lines = _intro_lines(analysis) + _headline_lines(analysis, cells) + _id_only_lines(analysis)
    by_policy = PolicyRows(analysis, cells)   # bucketed once: a filter per policy was O(policies x rows)
    for policy in analysis.policies:
        lines += _policy_lines(analysis, policy, cells, by_policy)
    lines += failure_totals_lines(analysis)
    lines += estop_lines(analysis)
    lines += invalid_lines(analysis)
    lines += dry_run_lines(analysis)
    lines += limit_change_lines(analysis)
    if analysis.stopping is not None:
        lines += analysis.stopping.markdown(analysis.name)
    lines += protocol_lines(analysis)
    lines += servers_section(analysis.servers, analysis.name)
    lines += bench_check_lines(analysis.bench_checks)
    lines += beyond_the_paper(analysis)
    lines += factor_lines(analysis.outcomes, analysis.name)
    if analysis.health is not None:
        lines += analysis.health.markdown(analysis.name)
    if analysis.cameras is not None:
        lines += analysis.cameras.markdown(analysis.name)
    if analysis.below_threshold is not None:
        from spabench.analysis.alignment import below_threshold_lines

        lines += below_threshold_lines(analysis.below_threshold, analysis.name)
    if drawn:
        lines += figure_lines(analysis, drawn, figure_policies)
    lines += method_notes(analysis)
    lines += limitation_lines(analysis)
    return "\n".join(lines)


def figure_lines(analysis: Analysis, drawn: dict[str, list[Path]], shown: list[str] | None) -> list[str]:
    """The Figures section: each figure as SVG (or PNG) with its caption and its other formats, and
    which policies the figures leave out when there are more than the style has colours."""
    lines = ["## Figures", "",
             "Success rates with Wilson 95% whiskers; `k/n` above every bar; a 0% bar is drawn as a thin stub.", ""]
    left_out = [p for p in analysis.policies if shown is not None and p not in shown]
    if left_out:
        listed = ", ".join(markdown_text(analysis.name(p)) for p in left_out[:20])
        lines += [f"The figures show the first {len(analysis.policies) - len(left_out)} of "
                  f"{len(analysis.policies)} policies in the report's order, one colour each (the style's "
                  f"colour cycle); the tables above cover all of them. Left out of the figures "
                  f"({len(left_out)}): {listed}{' ...' if len(left_out) > 20 else ''}.", ""]
    for name, paths in drawn.items():
        page = next(p.name for fmt in figures.PAGE_FORMATS for p in paths if p.suffix == "." + fmt)
        others = ", ".join(f"[{p.suffix[1:].upper()}]({p.name})" for p in paths if p.name != page)
        lines += [f"![{name}]({page})", "", figures.CAPTIONS[name] + (f" ({others})" if others else ""), ""]
    return lines


def _intro_lines(analysis: Analysis) -> list[str]:
    """Title, source, row counts, policies, how rates read, the score audit and missing-column notes."""
    outcomes = analysis.outcomes
    n_valid = int(outcomes["valid"].sum())
    lines = [
        "# Spa-Bench report", "",
        f"Source: {markdown_text(source_label(outcomes.attrs.get('source', '?')))}: {len(outcomes)} rows, "
        f"{n_valid} valid, "
        f"{len(outcomes) - n_valid} invalid (excluded from every rate). "
        f"Policies: {', '.join(f'{markdown_text(analysis.name(p))} ({markdown_text(p)})' for p in analysis.policies) or 'none'}.", "",
        "Rates are successes/trials with two-sided Wilson 95% intervals: `rate [low, high] (k/n)`.", "",
    ]
    audit = score_audit(outcomes)
    if audit:
        lines += [audit, ""]
    if not outcomes.attrs.get("has_matched_group", True) and \
            outcomes["condition"].isin(["direct", "paraphrase_ood", "paraphrase_direct"]).any():
        lines += ["**Note:** the outcomes have no `matched_group` column, so matched subsets "
                  "(`ood_matched`, paraphrase subsets) and paired contrasts are not computed.", ""]
    return lines


def _headline_lines(analysis: Analysis, cells) -> list[str]:
    """Success by condition, all tasks pooled: one row per policy."""
    shown = {condition for _, _, condition in cells}
    conditions = [c for c in HEADLINE_CONDITIONS if c in shown]
    rows = []
    for policy in analysis.policies:
        rows.append([markdown_text(analysis.name(policy))] + [
            _cell(cells, policy, NON_RELATIONAL if c == "no_intervention" else ALL_TASKS, c)
            for c in conditions])
    header = ["policy"] + [_label(c) + (" (non-relational)" if c == "no_intervention" else "")
                           for c in conditions]
    return ["## Success by condition (all tasks pooled)", "", *_table(header, rows)]


def _id_only_lines(analysis: Analysis) -> list[str]:
    if not analysis.id_only:
        return []
    lines = ["## ID-only diagnostic baselines", ""]
    for policy in analysis.id_only:
        lines.append(f"- **{markdown_text(analysis.name(policy))}** has ID rollouts only. It is reported as an ID-only "
                     "diagnostic baseline (the protocol's treatment of a policy whose ID success "
                     "is inadequate for OOD evaluation); no OOD, matched or contrast statistic "
                     "exists for it.")
    return [*lines, ""]


class PolicyRows:
    """The rows of the per-policy sections, bucketed by policy in one pass over each table."""

    def __init__(self, analysis: Analysis, cells: dict):
        self.cells: dict[str, set[tuple[str, str]]] = {}
        for p, task, condition in cells:
            self.cells.setdefault(p, set()).add((task, condition))
        self.contrasts = _by_policy(analysis.contrasts)
        pooled_failures = analysis.failures[analysis.failures["task"] == ALL_TASKS]
        self.failures = _by_policy(pooled_failures, ["condition", "failure_mode", "count"])


def _policy_lines(analysis: Analysis, policy: str, cells, by_policy: PolicyRows | None = None) -> list[str]:
    """One policy's section: its tables per condition group, its contrasts, its failure modes."""
    by_policy = by_policy or PolicyRows(analysis, cells)
    lines = [f"## {markdown_text(analysis.name(policy))}", ""]
    mine = by_policy.cells.get(policy, set())
    mine_conditions = {condition for _, condition in mine}
    for title, context, own in SECTIONS:
        if not mine_conditions.intersection(own):
            continue
        used = [c for c in context + own if c in mine_conditions]
        tasks = [t for t in TASK_ORDER if any((t, c) in mine for c in own)]
        lines += [f"### {title}", ""]
        lines += _table(["task"] + [_label(c) for c in used],
                        [[_task_label(t)] + [_cell(cells, policy, t, ALL_ROW.get((c, title), c)
                                                   if t == ALL_TASKS else c) for c in used]
                         for t in tasks])
    contrasts = by_policy.contrasts
    if policy in contrasts:
        lines += ["### Contrasts", ""]
        lines += _table(
            ["contrast", "task", "difference [95% CI]", "n", "p", "p (Holm)"],
            [[r.contrast, _task_label(r.task), format_contrast(r),
              str(int(r.n_pairs)), format_p(r.p_value), format_p(r.p_holm)]
             for r in contrasts[policy]])
    failures = by_policy.failures
    if policy in failures:
        counts: dict[tuple[str, str], int] = {}
        for condition, mode, count in failures[policy]:
            counts[mode, condition] = counts.get((mode, condition), 0) + int(count)
        conds = list(dict.fromkeys(condition for condition, _, _ in failures[policy]))
        modes = [m for m in FAILURE_MODE_ORDER if any(m == mode for _, mode, _ in failures[policy])]
        lines += ["### Failure modes of failed valid rollouts (all tasks)", ""]
        lines += _table(["failure mode"] + [_label(c) for c in conds],
                        [[failure_mode_label(m)] + [str(counts.get((m, c), 0)) for c in conds]
                         for m in modes])
    return lines


def failure_totals_lines(analysis: Analysis) -> list[str]:
    """Failed valid rollouts per task, for every policy side by side and in total."""
    valid = analysis.outcomes[analysis.outcomes["valid"] & analysis.outcomes["success"].notna()]
    if valid.empty:
        return []
    failed = valid["success"].astype(int) == 0
    counts = valid.assign(failed=failed).groupby(["task", "policy"], sort=False)["failed"].agg(["sum", "size"])
    tasks = [t for t in TASK_ORDER if t in counts.index.get_level_values("task")]
    rows = []
    for task in tasks + [ALL_TASKS]:
        cells, total_f, total_n = [], 0, 0
        for policy in analysis.policies:
            if task == ALL_TASKS:
                mine = counts.xs(policy, level="policy") if policy in counts.index.get_level_values("policy") else None
                f, n = (int(mine["sum"].sum()), int(mine["size"].sum())) if mine is not None else (0, 0)
            else:
                f, n = (int(counts.loc[(task, policy), "sum"]), int(counts.loc[(task, policy), "size"])) \
                    if (task, policy) in counts.index else (0, 0)
            cells.append(f"{f}/{n}" if n else "")
            total_f, total_n = total_f + f, total_n + n
        rows.append([_task_label(task) if task != ALL_TASKS else "all tasks"] + cells + [f"{total_f}/{total_n}"])
    return (["## Failures per task across policies", "",
             "Failed valid rollouts / valid rollouts, every condition of the task pooled (failure modes "
             "per policy are in the sections above and in `failure_modes.csv`).", ""]
            + _table(["task"] + [markdown_text(analysis.name(p)) for p in analysis.policies] + ["all policies"], rows))


def estop_lines(analysis: Analysis) -> list[str]:
    """E-stops per policy by the cause the operator gave: unsafe policy behaviour apart (failures)."""
    table = analysis.estops
    if table.empty:
        return []
    unsafe = table[table["cause"] == UNSAFE].groupby("policy", sort=False)["attempts"].sum()
    lines = ["## E-stops by cause", "",
             "At every e-stop the operator says why. One for unsafe policy behaviour ends the attempt as "
             f"the policy's failure (failure mode `{UNSAFE}`: counted in every rate, its trial not run "
             "again, shown apart from the annotated failure modes); one for the operator or another "
             "cause leaves the attempt invalid and its trial is run again (Invalid attempts).", ""]
    if not unsafe.empty:
        lines += ["Unsafe e-stops per policy: " + ", ".join(
            f"{_md(analysis, policy)} {int(n)}" for policy, n in unsafe.items()) + ".", ""]
    return lines + _table(["policy", "cause", "counted as", "attempts"],
                          [[_md(analysis, r.policy), r.label, r.counted_as, str(r.attempts)]
                           for r in table.itertuples()])


def invalid_lines(analysis: Analysis) -> list[str]:
    """Invalid attempts: by policy and reason, then listed one by one."""
    lines = ["## Invalid attempts", ""]
    if analysis.invalid.empty:
        return lines + ["None.", ""]
    lines += [f"{len(analysis.invalid)} invalid attempts (attempts that did not run as planned), excluded "
              "from every rate and contrast; their trials are re-run. They are not all of one kind: the operator "
              "stopped some (an e-stop or an abort, or declared them invalid afterwards), a policy "
              "server, the bench or the harness failed in others. None is scored as a policy failure: an "
              "e-stop the operator made for unsafe policy behaviour is a failure (see E-stops by cause) "
              "and is not among them; an e-stop whose cause was not recorded (an older ledger, or no "
              "answer) is.", ""]
    by_reason = analysis.invalid_by_reason
    lines += _table(["policy", "reason", "kind", "attempts", "trials re-run to a valid rollout",
                     "trials without a valid rollout"],
                    [[_md(analysis, r.policy), r.reason, r.kind, str(r.attempts), str(r.trials_rerun),
                      str(r.trials_without_valid)] for r in by_reason.itertuples()])
    extra = [c for c in ("invalid_reason", "attempt_id") if c in analysis.invalid.columns]
    columns = list(INVALID_LIST_COLUMNS) + extra
    lines += ["Every invalid attempt (`invalid.csv` also has each episode's file):", ""]
    return lines + _table(columns, [[markdown_text(value) for value in r]
                                    for r in analysis.invalid[columns].itertuples(index=False, name=None)])


DRY_RUN_COLUMNS = ("policy", "task", "condition", "evaluation_id", "bench_kind", "success", "valid")


def dry_run_lines(analysis: Analysis) -> list[str]:
    """Dry-run rollouts (`run dry_run=true`), by themselves: they count in no rate, contrast or trial."""
    dry = analysis.dry_runs
    if dry is None or dry.empty:
        return []
    lines = ["## Dry runs (not counted)", "",
             f"{len(dry)} rollout(s) were dry runs (`spabench run dry_run=true`): they are in no rate, contrast "
             "or completeness figure and their trials stayed pending for the counted run. `dry_runs.csv` "
             "lists them.", ""]
    columns = [c for c in DRY_RUN_COLUMNS if c in dry.columns]
    rows = [[_md(analysis, str(v)) if c == "policy" else markdown_text(v) for c, v in zip(columns, r, strict=True)]
            for r in dry[columns].itertuples(index=False, name=None)]
    return lines + _table(columns, rows)


def limit_change_lines(analysis: Analysis) -> list[str]:
    """Safety-limit changes after planning (hardware/bench.yaml's envelope): allowed, and shown here."""
    changes = analysis.limit_changes
    if not changes:
        return []
    lines = ["## Safety limits changed during the campaign", "",
             "The arm's safety limits are not part of the plan: a lab may change them between sessions. Each "
             "change, as the ledger recorded it when the next session started:", ""]
    rows = []
    for change in changes:
        for key, (old, new) in sorted(change["changed"].items()):
            rows.append([markdown_text(change["at"]), markdown_text(key), markdown_text(json.dumps(old)),
                         markdown_text(json.dumps(new))])
    return lines + _table(["recorded at", "limit", "old", "new"], rows)


def protocol_lines(analysis: Analysis) -> list[str]:
    """Per-policy departures from the protocol's rollout settings (plan and cards)."""
    settings = analysis.settings
    if settings.empty:
        return []
    lines = ["## Protocol differences between policies", "",
             "The protocol runs each rollout for 60 s at 30 Hz with the policy's actions executed as "
             "sent. Where a policy ran otherwise its rates are not strictly like for like with the "
             "others'. Settings from the campaign's plan and the policy cards (`protocol_settings.csv`).",
             ""]
    for r in settings.itertuples():
        if r.source == "unknown":
            text = "unknown: no plan and no policy card of that name"
        else:
            found = differences(r)
            text = "; ".join(found) if found else "the protocol's settings"
            where = {"plan and card": "the plan and policy card", "plan": "the plan", "card": "policy card"}[r.source]
            text += f" ({where}" + (f" `{markdown_text(r.card)}`" if r.card and r.source != "plan" else "") + ")"
        lines.append(f"- **{_md(analysis, r.policy)}**: {text}.")
    return lines + [""]


def limitation_lines(analysis: Analysis) -> list[str]:
    """LIMITATIONS, its first line naming the benches and labs when the outcomes came from several."""
    outcomes = analysis.outcomes
    benches = bench_names(outcomes)
    labs = names_of(outcomes, "lab") if "lab" in outcomes.columns else []
    if len(benches) < 2 and len(labs) < 2:
        return LIMITATIONS
    where = []
    if len(labs) > 1:
        where.append(f"{len(labs)} labs ({', '.join(markdown_text(n) for n in labs)})")
    if len(benches) > 1:
        where.append(f"{len(benches)} benches ({', '.join(markdown_text(n) for n in benches)})")
    first = (f"- {' and '.join(where).capitalize()}: per-{'lab' if len(labs) > 1 else 'bench'} rates and a "
             "test of heterogeneity are above. The rollouts pool rooms, arms and camera setups only as far as "
             "these differ; they measure no robustness beyond them.")
    return LIMITATIONS[:2] + [first] + LIMITATIONS[3:]


LIMITATIONS = [
    "## Limitations", "",
    "- One bench: one SO-101 arm, one windowless room with fixed lighting and camera placement, one table "
    "and one bowl. Nothing here measures robustness to another room, arm or camera setup.",
    "- Scenes are matched across policies by specification (objects and placements reproduced from "
    "reference images), not pixel for pixel: a between-policy pair shares the scene, not the exact image.",
    "- Success is binary (no partial credit) and scored by people; failure modes are one annotation per "
    "failed rollout and never change the score. Rater agreement is reported only where attempts were "
    "scored twice.",
    "- Per-task cells are small (10-50 rollouts): per-task intervals are wide, and a per-task difference "
    "that is not significant is not evidence of no difference. The paraphrase subset has 10 scenes per "
    "task; cross-task rates are descriptive (the scenes are not paired); Relative Size has no "
    "no-intervention condition.",
    "- Policies whose ID success is inadequate (in the published campaign GR00T F-FT, 120 ID trials, and "
    "VLA-0, 72) are ID-only diagnostic baselines: no OOD statement is made about them.",
    "- Rollout settings differ between policies where the policy needed it (see Protocol differences): "
    "rates across policies compare each policy as deployed, not under identical control.",
    "- The ranking pools conditions of unequal difficulty and is secondary to the per-condition rates; "
    "policies that never ran a common evaluation are not ranked against each other.",
    "",
]


def _md(analysis: Analysis, policy: str) -> str:
    return markdown_text(analysis.name(policy))


def beyond_the_paper(analysis: Analysis) -> list[str]:
    """Between-policy comparisons, ranking, multiplicity, completeness and rater agreement."""
    lines: list[str] = []
    table = analysis.comparisons
    if not table.empty:
        lines += ["## Between policies on the same scenes", "",
                  "Difference in success rate, policy A minus policy B, on the evaluations both ran "
                  "(the same scene specification). Per condition the tasks weigh equally; `overall` "
                  "pools every shared evaluation. `A only` / `B only` are the discordant pairs.", ""]
        lines += _table(
            ["A", "B", "condition", "difference [95% CI]", "pairs", "A only", "B only", "p", "p (Holm)"],
            [[_md(analysis, r.policy_a), _md(analysis, r.policy_b), _label(r.condition),
              format_difference(r.estimate, r.ci_low, r.ci_high), str(r.n_pairs), str(r.a_only),
              str(r.b_only), format_p(r.p_value), format_p(r.p_holm)] for r in table.itertuples()])
    if not analysis.ranking.empty:
        lines += ranking_lines(analysis)
    parts = [t[["family", "p_value"]] for t in (analysis.contrasts, table) if not t.empty]
    families = pd.concat(parts) if parts else pd.DataFrame(columns=["family", "p_value"])
    if not families.empty:
        sizes = families.groupby("family", sort=False).size()
        lines += ["## Multiplicity", "",
                  f"This report holds {len(families)} p-values. At the 5% level about "
                  f"{0.05 * len(families):.1f} would fall below 0.05 by chance if no difference were "
                  "real, so each p-value also has a Holm-adjusted value (family-wise error control) "
                  "within its family: "
                  + "; ".join(f"`{f}` ({n})" for f, n in sizes.items()) + ".", ""]
    lines += _completeness_lines(analysis)
    if not analysis.agreement.empty:
        lines += ["## Rater agreement", "",
                  "Cohen's kappa between raters on the attempts both scored (failure mode: on the "
                  "attempts both scored as failures), with a 95% percentile bootstrap interval.", ""]
        lines += _table(["rater A", "rater B", "score", "attempts", "agreement", "kappa [95% CI]"],
                        [[markdown_text(r.rater_a), markdown_text(r.rater_b), r.score, str(r.n),
                          f"{100 * r.observed_agreement:.1f}%", f"{r.kappa:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"]
                         for r in analysis.agreement.itertuples()])
    return lines


def ranking_lines(analysis: Analysis) -> list[str]:
    """The ranking section: one table per connected component of the comparison graph."""
    ranking = analysis.ranking
    groups = list(ranking.groupby("component", sort=True))
    lines = ["## Ranking (secondary)", "",
             "Bradley-Terry with ties (Davidson) from every same-scene pair: a win where one "
             "policy succeeded and the other failed, a tie otherwise. Secondary to the "
             "per-condition rates above: it mixes conditions of unequal difficulty. Strength is "
             "a centred log-worth; intervals from a cluster bootstrap over matched scenes.", ""]
    if len(groups) > 1:
        lines += [f"**The policies fall into {len(groups)} groups that never ran a common evaluation** "
                  "(connected components of the comparison graph). No comparison links the groups, so "
                  "each is ranked on its own: ranks and strengths of different groups are not comparable.",
                  ""]
    for component, table in groups:
        nu = float(table["tie_parameter"].iloc[0])
        if len(groups) > 1:
            members = ", ".join(_md(analysis, p) for p in table["policy"])
            lines += [f"### Group {component}: {members}", ""]
        lines += [f"Tie parameter nu = {nu:.2f}.", ""]
        lines += _table(["rank", "policy", "strength [95% CI]", "rank range", "wins", "losses", "ties"],
                        [[str(r.rank), _md(analysis, r.policy),
                          f"{r.strength:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]",
                          f"{r.rank_low}-{r.rank_high}" if r.rank_low != r.rank_high else str(r.rank_low),
                          str(r.wins), str(r.losses), str(r.ties)] for r in table.itertuples()])
    return lines


def _completeness_lines(analysis: Analysis) -> list[str]:
    table = analysis.completeness
    if table.empty:
        return []
    per = table.groupby(["policy", "condition"], sort=False)[
        ["planned", "valid", "missing", "invalid_only", "never_run", "successes"]].sum().reset_index()
    lines = ["## Completeness against the plan", "",
             f"Planned trials from {analysis.plan_source}; counted in trials (a trial re-run after an "
             "invalid attempt counts once). Missing = planned trials without a valid rollout: attempted "
             "with invalid attempts only, or never run. The bounds show each rate had every missing "
             "trial been a failure or a success (`completeness.csv` has every task).", ""]
    rows = []
    for r in per.itertuples():
        n, k, missing = r.valid, r.successes, r.missing
        total = n + missing
        rate = f"{100 * k / n:.1f}%" if n else ""
        bounds = f"{100 * k / total:.1f}% to {100 * (k + missing) / total:.1f}%" if total else ""
        rows.append([_md(analysis, r.policy), _label(r.condition), str(r.planned), str(n), str(missing),
                     str(r.invalid_only), str(r.never_run), rate, bounds])
    return lines + _table(["policy", "condition", "planned", "valid", "missing", "invalid only", "never run",
                           "rate", "rate if missing = fail .. success"], rows)


def method_notes(analysis: Analysis) -> list[str]:
    paired = ", ".join(f"`{name}` ({a} minus {b})" for name, (a, b) in PAIRED_CONTRASTS.items())
    return [
        "## Methods", "",
        "- Only valid, scored rollouts count. Invalid attempts (e-stops and aborts by the operator, "
        "faults of a policy server, the bench or the harness) are counted by policy and reason and "
        "listed above (`invalid_by_reason.csv`, `invalid.csv`); their trials are re-run, never scored "
        "as failures. The exception is an e-stop the operator made for unsafe policy behaviour: a "
        f"failure (`{UNSAFE}`), reported apart (E-stops by cause, `estops.csv`).",
        "- Success rates use two-sided 95% Wilson score intervals (closed form; equal to statsmodels' "
        "`proportion_confint(method='wilson')`). `task=all` pools the counts of all tasks of a "
        "condition; `task=non_relational` pools `no_intervention` over "
        f"{', '.join(NON_RELATIONAL_TASKS)} (80 trials per policy under the protocol).",
        "- Derived conditions: `ood_matched` = OOD rollouts whose matched group (scene) also has a "
        "valid direct control; `ood_paraphrase_subset` / `direct_paraphrase_subset` = the original "
        "OOD / direct rollouts on matched groups that have a valid paraphrase rollout; "
        "`id_cross_task_subset` (task=all only) = ID rollouts of the tasks that have cross-task "
        "rollouts, the like-for-like comparator of `cross_task` (the Object State novel-object "
        "pilot is excluded from the strict cross-task aggregate). Cross-task rates are "
        "descriptive: the scenes are not paired.",
        f"- Paired contrasts {paired} pair the two rollouts of one matched group (same policy, task "
        "and scene); the estimate is the mean paired difference. Per task (10-20 pairs) the interval is "
        "Tango's score interval for a paired difference (Tango 1998) and p is McNemar's score test "
        "without continuity correction, which is that interval's own statistic at zero: the interval "
        "excludes 0 exactly when p < 0.05, and it exists for every table (no discordant pair, or all "
        "pairs discordant one way). `task=all` with at least 20 pairs in every task (the direct "
        "control) weights tasks equally: the interval is the percentile paired bootstrap resampling "
        "matched groups within each task, as in the authors' released analysis code (100,000 "
        "resamples, seed 20260906), and p the exact (binomial) McNemar test on the pooled pairs. "
        "`task=all` with fewer pairs per task (the paraphrase subset, 10) is the pooled pairs' "
        "difference with its Tango interval and score test, like a task: a bootstrap at that size "
        "pins bounds to its lattice.",
        "- Bootstrap computation: the resampled statistics are means of 0/1 outcomes or of paired "
        "differences in {-1, 0, 1}, so a resampled mean, an equal-weight mean over tasks and a "
        "difference of two means each have an exact law on a lattice (convolutions of the observed "
        "distributions). The bounds are that law's 2.5% and 97.5% quantiles: the limit of the "
        "percentile interval as the number of resamples grows, with no Monte Carlo error and no "
        "dependence on the seed (`ci_method` `bootstrap_exact_percentile`). Data off such a lattice "
        "are resampled one by one (`bootstrap_percentile`, with a Monte Carlo error per bound).",
        "- `id_minus_ood` is unpaired (different scenes): per task, Newcombe's hybrid score interval "
        "(method 10, from the two Wilson intervals) and a two-sided Fisher exact p-value.",
        "- Between policies: rollouts of two policies with the same task, condition, evaluation id and "
        "instruction variant are a matched pair (evaluation N is the same scene for every policy). "
        "Per condition, and `overall` over every shared evaluation: the pooled pairs' mean difference, "
        "Tango's score interval and McNemar's score test (the interval excludes 0 exactly when "
        "p < 0.05). With the protocol's equal per-task counts the pooled mean equals the equal-weight "
        "mean over tasks.",
        "- Ranking: Bradley-Terry with ties (Davidson 1970) fitted by its fixed-point iteration, half a "
        "virtual tie per compared pair. Two policies are compared only where they ran a common "
        "evaluation; the comparison graph is split into connected components and each is ranked "
        "separately (`component` in `ranking.csv`). 95% percentile intervals of strength and rank "
        f"from {min(analysis.n_resamples, RANKING_RESAMPLES)} cluster-bootstrap resamples: the unit is "
        "a matched scene (an OOD scene with its direct control and paraphrases) or, without a matched "
        "group, one shared evaluation, so the comparisons of one scene stay together. Equal "
        "strengths share the better rank, in the table and in every resample. Secondary: it "
        "pools conditions of unequal difficulty.",
        "- Multiplicity: Holm's step-down adjustment within each family: one family per contrast "
        "(its policies and tasks), the between-policy per-condition tests, the between-policy overall "
        "tests. Unadjusted p-values are reported beside the adjusted ones.",
        "- Completeness: planned vs valid trials per cell; bounds k/N and (k+m)/N with k successes, m "
        "missing trials (invalid attempts only, or never run) and N the planned trials (or the trials "
        "present, when the outcomes hold more than the plan).",
        "- Rater agreement: Cohen's kappa on shared attempts, percentile bootstrap interval (2000 "
        "multinomial resamples of the raters' cross-table).",
        "- `task=all` contrasts weight every task equally: the estimate is the mean of the per-task "
        "differences and the bootstrap averages per-task resampled means (for `id_minus_ood`, "
        "rollouts are resampled within task and condition). The `all` p-values test the pooled "
        "tables (McNemar on all pairs; Fisher on pooled counts); with the protocol's equal per-task "
        "counts pooled and equal-weight estimates coincide.",
        "- Failure modes count failed valid rollouts; a failure without annotation is "
        "`unannotated`. Annotations never change the binary score.",
        "- Duplicates: at most one valid row per (policy, task, condition, evaluation_id, "
        "instruction_variant), and one valid rollout per condition within a matched group.",
        "",
    ]


# ---------------------------------------------------------------- writing

def write_report(analysis: Analysis, out: str | Path,
                 figure_settings: figures.FigureSettings | None = None) -> list[Path]:
    """Write every output into `out` at once (spabench.outputs: a folder holding anything but an
    earlier report is refused, nothing of the user's is deleted); returns the written files.
    `figure_settings`: the figures' width and a lab's style sheet (default: single column)."""
    out = Path(out)
    with replace_output(out, "report") as staging:
        job = figures.start_figures(analysis.summary, analysis.failures, analysis.policies, staging,
                                    names=analysis.names, settings=figure_settings)
        names = _write_files(analysis, staging, job.result(), job.policies)
    return [out / name for name in OUTPUT_FILES] + [out / name for name in names]


def analyse_and_write(outcomes: pd.DataFrame, out: str | Path,
                      figure_settings: figures.FigureSettings | None = None,
                      complete: Callable[[Analysis], None] | None = None,
                      gathered: Callable[[], dict[str, Any]] | None = None,
                      **options: Any) -> tuple[Analysis, list[Path]]:
    """`analyse` (with `options`) and `write_report` in one step, the figures drawn by forked workers
    while the statistics are computed: they need only the success and failure tables, computed
    first. `gathered()`: more options that take time to read (the policy cards), read while the
    figures are drawn. `complete(analysis)` adds what the caller knows beyond the outcomes (a
    campaign's servers and motor health) before anything is written."""
    out = Path(out)
    # The objects alive now (imported modules, the outcomes) are moved out of the cyclic collector's
    # generations: it stops rescanning them on every collection (the 100k-row report: 17 -> 13 s) and
    # the forked figure workers leave their pages shared (Python's documented use of gc.freeze).
    gc.freeze()
    try:
        return _analyse_and_write(outcomes, out, figure_settings, complete, gathered, options)
    finally:
        gc.unfreeze()


def _analyse_and_write(outcomes: pd.DataFrame, out: Path, figure_settings: figures.FigureSettings | None,
                       complete: Callable[[Analysis], None] | None, gathered: Callable[[], dict[str, Any]] | None,
                       options: dict[str, Any]) -> tuple[Analysis, list[Path]]:
    with replace_output(out, "report") as staging:
        summary, failures = success_table(outcomes), failure_mode_table(outcomes)
        job = figures.start_figures(summary, failures, policies_in_order(outcomes[outcomes["valid"]]), staging,
                                    names=display_names(policies_in_order(outcomes), options.get("names")),
                                    settings=figure_settings)
        try:
            options |= gathered() if gathered is not None else {}
            analysis = analyse(outcomes, summary=summary, failures=failures, **options)
            if complete is not None:
                complete(analysis)
            drawn = job.result()
        except BaseException:
            job.cancel()
            raise
        names = _write_files(analysis, staging, drawn, job.policies)
    return analysis, [out / name for name in OUTPUT_FILES] + [out / name for name in names]


def _write_files(analysis: Analysis, staging: Path, drawn: dict[str, list[Path]],
                 figure_policies: list[str] | None = None) -> list[str]:
    """The tables, report.md and report.html beside the drawn figures; returns the names of the
    figure and health files (OUTPUT_FILES are always written)."""
    csv_safe_frame(analysis.summary).to_csv(staging / "summary.csv", index=False)
    csv_safe_frame(analysis.contrasts).to_csv(staging / "contrasts.csv", index=False)
    csv_safe_frame(analysis.failures).to_csv(staging / "failure_modes.csv", index=False)
    csv_safe_frame(analysis.invalid).to_csv(staging / "invalid.csv", index=False)
    csv_safe_frame(analysis.invalid_by_reason).to_csv(staging / "invalid_by_reason.csv", index=False)
    csv_safe_frame(analysis.estops).to_csv(staging / "estops.csv", index=False)
    csv_safe_frame(analysis.settings).to_csv(staging / "protocol_settings.csv", index=False)
    csv_safe_frame(analysis.comparisons).to_csv(staging / "comparisons.csv", index=False)
    csv_safe_frame(analysis.ranking).to_csv(staging / "ranking.csv", index=False)
    csv_safe_frame(analysis.completeness).to_csv(staging / "completeness.csv", index=False)
    csv_safe_frame(analysis.agreement).to_csv(staging / "agreement.csv", index=False)
    markdown = render_markdown(analysis, drawn, figure_policies)
    (staging / "report.md").write_text(markdown, encoding="utf-8")
    inline = {p.name: p for paths in drawn.values() for p in paths if p.suffix[1:] in figures.PAGE_FORMATS}
    (staging / "report.html").write_text(markdown_to_html(markdown, inline), encoding="utf-8")
    names = [p.name for paths in drawn.values() for p in paths]
    if analysis.dry_runs is not None and not analysis.dry_runs.empty:
        csv_safe_frame(analysis.dry_runs).to_csv(staging / "dry_runs.csv", index=False)
        names.append("dry_runs.csv")
    for file, table in factor_files(analysis.outcomes).items():
        csv_safe_frame(table).to_csv(staging / file, index=False)
        names.append(file)
    if analysis.health is not None:
        csv_safe_frame(analysis.health.table).to_csv(staging / "health.csv", index=False)
        names.append("health.csv")
    if analysis.cameras is not None and not analysis.cameras.table.empty:
        csv_safe_frame(analysis.cameras.table).to_csv(staging / "cameras.csv", index=False)
        names.append("cameras.csv")
    return names
