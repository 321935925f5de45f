"""`spabench score campaign_dir=DIR`: score recorded, unscored attempts after the session.

A second rater (`second_rater=true operator.rater=NAME`) scores blind the complete attempts another
rater scored and NAME has not, as the review page's blind mode does: the trial by its alias, the
episode, and the prompt; no other rater's score, no stop reason, no motion pre-fill. Each score is
saved against the version of NAME's scores read before the prompt (the ledger's score_version),
so a score saved meanwhile from a console tab is never replaced. The report's rater agreement
(kappa) reads both ratings.

Corrections (operator/corrections.py): `attempt=ID reason="..."` scores one attempt again (the
earlier score stays in the history); `attempt=ID invalidate=true reason="..."` declares a complete
attempt invalid, so that `run` re-runs its trial.

For each complete attempt without a score (plan order) it shows the trial, the episode folder and
its videos, the motion pre-fill for no-intervention / no-movement trials (recomputed from the
recorded joints when the session logged none), then the terminal score prompt. Enter 'l' to leave
an attempt unscored; end of input stops.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from spabench.config import CampaignInput, opt
from spabench.errors import ConfigError
from spabench.operator.base import Score, motion_prefill
from spabench.operator.config import OperatorConfig, operator_group
from spabench.operator.terminal import TerminalOperator
from spabench.paths import campaign_folder
from spabench.suite.config import suite_group


@dataclass
class ScoreConfig(CampaignInput):
    """`spabench score`."""

    command: ClassVar[str] = "score"

    attempt: str | None = opt(None, 'one attempt to rescore (or invalidate), e.g. attempt=E0001-P2-a1')
    reason: str | None = opt(None, "why the score is corrected / the attempt is invalid (required with attempt=)")
    invalidate: bool = opt(False, 'declare the complete attempt invalid (its trial is re-run)')
    second_rater: bool = opt(False, "score blind, as operator.rater, the attempts another rater scored and you have not (their scores, stop reason and motion pre-fill hidden): the report's rater agreement")
    operator: Any = operator_group()
    suite: Any = suite_group()


def _prefill(ledger: Any, campaign_dir: Path, attempt: Any, trial: Any, rater: str) -> Score | None:
    for event in reversed(ledger.events(attempt.attempt_id, "score_prefill")):
        p = event["payload"]
        return Score(bool(p["success"]), p.get("failure_mode"), p.get("note", ""), rater, "motion_prefill")
    if not attempt.episode_path:
        return None
    try:
        from spabench.record.reader import EpisodeReader
        from spabench.suite.motion import motion_onset

        with EpisodeReader(campaign_dir / attempt.episode_path) as ep:
            onset = motion_onset(ep.states)
    except Exception:  # no readable recording: no pre-fill, the person decides
        return None
    return motion_prefill(trial.condition, onset is not None, rater)


def episode_line(folder: Path) -> str:
    """Where the person finds the attempt's videos: cam_<camera>.mp4 in the episode folder, or for an
    imported episode each camera's shared MP4 and the span to play in it."""
    try:
        from spabench.record.reader import EpisodeReader

        with EpisodeReader(folder) as ep:
            if ep.imported:
                spans = [f"{cam}: {ep.video_path(cam)} from {ep.video_span(cam)[0]:.3f} s to "
                         f"{ep.video_span(cam)[1]:.3f} s" for cam in ep.cameras]
                return f"Episode: {folder} (imported)\n  videos: " + "\n          ".join(spans)
    except Exception:  # no readable recording: the folder is what the person is told
        pass
    return f"Episode: {folder}  videos: {folder}/cam_<camera>.mp4"


def _correct(ledger: Any, attempt_id: str, reason: Any, invalid: bool, op: TerminalOperator, out) -> int:
    """`attempt=ID [reason=...]` rescores one attempt; `invalidate=true attempt=ID reason=...` voids it."""
    from spabench.ledger import LedgerError
    from spabench.operator.corrections import invalidate, rescore

    if not attempt_id:
        print("error: score: reason=/invalidate= need attempt=<attempt id> (e.g. attempt=E0001-P2-a1)", file=out)
        return 2
    reason = None if reason is None else str(reason)
    try:
        if invalid:
            invalidate(ledger, attempt_id, reason, op.rater, out)
        else:
            rescore(ledger, attempt_id, reason, op, out)
    except (ConfigError, LedgerError) as exc:
        print(f"error: {exc}", file=out)
        return 2
    return 0


def second_rating_todo(ledger: Any, rater: str) -> tuple[list[Any], int]:
    """(the complete attempts another rater scored and `rater` has not, in plan order; how many complete
    attempts nobody scored yet). The same ledger calls as the review page's blind mode."""
    todo, unrated = [], 0
    for attempt in ledger.unscored_attempts(rater):
        if any(s.rater != rater for s in ledger.scores_for(attempt.attempt_id)):
            todo.append(attempt)
        else:
            unrated += 1
    return todo, unrated


def _second_rating(ledger: Any, campaign_dir: Path, op: TerminalOperator, out) -> int:
    """Score blind, as `op.rater`, what another rater scored (see the module docstring)."""
    from spabench.ledger import ScoreConflict

    rater = op.rater
    todo, unrated = second_rating_todo(ledger, rater)
    op.show(f"Second rater {rater}: {len(todo)} attempt(s) scored by another rater and not by you in {campaign_dir}; "
            "scoring blind (no other score, stop reason or pre-fill shown)")
    scored = skipped = 0
    for attempt in todo:
        trial = ledger.trial(attempt.trial_id)
        folder = campaign_dir / (attempt.episode_path or f"episodes/{attempt.attempt_id}")
        op.show(f"\nAttempt {attempt.attempt_id}  (alias {trial.alias}, scene {trial.scene_id})")
        op.show(episode_line(folder))
        version = ledger.score_version(attempt.attempt_id, rater)
        result = op.score(trial, None, None)
        if result is None:
            skipped += 1
            continue
        try:
            ledger.record_score(attempt.attempt_id, rater, result.success, result.failure_mode, result.note,
                                expect_version=version)
        except ScoreConflict:
            op.show(f"not saved: {rater} scored {attempt.attempt_id} elsewhere meanwhile (a console tab); "
                    "that score stands")
            skipped += 1
            continue
        scored += 1
    op.show(f"second-rated {scored}, left {skipped}"
            + (f"; {unrated} complete attempt(s) nobody scored yet are left for the first rating "
               "(spabench score campaign=DIR)" if unrated else ""))
    return 0


def score(cfg: ScoreConfig, stdin=None, stdout=None) -> int:
    """Entry point of `spabench score`. Returns the exit code (0; 2 on a bad campaign folder)."""
    out = stdout or sys.stdout
    op_cfg: OperatorConfig = cfg.need("operator")
    from spabench.ledger import Ledger

    try:
        campaign_dir = campaign_folder(cfg.campaign_dir, "score")
        ledger = Ledger.open(campaign_dir)
    except ConfigError as exc:
        print(f"error: {exc}", file=out)
        return 2
    # a person scores (operator=terminal is the preset), under the name they give (asked here unless
    # operator.rater=NAME gives it): stored with every score, and the agreement statistics' raters.
    op = TerminalOperator(op_cfg, stdin=stdin, stdout=out)
    if op_cfg.type == "auto":  # the twin's evaluator name is never a person's
        op.rater = ""
    if not op.ask_rater():
        ledger.close()
        print("score: no rater name given; nothing scored", file=out)
        return 2
    rater = op.rater
    attempt_id, reason, invalid = cfg.attempt, cfg.reason, cfg.invalidate
    if cfg.second_rater:
        try:
            if attempt_id or invalid or reason:
                print("error: score: second_rater=true scores the attempts another rater scored; it takes no "
                      "attempt=, reason= or invalidate= (a correction of your own score: leave second_rater out)",
                      file=out)
                return 2
            return _second_rating(ledger, campaign_dir, op, out)
        finally:
            ledger.close()
    if attempt_id or invalid or reason:
        try:
            return _correct(ledger, str(attempt_id or ""), reason, bool(invalid), op, out)
        finally:
            ledger.close()
    scored = skipped = 0
    try:
        attempts = ledger.unscored_attempts()
        op.show(f"{len(attempts)} unscored attempt(s) in {campaign_dir}")
        for attempt in attempts:
            trial = ledger.trial(attempt.trial_id)
            folder = campaign_dir / (attempt.episode_path or f"episodes/{attempt.attempt_id}")
            op.show(f"\nAttempt {attempt.attempt_id}  (alias {trial.alias}, scene {trial.scene_id})")
            op.show(episode_line(folder))
            prefill = _prefill(ledger, campaign_dir, attempt, trial, rater)
            result = op.score(trial, None, prefill)
            if result is None:
                skipped += 1
                continue
            ledger.record_score(attempt.attempt_id, result.rater, result.success, result.failure_mode, result.note)
            scored += 1
        op.show(f"scored {scored}, left {skipped} unscored")
    finally:
        ledger.close()
    return 0
