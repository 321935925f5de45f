"""A stand-in for the run's Session as an operator sees it (spabench.operator.base.SessionView), for
operator tests that drive one operator without a bench or policy servers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any


def session_view(campaign_dir: Path | str = ".", **fields: Any) -> SimpleNamespace:
    """Every SessionView member (no ledger, suite, bench, controls, stopping rule or render-ahead worker
    unless given)."""
    view: dict[str, Any] = {"campaign_dir": Path(campaign_dir), "ledger": None, "suite": None, "bench": None,
                            "controls": None, "said": [], "resume_note": None, "stopping": None,
                            "render_ahead": None}
    unknown = set(fields) - set(view)
    if unknown:
        raise TypeError(f"SessionView has no {sorted(unknown)}")
    return SimpleNamespace(**{**view, **fields})
