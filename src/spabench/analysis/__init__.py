"""Offline analysis of Spa-Bench outcomes: rates, contrasts, failure modes, figures, report.

Imports neither LeRobot nor torch, so scoring runs on a machine without the bench extra. The names
below load their module (pandas, scipy, statsmodels) on first use, so that importing a command of this
package (the CLI imports every command function) costs nothing until the command runs.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE: dict[str, str] = {
    "paired_bootstrap": "bootstrap",
    "contrast_table": "contrasts", "fisher_exact": "contrasts", "matched_contrast": "contrasts",
    "mcnemar_exact": "contrasts", "proportion_difference": "contrasts", "unpaired_contrast": "contrasts",
    "failure_mode_table": "failures",
    "invalid_rollouts": "outcomes", "load_outcomes": "outcomes", "outcomes_from_frame": "outcomes",
    "success_table": "rates", "wilson_interval": "rates",
    "analyse": "report", "format_rate": "report", "write_report": "report",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'spabench.analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"spabench.analysis.{module}"), name)
