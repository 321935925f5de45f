"""Where the campaign stands before a trial: trial k of N, the time left, and whether this trial is a
re-run after an invalid attempt. Shared by the terminal header and the bench page's trial card."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import Any


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def campaign_progress(ledger: Any, trial: Any, cycle_s: Sequence[float] = ()) -> dict[str, Any]:
    """k of n (k = the trial about to run), pending trials, the estimated time left (the median trial
    cycle measured this session, else the median rollout time of the campaign's complete attempts)
    and `rerun`: what this trial's last invalid attempt was, or None for a first try."""
    p = ledger.progress()
    pending = max(0, p["trials"] - p["complete"])
    per: float | None
    if cycle_s:
        per, basis = statistics.median(cycle_s), "cycles this session"
    else:
        durations = [d for a in ledger.attempts() if a.status == "complete"
                     and (d := _seconds(a.started_at, a.ended_at))]
        per, basis = (statistics.median(durations), "rollouts only") \
            if durations else (None, "nothing timed yet")
    earlier = [a for a in ledger.attempts_for(trial.trial_id) if a.status == "invalid"]
    rerun = None
    if earlier:
        last = earlier[-1]
        rerun = (f"re-run of trial {trial.trial_id} after {last.invalid_reason or last.stop_reason or 'an invalid attempt'}"
                 f" (attempt {last.attempt_id}" + (f"; {len(earlier)} invalid attempts so far)" if len(earlier) > 1 else ")"))
    return {"k": p["complete"] + 1, "n": p["trials"], "pending": pending,
            "time_left_s": None if per is None else round(per * pending, 1),
            "per_trial_s": None if per is None else round(per, 1), "estimate_basis": basis, "rerun": rerun}


def duration_text(seconds: float) -> str:
    minutes = int(round(seconds / 60.0))
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def progress_text(progress: dict[str, Any]) -> str:
    """One header line of at most 79 characters: 'trial 3 of 40 · about 52 min left (80 s/trial, ...)'."""
    left = progress["time_left_s"]
    when = (f"time left: unknown ({progress['estimate_basis']})" if left is None else
            f"about {duration_text(left)} left ({progress['per_trial_s']:g} s/trial, {progress['estimate_basis']})")
    return f"trial {progress['k']} of {progress['n']} · {when}"
