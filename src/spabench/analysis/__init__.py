"""Offline analysis of Spa-Bench outcomes: rates, contrasts, failure modes, figures, report.

Imports neither LeRobot nor torch, so scoring runs on a machine without the bench extra.
"""

from spabench.analysis.bootstrap import paired_bootstrap
from spabench.analysis.contrasts import (
    contrast_table,
    fisher_exact,
    matched_contrast,
    mcnemar_exact,
    proportion_difference,
    unpaired_contrast,
)
from spabench.analysis.failures import failure_mode_table
from spabench.analysis.outcomes import invalid_rollouts, load_outcomes, outcomes_from_frame
from spabench.analysis.rates import success_table, wilson_interval
from spabench.analysis.report import analyse, format_rate, write_report

__all__ = [
    "analyse", "contrast_table", "failure_mode_table", "fisher_exact", "format_rate",
    "invalid_rollouts", "load_outcomes", "matched_contrast", "mcnemar_exact", "outcomes_from_frame",
    "paired_bootstrap", "proportion_difference", "success_table", "unpaired_contrast",
    "wilson_interval", "write_report",
]
