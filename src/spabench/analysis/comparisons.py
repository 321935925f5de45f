"""Statistics beyond the paper: policies compared on shared evaluations, multiplicity, completeness.

Between policies: evaluation N is the same scene specification for every policy, so two policies'
rollouts of one (task, condition, evaluation_id, instruction variant) of one lab are a matched pair. Per
condition, and 'overall' over every shared evaluation, the estimate is the mean paired difference
of the pooled pairs, the interval Tango's score interval and the p-value McNemar's score test (the
interval's own statistic at zero: the interval excludes 0 exactly when p < alpha, and it exists
with no discordant pair). With the protocol's equal per-task counts the pooled mean equals the
equal-weight mean over tasks.

Completeness counts trials, not attempts: a trial re-run after an invalid attempt counts once.

Multiplicity: every p-value of the report belongs to one family (one contrast across policies and
tasks; the between-policy per-condition tests; the between-policy overall tests), and each gets a
Holm-adjusted p-value within its family.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix

from spabench.analysis.exact import holm, mcnemar_score_counts, tango_interval
from spabench.analysis.matching import valid_rollouts
from spabench.analysis.outcomes import DUPLICATE_KEY, lab_key, policies_in_order
from spabench.suite.vocabulary import CONDITION_COUNTS, CONDITIONS, TASKS

OVERALL = "overall"
SHARED_KEY: tuple[str, ...] = ("task", "condition", "evaluation_id", "instruction_variant")
COMPARISON_COLUMNS: tuple[str, ...] = (
    "policy_a", "policy_b", "condition", "n_pairs", "a_only", "b_only", "estimate", "ci_low", "ci_high",
    "p_value", "family", "p_holm",
)
COMPLETENESS_COLUMNS: tuple[str, ...] = (
    "policy", "task", "condition", "planned", "valid", "missing", "invalid_only", "never_run", "invalid_attempts",
    "successes", "rate", "rate_if_missing_failed", "rate_if_missing_succeeded",
)


def shared_outcomes(outcomes: pd.DataFrame) -> pd.DataFrame:
    """One row per shared evaluation (SHARED_KEY), one column per policy: 1/0, NaN when not run."""
    valid = valid_rollouts(outcomes)
    if valid.empty:
        return pd.DataFrame()
    wide = valid.pivot_table(index=lab_key(valid, SHARED_KEY), columns="policy", values="success", aggfunc="first")
    return wide.reindex(columns=[p for p in policies_in_order(valid) if p in wide.columns])


def between_policy_table(outcomes: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Every pair of policies with shared evaluations: per condition and overall (a minus b)."""
    columns = [c for c in COMPARISON_COLUMNS if c != "p_holm"]
    wide = shared_outcomes(outcomes)
    if wide.empty:
        return with_holm(pd.DataFrame([], columns=columns))
    values = wide.to_numpy(dtype=float)
    ran = ~np.isnan(values)
    incidence = csr_matrix(ran.astype(np.int32))
    shared = (incidence.T @ incidence).toarray()  # evaluations each pair of policies both ran (sparse: linear)
    all_conditions = wide.index.get_level_values("condition").to_numpy()
    rows = []
    for (i, a), (j, b) in combinations(enumerate(wide.columns), 2):
        if not shared[i, j]:
            continue
        both = ran[:, i] & ran[:, j]
        diff = values[both, i] - values[both, j]
        conditions = all_conditions[both]
        for condition in [c for c in CONDITIONS if (conditions == c).any()]:
            rows.append(_counts_row(a, b, condition, diff[conditions == condition], "between_policy_by_condition"))
        rows.append(_counts_row(a, b, OVERALL, diff, "between_policy_overall"))
    table = pd.DataFrame(rows, columns=["policy_a", "policy_b", "condition", "n_pairs", "a_only", "b_only",
                                        "estimate", "family"])
    if not table.empty:
        a_only, b_only = table["a_only"].to_numpy(), table["b_only"].to_numpy()
        table["ci_low"], table["ci_high"] = tango_interval(a_only, b_only, table["n_pairs"].to_numpy(), alpha)
        table["p_value"] = mcnemar_score_counts(a_only, b_only)
    return with_holm(table.reindex(columns=columns))


def _counts_row(a, b, condition, diff, family):
    return (a, b, condition, len(diff), int((diff > 0).sum()), int((diff < 0).sum()), float(diff.mean()), family)


def with_holm(table: pd.DataFrame, family: str | None = None) -> pd.DataFrame:
    """`table` with a `p_holm` column: Holm's adjustment within each `family` (given, or the column)."""
    table = table.copy()
    if family is not None:
        table["family"] = family
    table["p_holm"] = np.nan
    for _, index in table.groupby("family", sort=False).groups.items():
        table.loc[index, "p_holm"] = holm(table.loc[index, "p_value"].to_numpy())
    return table


def contrasts_with_holm(contrasts: pd.DataFrame) -> pd.DataFrame:
    """The protocol's contrasts with their family (one per contrast name) and Holm-adjusted p."""
    if contrasts.empty:
        return contrasts.assign(family=pd.Series(dtype=str), p_holm=pd.Series(dtype=float))
    return with_holm(contrasts.assign(family=contrasts["contrast"]))


def protocol_plan(outcomes: pd.DataFrame) -> pd.DataFrame:
    """The protocol's trial counts for the cells a policy took part in (any attempt, valid or not):
    the plan of an outcomes CSV, which carries no plan of its own."""
    present = outcomes[["policy", "condition"]].drop_duplicates()
    rows = []
    for policy, condition in present.itertuples(index=False, name=None):
        for task in TASKS:
            planned = CONDITION_COUNTS[task].get(condition)
            if planned:
                rows.append((policy, task, condition, planned))
    return pd.DataFrame(rows, columns=["policy", "task", "condition", "planned"])


def completeness_table(outcomes: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """Planned vs valid trials per cell, counted in trials (a re-run trial counts once), and each
    rate's bounds had every missing trial (attempted with only invalid attempts, or never run)
    been a failure (k / N) or a success ((k + missing) / N). N is the planned count, or the trials
    present when the outcomes hold more than the plan; the bounds never reach past it."""
    valid = valid_rollouts(outcomes)
    keys = ["policy", "task", "condition"]
    counts = valid.groupby(keys)["success"].agg(valid="size", successes="sum")
    invalid = outcomes[~outcomes["valid"]]
    attempts = invalid.groupby(keys).size().rename("invalid_attempts")
    trial = lab_key(outcomes, DUPLICATE_KEY)
    done = pd.MultiIndex.from_frame(valid[trial])
    never_valid = invalid[~pd.MultiIndex.from_frame(invalid[trial]).isin(done)].drop_duplicates(trial)
    invalid_only = never_valid.groupby(keys).size().rename("invalid_only")
    table = (plan.groupby(keys)["planned"].sum().to_frame().join(counts, how="outer").join(attempts, how="outer")
             .join(invalid_only, how="outer"))
    table = table.fillna(0).astype(int).reset_index()
    n, k = table["valid"], table["successes"]
    total = np.maximum(table["planned"], n + table["invalid_only"])
    table["missing"] = total - n
    table["never_run"] = table["missing"] - table["invalid_only"]
    with np.errstate(divide="ignore", invalid="ignore"):
        table["rate"] = np.where(n > 0, k / n.where(n > 0, 1), np.nan)
        table["rate_if_missing_failed"] = np.where(total > 0, k / total.where(total > 0, 1), np.nan)
        table["rate_if_missing_succeeded"] = np.where(total > 0, (k + table["missing"]) / total.where(total > 0, 1),
                                                      np.nan)
    order = {p: i for i, p in enumerate(policies_in_order(outcomes))}
    table = table.sort_values(["policy", "task", "condition"], key=lambda c: c.map(
        order if c.name == "policy" else {v: i for i, v in enumerate(TASKS if c.name == "task" else CONDITIONS)}),
        kind="stable")
    return table.reset_index(drop=True)[list(COMPLETENESS_COLUMNS)]


def ledger_plan(ledger) -> pd.DataFrame:
    """The plan of a campaign: its planned trials per policy x task x condition, split by the card,
    timer and control rate they were planned with (sum `planned` over those for a cell's count)."""
    keys = ["policy", "task", "condition", "card", "timer_s", "control_hz"]
    frame = pd.DataFrame([(t.policy, t.task, t.condition, t.card, t.timer_s, t.control_hz) for t in ledger.trials()],
                         columns=keys)
    return frame.groupby(keys).size().rename("planned").reset_index()
