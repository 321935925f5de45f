"""Attempts started below the scene-alignment threshold, for the report.

At "scene ready" the live scene is scored against the evaluation's reference image; below the
threshold an attempt starts only with a person's override reason, stored with the attempt. A reader
of the results needs to see those attempts: their scene may not have matched the other policies'.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spabench.escaping import markdown_text


@dataclass(frozen=True)
class BelowThreshold:
    attempt_id: str
    policy: str
    task: str
    condition: str
    status: str
    alignment: float | None
    threshold: float | None
    reason: str


def campaign_below_threshold(campaign_dir: str | Path, url: str | None = None) -> list[BelowThreshold]:
    """Read the campaign's ledger (read-only): every attempt that started with an alignment override."""
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        trials = {t.trial_id: t for t in ledger.trials()}
        started = [a for a in ledger.attempts() if a.alignment_override and not a.dry_run]
        thresholds = {e["attempt_id"]: e["payload"].get("threshold")
                      for e in ledger.events(kind="scene_alignment") if e["attempt_id"]}
    return [BelowThreshold(a.attempt_id, trials[a.trial_id].policy, trials[a.trial_id].task,
                           trials[a.trial_id].condition, a.status, a.alignment, thresholds.get(a.attempt_id),
                           a.alignment_override or "")
            for a in started]


def below_threshold_lines(rows: list[BelowThreshold], name: Any = str) -> list[str]:
    """The report's section (always shown for a campaign input, so "none" is said, not implied)."""
    lines = ["## Attempts started below the alignment threshold", ""]
    if not rows:
        return lines + ["None: every attempt with a reference image started with its scene matching the "
                        "reference (alignment at or above the threshold).", ""]
    lines += [f"{len(rows)} attempt(s) started with the scene below the alignment threshold, on an operator's "
              "override; their outcomes are counted like any other. The reason is the operator's own.", ""]
    lines += ["| attempt | policy | task | condition | status | alignment | threshold | override reason |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        value = "not measured" if r.alignment is None else f"{r.alignment:.3f}"
        thr = "?" if r.threshold is None else f"{r.threshold:g}"
        cells = [r.attempt_id, name(r.policy), r.task, r.condition, r.status, value, thr, r.reason]
        lines.append("| " + " | ".join(markdown_text(str(c)) for c in cells) + " |")
    return lines + [""]
