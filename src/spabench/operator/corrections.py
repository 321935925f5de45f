"""Score corrections after the session: rescore one attempt, or declare a complete attempt invalid.

Both keep the record: a rescore supersedes the rater's earlier score, which stays in the ledger's
score history with its time, next to the new one with the rater, time and reason; invalidating sets
the attempt invalid ('operator_invalidated: <reason>'), keeps its scores in the history and logs who
did it, and `spabench run` then re-runs the trial. Only the alias is shown, never the policy.
"""

from __future__ import annotations

from typing import Any, TextIO

from spabench.errors import ConfigError
from spabench.operator.base import Operator


def _score_text(score: Any) -> str:
    verdict = "success" if score.success else f"failure ({score.failure_mode or 'no mode'})"
    why = f", reason: {score.reason}" if getattr(score, "reason", None) else ""
    return f"{verdict} by {score.rater} at {score.scored_at}{why}"


def _complete_attempt(ledger: Any, attempt_id: str, what: str) -> Any:
    from spabench.ledger import LedgerError

    try:
        attempt = ledger.attempt(attempt_id)
    except LedgerError:
        known = [a.attempt_id for a in ledger.attempts() if a.status == "complete"]
        raise ConfigError(f"attempt={attempt_id!r}: no such attempt in this campaign (complete attempts: "
                          f"{', '.join(known[:10]) or 'none'}{' ...' if len(known) > 10 else ''})") from None
    if attempt.status != "complete":
        raise ConfigError(f"attempt={attempt_id}: it is {attempt.status}"
                          f"{' (' + attempt.invalid_reason + ')' if attempt.invalid_reason else ''}; only a "
                          f"complete attempt can be {what}")
    return attempt


def rescore(ledger: Any, attempt_id: str, reason: str | None, op: Operator, out: TextIO) -> bool:
    """Score `attempt_id` again through the operator's prompt; True when a score was recorded.

    A correction of the rater's own earlier score needs `reason`; an unscored attempt needs none."""
    attempt = _complete_attempt(ledger, attempt_id, "rescored")
    current = {s.rater: s for s in ledger.scores_for(attempt_id)}
    earlier = current.get(op.rater)
    if earlier is not None and not (reason or "").strip():
        raise ConfigError(f"attempt={attempt_id}: rater {op.rater!r} already scored it ({_score_text(earlier)}); "
                          "a correction needs reason=\"...\" (the earlier score stays in the history)")
    trial = ledger.trial(attempt.trial_id)
    print(f"Rescore attempt {attempt_id}  (alias {trial.alias}, scene {trial.scene_id})", file=out)
    for score in ledger.score_history(attempt_id):
        state = "superseded" if score.superseded_at else "current"
        print(f"  {state}: {_score_text(score)}", file=out)
    result = op.score(trial, None, None)
    if result is None:
        print("left as it was", file=out)
        return False
    ledger.record_score(attempt_id, op.rater, result.success, result.failure_mode, result.note,
                        reason=(reason or "").strip() if earlier is not None else None)
    now = next(s for s in ledger.scores_for(attempt_id) if s.rater == op.rater)
    print(f"recorded: {_score_text(now)}" + ("; the earlier score stays in the history" if earlier else ""), file=out)
    return True


def invalidate(ledger: Any, attempt_id: str, reason: str | None, rater: str, out: TextIO) -> None:
    """Declare a complete attempt invalid (e.g. the scene was set up wrong): the trial is re-run."""
    attempt = _complete_attempt(ledger, attempt_id, "declared invalid")
    if not (reason or "").strip():
        raise ConfigError(f"attempt={attempt_id}: invalidate=true needs reason=\"...\" (why the attempt does not count)")
    ledger.invalidate_attempt(attempt_id, (reason or "").strip(), rater)
    trial = ledger.trial(attempt.trial_id)
    print(f"attempt {attempt_id} (alias {trial.alias}) is now invalid: {ledger.attempt(attempt_id).invalid_reason}; "
          f"its scores stay in the history and `spabench run` will run trial {trial.trial_id} again", file=out)
