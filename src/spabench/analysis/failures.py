"""Failure-mode composition: what went wrong in failed valid rollouts (annotations never change scores)."""

from __future__ import annotations

import pandas as pd

from spabench.analysis.matching import valid_rollouts
from spabench.analysis.outcomes import policies_in_order
from spabench.analysis.rates import ALL_TASKS, order_rows
from spabench.suite.rules import UNSAFE
from spabench.suite.vocabulary import FAILURE_MODE_LABELS, FAILURE_MODES

UNANNOTATED = "unannotated"
# The annotated modes, then the failures the operator e-stopped as unsafe (apart: not an annotation
# of a finished rollout but a stop), then the unannotated.
FAILURE_MODE_ORDER: tuple[str, ...] = FAILURE_MODES + (UNSAFE, UNANNOTATED)
UNSAFE_LABEL = "Unsafe (e-stopped)"
FAILURE_COLUMNS: tuple[str, ...] = ("policy", "task", "condition", "failure_mode", "count", "label")


def failure_mode_label(mode: str) -> str:
    """The protocol's published label of a failure mode ('Wrong target', ...); 'Unannotated' for none,
    'Unsafe (e-stopped)' for an e-stop for unsafe policy behaviour."""
    if mode == UNSAFE:
        return UNSAFE_LABEL
    return FAILURE_MODE_LABELS.get(mode, "Unannotated" if mode == UNANNOTATED else mode)


def failure_mode_table(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Counts of failure modes among failed valid rollouts, per policy x task x condition.

    A failure without an annotation counts as 'unannotated'. `label` is the published label. Rows with task='all' pool the tasks of
    each condition (they repeat the per-task counts; do not add them to the per-task rows).
    """
    failed = valid_rollouts(outcomes)
    failed = failed[failed["success"] == 0].copy()
    if failed.empty:
        return pd.DataFrame(columns=list(FAILURE_COLUMNS))
    failed["failure_mode"] = failed["failure_mode"].where(failed["failure_mode"] != "", UNANNOTATED)
    per_task = failed.groupby(["policy", "task", "condition", "failure_mode"], sort=False).size()
    pooled = failed.groupby(["policy", "condition", "failure_mode"], sort=False).size()
    table = pd.concat([
        per_task.rename("count").reset_index(),
        pooled.rename("count").reset_index().assign(task=ALL_TASKS),
    ], ignore_index=True)
    rank = {m: i for i, m in enumerate(FAILURE_MODE_ORDER)}
    table = table.assign(_m=table["failure_mode"].map(rank)).sort_values("_m", kind="stable")
    table = order_rows(table.drop(columns="_m"), policies_in_order(outcomes))
    table["count"] = table["count"].astype(int)
    table["label"] = table["failure_mode"].map(failure_mode_label)
    return table[list(FAILURE_COLUMNS)]
