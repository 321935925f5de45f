"""What a shared ledger can hold that the results must not absorb silently, said once for
`ledger status` and `report`: a trial with more than one complete attempt (a ledger written before
finishing was a compare-and-set) and a scene set split between benches (a takeover between two of its
trials, so its policies were not compared on one staged scene)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def duplicate_lines(ledger: Any, campaign_dir: Path | str) -> list[str]:
    """One line per trial with several complete attempts, ending with the command that fixes it: a
    rater keeps one (the protocol counts one valid rollout per trial) and invalidates the others."""
    lines = []
    for entry in ledger.duplicate_complete():
        shown = ", ".join(f"{a['attempt_id']} (bench {a['bench_id'] or '?'}, "
                          f"{'/'.join(a['scores']) or 'unscored'})" for a in entry["attempts"])
        keep_out = entry["attempts"][0]["attempt_id"]
        lines.append(f"trial {entry['trial_id']} has {len(entry['attempts'])} complete attempts: {shown}; keep "
                     f"one and invalidate the others, e.g. `spabench score campaign={campaign_dir} "
                     f"attempt={keep_out} invalidate=true reason=\"second complete attempt after a takeover\"`")
    return lines


def split_lines(ledger: Any) -> list[str]:
    """One line per scene set whose complete attempts come from more than one bench."""
    lines = []
    for entry in ledger.split_sets():
        trials = ", ".join(f"{trial} on {bench or '?'}" for trial, bench in entry["trials"])
        lines.append(f"scene set {entry['evaluation_id']} is split between benches {', '.join(entry['benches'])} "
                     f"({trials}): its policies were not all run on one staged scene")
    return lines
