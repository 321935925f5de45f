"""Offline review and scoring: the attempt list, one attempt's recording, scores with history.

Everything here reads the ledger and the episode folders; the pages get plain JSON (no policy
names: see views.Redactor). In second-rater (blind) mode nothing about another rater's score leaves
the server: not the score, not the history, not the ledger's score events, and neither does what
would lean the second rater one way: how the attempt was stopped (an operator's stop says what the
operator judged) and the motion pre-fill.

A score is saved against the version of the rater's scores its page was shown (the ledger's
score_version): a page that is out of date is refused (ScoreConflict) and told what was saved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from spabench.console.views import public_trial
from spabench.errors import SpabenchError
from spabench.ledger import ScoreConflict
from spabench.operator.base import RATER_RULE, person_rater
from spabench.operator.checklist import checklist, reference_frame
from spabench.suite.vocabulary import CAMERAS, JOINTS

# Hidden from a blind second rater: the events of the operator's stop and the motion pre-fill, and
# the stop reason wherever it is written (attempt row, episode_end, attempt_finished, the rollout
# summary's detail: "operator_stop by console button").
BLIND_EVENT_KINDS = frozenset({"stop_requested", "score_prefill"})
BLIND_KEYS = ("stop_reason", "request", "detail")


def _other_raters_score(event: dict, rater: str) -> bool:
    """A ledger event that tells something about another rater's score (the motion pre-fill does not)."""
    kind = event["kind"]
    return (kind.startswith(("score", "rescore")) and kind != "score_prefill"
            and event["payload"].get("rater") != rater)


MAX_POINTS = 600  # joint-state samples sent to the timeline


class ReviewError(SpabenchError):
    pass


class ReviewConflict(ReviewError):
    """The rater's scores of the attempt changed since the page was loaded: nothing was saved.
    `data` is what the page shows (the score saved meanwhile, the new version, scores and history)."""

    def __init__(self, message: str, data: dict):
        super().__init__(message)
        self.data = data


def _blinded(event: dict) -> dict | None:
    """An event as a blind second rater sees it (None: not at all)."""
    if event.get("kind") in BLIND_EVENT_KINDS:
        return None
    out = {k: v for k, v in event.items() if k not in BLIND_KEYS}
    if isinstance(out.get("payload"), dict):
        out["payload"] = {k: v for k, v in out["payload"].items() if k not in BLIND_KEYS}
    return out


def _blind_events(events: list[dict]) -> list[dict]:
    return [e for e in map(_blinded, events) if e is not None]


def _score_dict(row: Any) -> dict:
    data = dataclasses.asdict(row) if dataclasses.is_dataclass(row) and not isinstance(row, type) else dict(row)
    return {k: data.get(k) for k in ("rater", "success", "failure_mode", "note", "scored_at", "reason", "superseded_at")}


def current_scores(ledger: Any, attempt_id: str) -> list[dict]:
    return [_score_dict(s) for s in ledger.scores_for(attempt_id)]


def score_history(ledger: Any, attempt_id: str) -> list[dict]:
    return [_score_dict(s) for s in ledger.score_history(attempt_id)]


def _visible(scores: list[dict], rater: str, blind: bool) -> list[dict]:
    return [s for s in scores if s["rater"] == rater] if blind else scores


def _in_view(trial: Any, task: str, condition: str, alias: str) -> bool:
    """Whether a trial is in the attempt list's view (each filter empty: any)."""
    return all(not want or got == want for want, got in
               ((task, trial.task), (condition, trial.condition), (alias, trial.alias)))


def list_attempts(ledger: Any, *, rater: str, blind: bool, unscored: bool = False, task: str = "",
                  condition: str = "", alias: str = "") -> list[dict]:
    """Finished attempts in plan order, filtered. `unscored`: no score yet (by `rater` in blind mode)."""
    out = []
    for trial in ledger.trials():
        if not _in_view(trial, task, condition, alias):
            continue
        for attempt in ledger.attempts_for(trial.trial_id):
            if attempt.status not in ("complete", "invalid"):
                continue
            scores = _visible(current_scores(ledger, attempt.attempt_id), rater, blind)
            if unscored and (attempt.status != "complete" or scores):
                continue
            out.append({"attempt_id": attempt.attempt_id, "trial_id": trial.trial_id, "alias": trial.alias,
                        "task": trial.task, "condition": trial.condition, "scene_id": trial.scene_id,
                        "status": attempt.status, "stop_reason": None if blind else attempt.stop_reason,
                        "invalid_reason": attempt.invalid_reason, "scores": scores,
                        "alignment": attempt.alignment, "alignment_override": attempt.alignment_override})
    return out


LIST_FILTERS = ("task", "condition", "alias")   # the attempt list's filters, kept from list to attempt


def filter_options(ledger: Any) -> dict[str, list[str]]:
    trials = ledger.trials()
    return {"task": sorted({t.task for t in trials}), "condition": sorted({t.condition for t in trials}),
            "alias": sorted({t.alias for t in trials})}


def _downsample(n: int) -> np.ndarray:
    return np.arange(n) if n <= MAX_POINTS else np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(int))


def _clean(a: np.ndarray) -> list:
    return [[None if not np.isfinite(v) else round(float(v), 3) for v in row] for row in np.asarray(a, dtype=float)]


def episode_folder(campaign_dir: Path, attempt: Any) -> Path | None:
    if not attempt.episode_path:
        return None
    from spabench.record.recorder import resolve_episode_dir

    path = Path(attempt.episode_path)
    path = path if path.is_absolute() else campaign_dir / path
    try:
        return resolve_episode_dir(path)
    except Exception:  # no folder (final or .partial) on disk
        return None


def video_file(folder: Path, camera: str) -> Path | None:
    """The MP4 the page plays for one camera of an episode: cam_<camera>.mp4, or for an imported
    episode the dataset's shared file its source.json names. None: there is none (yet)."""
    import json

    from spabench.record.reader import SOURCE_JSON
    from spabench.record.recorder import video_name

    source = folder / SOURCE_JSON
    if source.is_file():
        video = json.loads(source.read_text()).get("videos", {}).get(camera)
        path = (folder / video["file"]).resolve() if video else None
    else:
        path = folder / video_name(camera) if camera in CAMERAS else None
    return path if path is not None and path.is_file() else None


def attempt_detail(ledger: Any, campaign_dir: Path, suite: Any, attempt_id: str, *, rater: str, blind: bool) -> dict:
    try:
        attempt = ledger.attempt(attempt_id)
    except Exception:
        raise ReviewError(f"no attempt {attempt_id!r} in this campaign") from None
    trial = ledger.trial(attempt.trial_id)
    data: dict[str, Any] = {"attempt_id": attempt_id, "status": attempt.status,
                            "stop_reason": None if blind else attempt.stop_reason,
                            "invalid_reason": attempt.invalid_reason, "started_at": attempt.started_at,
                            "ended_at": attempt.ended_at, "trial": public_trial(trial), "rater": rater, "blind": blind}
    scene = None
    if suite is not None:
        try:
            scene = suite.scene(trial.scene_id)
        except Exception:
            scene = None
    refs = {cam: reference_frame(ledger, campaign_dir, trial.evaluation_id, cam) for cam in ("overhead", "middle")}
    ref = refs["overhead"] or refs["middle"]
    data["checklist"] = checklist(scene, suite, ref, instruction=trial.instruction).splitlines() if scene is not None \
        else [f"Scene {trial.scene_id} (no scene specification loaded)"]
    ledger_events = ledger.events(attempt_id)
    if blind:
        ledger_events = _blind_events([e for e in ledger_events if not _other_raters_score(e, rater)])
    data["ledger_events"] = ledger_events
    align = [e["payload"] for e in ledger_events if e["kind"] == "scene_alignment"]
    data["scene_alignment"] = align[-1] if align else None
    data["alignment"] = {"value": attempt.alignment, "override_reason": attempt.alignment_override}
    prefill = [e["payload"] for e in ledger_events if e["kind"] == "score_prefill"]
    data["prefill"] = {k: prefill[-1].get(k) for k in ("success", "failure_mode", "note")} if prefill else None
    data["scores"] = _visible(current_scores(ledger, attempt_id), rater, blind)
    data["history"] = _visible(score_history(ledger, attempt_id), rater, blind)
    data["version"] = ledger.score_version(attempt_id, rater)
    data["episode"] = _episode(campaign_dir, attempt)
    if blind and data["episode"] is not None:
        data["episode"]["events"] = _blind_events(data["episode"]["events"])
    data["references"] = {cam: path is not None for cam, path in refs.items()}
    return data


def _episode(campaign_dir: Path, attempt: Any) -> dict | None:
    folder = episode_folder(campaign_dir, attempt)
    if folder is None:
        return None
    from spabench.record.reader import EpisodeReader

    with EpisodeReader(folder) as ep:
        attrs = ep.attrs
        n = len(ep)
        idx = _downsample(n)
        ts = ep.timestamps
        # an imported episode's cameras are the dataset's own; its videos are spans of shared MP4s
        # (offset_s, end_s: where the page plays this episode; a native one plays its whole file)
        cams = [c for c in ep.cameras if c in CAMERAS or ep.imported]
        videos = {}
        for cam in cams:
            fi = ep.frame_index(cam)
            start, end = ep.video_span(cam)
            videos[cam] = {"available": ep.video_path(cam).exists(), "frames": int((fi >= 0).sum()),
                           "offset_s": start, "end_s": end if end != float("inf") else None}
        return {"steps": n, "fps": float(attrs.get("control_hz", 30.0)), "timer_s": attrs.get("timer_s"),
                "complete": ep.complete, "partial": ep.partial, "cameras": cams, "videos": videos,
                "t": [round(float(x), 4) for x in ts[idx]], "joints": list(JOINTS),
                "state": _clean(ep.states[idx]) if n else [],
                "frame_index": {c: [int(v) for v in ep.frame_index(c)[idx]] for c in cams},
                "events": [e for e in ep.events() if e.get("kind") not in ("frame_dropped",)][:500],
                "duration_s": round(float(ts[-1]), 3) if n else 0.0}


def next_unscored(ledger: Any, attempt_id: str, *, rater: str, blind: bool, task: str = "", condition: str = "",
                  alias: str = "") -> str | None:
    """The next attempt left to score after `attempt_id` in plan order (then from the start), within the
    list's filters (task, condition, alias; empty: any): without any score, or in blind mode without
    one by `rater`. None when every attempt in view is scored."""
    trials = {t.trial_id: t for t in ledger.trials()}

    todo = [a for a in ledger.unscored_attempts(rater if blind else None)
            if a.attempt_id != attempt_id and a.trial_id in trials
            and _in_view(trials[a.trial_id], task, condition, alias)]
    if not todo:
        return None
    here = ledger.attempt(attempt_id)

    def place(trial_id: str, n: int) -> tuple[int, int]:
        t = trials.get(trial_id)
        return (t.order if t is not None else -1, n)

    later = [a for a in todo if place(a.trial_id, a.n) > place(here.trial_id, here.n)]
    return (later or todo)[0].attempt_id


def _own_scores(ledger: Any, attempt_id: str, rater: str) -> dict:
    return {"scores": _visible(current_scores(ledger, attempt_id), rater, True),
            "history": _visible(score_history(ledger, attempt_id), rater, True),
            "version": ledger.score_version(attempt_id, rater)}


def submit_score(ledger: Any, attempt_id: str, rater: str, success: Any, failure_mode: str | None, note: str,
                 reason: str | None, version: Any, *, blind: bool = False,
                 view: dict[str, str] | None = None) -> dict:
    """Score (or, with a reason, rescore) an attempt as `rater`, against the `version` of the rater's
    scores the page was shown. A rescore keeps the earlier score in the history (the ledger's
    score-history API); a stale version saves nothing (ReviewConflict, with the score saved meanwhile).
    `view`: the list's filters the rater came from (task, condition, alias), which "next unscored" keeps."""
    if not isinstance(success, bool):
        raise ReviewError("success must be true or false")
    given = (rater or "").strip()
    if not given:
        raise ReviewError("rater is missing: enter your rater name")
    rater = person_rater(given) or ""
    if not rater:   # every score carries a name a person gave
        raise ReviewError(f"rater {given!r} names no person: enter {RATER_RULE}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ReviewError(f"version must be the count of your scores of this attempt that the page showed "
                          f"(an int >= 0), got {version!r}: reload the attempt")
    own = [s for s in current_scores(ledger, attempt_id) if s["rater"] == rater]
    reason = (reason or "").strip() or None
    try:
        if own and not reason and ledger.score_version(attempt_id, rater) == version:
            raise ReviewError(f"attempt {attempt_id} is already scored by {rater!r}: a rescore needs a reason")
        ledger.record_score(attempt_id, rater, success, failure_mode or None, note or "",
                            reason=reason if own else None, expect_version=version)
    except ScoreConflict as exc:
        saved = _score_dict(exc.current) if exc.current is not None else None
        what = (f"{saved['rater']} saved {_score_text(saved)} at {saved['scored_at']}" if saved
                else f"{rater}'s score was changed")
        raise ReviewConflict(f"not saved: while this page was open, {what} (another tab or console). "
                             "Look at it, then re-score if you mean to replace it (a rescore needs a reason)",
                             {"conflict": {"score": saved, "version": exc.version},
                              **_own_scores(ledger, attempt_id, rater)}) from None
    return {**_own_scores(ledger, attempt_id, rater),
            "next_unscored": next_unscored(ledger, attempt_id, rater=rater, blind=blind, **(view or {}))}


def _score_text(score: dict) -> str:
    if score["success"]:
        return "success"
    return "failure" + (f" ({score['failure_mode']})" if score["failure_mode"] else "")


def frame_at(campaign_dir: Path, attempt: Any, camera: str, which: str) -> np.ndarray:
    """The first or last recorded frame of one camera."""
    folder = episode_folder(campaign_dir, attempt)
    if folder is None:
        raise ReviewError(f"attempt {attempt.attempt_id} has no recording")
    from spabench.record.reader import EpisodeReader

    with EpisodeReader(folder) as ep:
        if which == "first":
            return ep.first_frame(camera)
        last = None
        for frame in ep.iter_frames(camera):
            last = frame
        if last is None:
            raise ReviewError(f"{ep.video_path(camera)}: no frame")
        return last
