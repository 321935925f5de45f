"""Success rates with two-sided Wilson score intervals, per cell, per condition and on matched subsets."""

from __future__ import annotations

import pandas as pd

from spabench.analysis.exact import wilson
from spabench.analysis.matching import matched_subset, valid_rollouts
from spabench.analysis.outcomes import policies_in_order
from spabench.suite.vocabulary import CONDITIONS, TASKS

ALL_TASKS = "all"
NON_RELATIONAL = "non_relational"
# The no-intervention aggregate: tasks whose no-intervention scenes have no valid target.
# Relational Placement's counterpart is its no_movement / movement_required pair; Relative Size has none.
NON_RELATIONAL_TASKS: tuple[str, ...] = ("object_state", "referential_description", "ordinal_position", "counting")

# Derived conditions: original-instruction rollouts restricted to a matched subset of scenes.
DERIVED_CONDITIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    # OOD rollouts whose scene also has a direct control: the fair comparison for `direct`.
    "ood_matched": ("ood", ("direct",)),
    # Original OOD / direct rollouts on the scenes that have paraphrase rollouts.
    "ood_paraphrase_subset": ("ood", ("paraphrase_ood", "paraphrase_direct")),
    "direct_paraphrase_subset": ("direct", ("paraphrase_ood", "paraphrase_direct")),
}

# The strict cross-task comparison: ID pooled over the tasks that have cross-task rollouts
# (five tasks, 100 trials, beside cross_task's 100). Reported for task='all' only.
ID_CROSS_TASK_SUBSET = "id_cross_task_subset"

TASK_ORDER: tuple[str, ...] = TASKS + (ALL_TASKS, NON_RELATIONAL)
CONDITION_ORDER: tuple[str, ...] = CONDITIONS + tuple(DERIVED_CONDITIONS) + (ID_CROSS_TASK_SUBSET,)
SUMMARY_COLUMNS: tuple[str, ...] = (
    "policy", "task", "condition", "successes", "trials", "rate", "wilson_low", "wilson_high",
)


def wilson_interval(successes, trials, alpha: float = 0.05):
    """Two-sided Wilson score interval (the closed form in `exact.wilson`; equal to statsmodels'
    `proportion_confint(method='wilson')`, checked in the tests).

    Scalars give a (low, high) tuple of floats, arrays a tuple of arrays; zero trials give NaN.
    """
    return wilson(successes, trials, alpha)


def condition_rollouts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Valid rollouts labelled by every condition they count in: their own and any derived one.

    A rollout appears once per label (an OOD rollout on a paraphrase scene counts in `ood`,
    `ood_matched` and `ood_paraphrase_subset`).
    """
    valid = valid_rollouts(outcomes)
    parts = [valid]
    for derived, (condition, partners) in DERIVED_CONDITIONS.items():
        parts.append(matched_subset(valid, condition, partners).assign(condition=derived))
    return pd.concat(parts, ignore_index=True)


def _rate_rows(counts: pd.DataFrame, alpha: float) -> pd.DataFrame:
    counts = counts.copy()
    counts["rate"] = counts["successes"] / counts["trials"]
    counts["wilson_low"], counts["wilson_high"] = wilson_interval(
        counts["successes"].to_numpy(), counts["trials"].to_numpy(), alpha)
    return counts


def success_table(outcomes: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Successes, trials, rate and Wilson interval for every policy x task x condition present.

    Adds task='all' (counts pooled over tasks, per condition), task='non_relational' for
    `no_intervention` pooled over NON_RELATIONAL_TASKS (80 trials per policy under the protocol),
    and task='all' of `id_cross_task_subset` (ID on the tasks that have cross-task rollouts).
    """
    labelled = condition_rollouts(outcomes)
    if labelled.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))

    def count(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
        return (frame.groupby(keys, sort=False)["success"].agg(successes="sum", trials="size")
                .reset_index())

    per_task = count(labelled, ["policy", "task", "condition"])
    pooled = count(labelled, ["policy", "condition"]).assign(task=ALL_TASKS)
    quiet = labelled[(labelled["condition"] == "no_intervention")
                     & labelled["task"].isin(NON_RELATIONAL_TASKS)]
    non_relational = count(quiet, ["policy", "condition"]).assign(task=NON_RELATIONAL)
    crossed = labelled.loc[labelled["condition"] == "cross_task", ["policy", "task"]].drop_duplicates()
    id_crossed = labelled[labelled["condition"] == "id"].merge(crossed, on=["policy", "task"])
    id_crossed = count(id_crossed.assign(condition=ID_CROSS_TASK_SUBSET), ["policy", "condition"])
    table = pd.concat([per_task, pooled, non_relational, id_crossed.assign(task=ALL_TASKS)],
                      ignore_index=True)
    table = _rate_rows(table, alpha)
    table["successes"] = table["successes"].astype(int)
    table["trials"] = table["trials"].astype(int)
    return order_rows(table, policies_in_order(outcomes))[list(SUMMARY_COLUMNS)]


def order_rows(table: pd.DataFrame, policies: list[str]) -> pd.DataFrame:
    """Sort by policy (input order), task (vocabulary order, then all, non_relational), condition."""
    keys = {
        "policy": {p: i for i, p in enumerate(policies)},
        "task": {t: i for i, t in enumerate(TASK_ORDER)},
        "condition": {c: i for i, c in enumerate(CONDITION_ORDER)},
    }
    by = [k for k in keys if k in table.columns]
    return table.sort_values(
        by, key=lambda col: col.map(keys[col.name]).fillna(len(keys[col.name])), kind="stable"
    ).reset_index(drop=True)


def summary_cells(summary: pd.DataFrame) -> dict[tuple[str, str, str], tuple]:
    """The summary indexed once by (policy, task, condition) -> (successes, trials, rate, wilson_low,
    wilson_high); a cell with no trials is absent. Built in one pass: the report looks up hundreds."""
    keys = zip(*(summary[c].to_numpy() for c in ("policy", "task", "condition")), strict=True)
    values = zip(*(summary[c].to_numpy() for c in ("successes", "trials", "rate", "wilson_low", "wilson_high")),
                 strict=True)
    return dict(zip(keys, values, strict=True))
