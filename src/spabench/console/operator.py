"""`operator=web`: the person at the bench works in the browser console instead of the terminal.

Same protocol logic as the terminal operator (checklists, reference images, failure modes, motion
pre-fill, stop kinds); only the I/O differs. The session's thread does all bench I/O itself: while
it waits for the operator (camera check, scene reset) it reads observations at the stream rate and
publishes them; during the rollout the control loop publishes through the ShelfPublisher observer.
The web server and the JPEG encoding run in the console's own process (console.process), which
the session starts, restarts if it dies, and talks to over console.link: stop buttons reach the
session's StopControl from that link's reader thread. The channel holds
that StopControl from the start of the session to its end, so the e-stop works in every phase: a
wait for the operator ends at once (the session then ends), a motion going home stops within a step.

While the arm moves (homing before a trial, the rollout and its homing after) a DeadMan watches the
bench page's requests (as they reach the session): none for `operator.console.deadman_s`, or the
console process ending (it carries the page's requests and e-stop), latches `console_lost` on the same
StopControl, so the arm holds exactly as after an e-stop, the attempt is invalid (`console_lost`) and
the session ends; nobody is left watching an arm that would otherwise run to the timer.

The session's terminal takes the terminal operator's keys too (`operator.keys`, on a terminal): space
or e e-stops in every phase, s and a stop or abort a running rollout, as the page's buttons do.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spabench.bench.bench import Bench
    from spabench.ledger.schema import TrialRow
    from spabench.operator.config import OperatorConfig
    from spabench.rollout.controls import StopControl
    from spabench.rollout.types import EpisodeResult
    from spabench.suite.model import SceneSpec

from spabench.console import live
from spabench.console.channel import BenchChannel, CommandRefused
from spabench.console.config import ConsoleConfig
from spabench.console.frames import ShelfPublisher
from spabench.console.process import ConsoleProcess
from spabench.console.views import public_trial
from spabench.operator.alignment import (
    ALIGNMENT_CAMERAS,
    AlignmentVerdict,
    alignment_event,
    override_needed,
    override_reason,
    reason_too_short,
)
from spabench.operator.auto import register_operator
from spabench.operator.base import RATER_RULE, Operator, Score, SessionView, person_rater
from spabench.operator.camera_check import CameraCheck
from spabench.operator.camera_check import problems as camera_problems
from spabench.operator.checklist import reference_attempt, reference_frame
from spabench.operator.progress import campaign_progress
from spabench.operator.scene_reference import RenderedReference, drawing_ahead, rendered_reference
from spabench.operator.status import LoopStats
from spabench.operator.terminal import KEYS, KeyReader
from spabench.suite.rules import (
    ESTOP_CAUSE_EFFECTS,
    ESTOP_CAUSE_LABELS,
    estop_cause_problem,
    estop_causes_for,
)
from spabench.suite.vocabulary import CAMERAS

OVERLAY_CAMERAS = ALIGNMENT_CAMERAS
UNWATCHED_S = 30.0   # the e-stop cause is asked until answered, or until no bench page polled for this long
# At the end the console stays up until a page fetched the final state (why the session ended), at
# most LINGER_S; not at all when no page asked for anything in the last WATCHING_S (nobody watches).
LINGER_S = 5.0
VIEWS_RECHECK_S = 0.5   # how often a scene reset looks for the twin's views the background worker is drawing
WATCHING_S = 10.0


class DeadMan:
    """A thread that latches `console_lost` on `controls` once no bench page request arrived (the
    channel's last_beat) for `deadman_s`, or at once when the console process ended (`console_down`:
    no page can reach the session until it is back). It wakes when the time is due, not on a fixed poll."""

    def __init__(self, channel: BenchChannel, controls: Any, deadman_s: float):
        self.channel, self.controls, self.deadman_s = channel, controls, deadman_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._down: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name="spabench-deadman", daemon=True)

    def __enter__(self) -> DeadMan:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(5.0)

    def console_down(self, down: dict[str, Any]) -> None:
        """The console process ended (`down`: its exit code, when the session noticed)."""
        self._down = down
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            down = self._down
            if down is not None:
                why = f"the console process ended (exit {down['exit_code']}): no bench page can reach the session"
                self.controls.request("console_lost", why, {"deadman_s": self.deadman_s, "console_process": down})
                return
            last = self.channel.last_beat
            now = time.monotonic()
            if now - last >= self.deadman_s:
                silent = now - last if math.isfinite(last) else None   # None: no page was ever heard from
                heard = {"silent_s": round(silent, 3), "last_heartbeat_wall_time": time.time() - silent} \
                    if silent is not None else {"silent_s": None, "last_heartbeat_wall_time": None}
                why = f"no request from the bench page for {self.deadman_s:g} s (operator.console.deadman_s)"
                self.controls.request("console_lost", why, {"deadman_s": self.deadman_s, **heard})
                return
            self._wake.wait(last + self.deadman_s - now)
            self._wake.clear()


class WebOperator(Operator):
    def __init__(self, config: OperatorConfig, bench: Bench | None = None, out=None, stdin=None):
        super().__init__(config)
        self.stdin = stdin
        self.keys: KeyReader | None = None   # the session terminal's keys (begin_session to close)
        self.console_cfg = ConsoleConfig.from_mapping(config.console)
        self.rater = person_rater(config.rater) or ""  # "" until given at the camera check
        self.bench, self.out = bench, out
        self.channel = BenchChannel()
        self.stats = LoopStats()
        self.publisher = ShelfPublisher(self.console_cfg)
        self.server: ConsoleProcess | None = None
        self.session: SessionView | None = None   # the rollout Session while one is attached
        self._events: list[tuple[str, dict]] = []
        self._cycle_s: list[float] = []
        self._last_ready: float | None = None
        self._said_from = 0   # the session's terminal lines from here on are shown when the session ends
        self.cameras: list[dict] = []
        self.references: dict[str, Path | None] = {}
        self.rendered: RenderedReference | None = None
        self._deadmen: list[DeadMan] = []     # armed while the arm moves
        self._console_events: list[dict] = []  # console process restarts, logged by the session's thread
        self._console_lock = threading.Lock()

    def show(self, text: str) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=True)

    # ---- session start: the console, then the camera check -----------------------------------
    def begin_session(self, session: SessionView) -> bool:
        self.session = session
        self.channel.controls = session.controls  # the e-stop works from the first page load
        self.server = server = ConsoleProcess(Path(session.campaign_dir), self.console_cfg, self.channel,
                                              self.publisher.shelf.name, suite=session.suite, rater=self.rater,
                                              out=self.out, on_down=self._console_down,
                                              on_up=self._console_up).start()
        base, _, query = server.url.partition("?")
        live.record(Path(session.campaign_dir), base + "bench" + (f"?{query}" if query else ""))
        self.show(f"console: open {server.url} (bench page: /bench, review: /review)")
        self._read_terminal_keys()
        return self._camera_check()

    def _console_down(self, down: dict[str, Any]) -> None:
        """The console process ended (its supervisor's thread): a moving arm holds at once."""
        with self._console_lock:
            deadmen = list(self._deadmen)
        for deadman in deadmen:
            deadman.console_down(down)

    def _console_up(self, event: dict[str, Any]) -> None:
        with self._console_lock:
            self._console_events.append(event)

    def _log_console_events(self) -> None:
        """Log the console process's restarts (on the session's thread: the ledger is its own)."""
        with self._console_lock:
            events, self._console_events = self._console_events, []
        session = self.session
        for event in events:
            if session is not None and session.ledger is not None:
                session.ledger.log_event(None, "console_restarted", event)

    @contextmanager
    def _armed(self, controls: StopControl) -> Iterator[None]:
        deadman = DeadMan(self.channel, controls, self.console_cfg.deadman_s)
        with deadman:
            with self._console_lock:
                self._deadmen.append(deadman)
            try:
                yield
            finally:
                with self._console_lock:
                    self._deadmen.remove(deadman)

    def _read_terminal_keys(self) -> None:
        if not (self.config and self.config.keys) or self.stdin is None:
            return
        reader = KeyReader(self.stdin, self._terminal_key)
        if reader.start():
            self.keys = reader
            self.show("terminal keys: space or e = e-stop (at any time); s = stop, a = abort (in a rollout)")

    def _terminal_key(self, key: str) -> None:
        """A key pressed in the session's terminal: the same stop path as the page's buttons (not a
        heartbeat of the page)."""
        kind = KEYS.get(key)
        if kind is None:
            return
        try:
            self.channel.stop(kind, f"terminal key {key!r}")
        except CommandRefused as exc:
            self.show(f"key {key!r}: {exc}")

    def _estop_ends_wait(self) -> bool:
        """True (and the page says so) when an e-stop came while the session waited for the operator."""
        if not self.channel.estopped():
            return False
        self.channel.live = {}
        self.channel.set_phase("ended", message=self.channel.controls.estop_message())
        return True

    def _observe(self) -> dict:
        self._log_console_events()
        if self.bench is None:
            raise RuntimeError("no bench is connected")   # shown on the page like a camera fault
        obs = self.bench.observe()
        self.publisher.publish(obs.images)
        return obs.images

    def _camera_check(self) -> bool:
        """Every camera live, not frozen and not slow (operator.camera_check), measured again every
        `camera_check_s`; the operator confirms once every camera passes, or ends the session."""
        check = CameraCheck(self.bench, self.console_cfg.camera_check_s)
        self.channel.set_phase("camera_check", cameras=check.measuring_rows(), measuring=True,
                               required=list(CAMERAS), message=(self.session.resume_note if self.session is not None else None) or "",
                               rater=self.rater, rater_rule=RATER_RULE)
        measured = False
        while True:
            started = time.monotonic()
            try:
                check.add(self._observe())
            except Exception as exc:  # a camera fault: shown, confirmation impossible
                check.add(None)
                self.channel.update(error=str(exc))
            rows = check.judged()
            if rows is not None:
                self.channel.update(cameras=rows, measuring=False, problems=camera_problems(rows),
                                    all_live=check.passes(rows))
                if not measured:
                    measured = True
                    self.cameras = rows
            cmd = self.channel.wait_command(max(0.0, check.period_s - (time.monotonic() - started)))
            if self._estop_ends_wait():
                return False
            if cmd is None:
                continue
            if cmd[0] == "end":
                self.channel.accept()
                self.channel.set_phase("ended", message="session ended at the camera check")
                return False
            if cmd[0] == "confirm_cameras":
                snap = self.channel.snapshot()
                if not snap.get("all_live"):
                    why = "; ".join(snap.get("problems") or []) or "not every camera is live"
                    self.channel.update(error=f"camera check failed: {why}. Fix it, or end the session")
                    continue
                name = person_rater(cmd[1].get("rater", self.rater))
                if name is None:   # asked once per session: every score of it carries this name
                    self.channel.update(error=f"enter the rater's name: {RATER_RULE}")
                    continue
                self.rater = name
                if self.server is not None:
                    self.server.push(rater=name)
                self.channel.accept(rater=name)
                self.cameras = snap["cameras"]
                session = self.session
                if session is not None and session.ledger is not None:
                    session.ledger.log_event(None, "camera_check", {"cameras": self.cameras, "rater": self.rater})
                return True

    # ---- per trial ------------------------------------------------------------------------------
    def wait_scene_ready(self, trial: TrialRow, scene: SceneSpec, checklist_text: str) -> bool:
        # the twin's scene is already staged by the run session (for every operator)
        self._said_from = max(0, len(self._said()) - 1)  # from the last trial's status line
        now = time.monotonic()
        if self._last_ready is not None:
            self._cycle_s.append(now - self._last_ready)
        session = self.session
        if session is None or session.ledger is None:
            raise RuntimeError("the browser operator's scene gate needs a session with its ledger (begin_session)")
        ledger, campaign_dir = session.ledger, Path(session.campaign_dir)
        first = reference_attempt(ledger, trial.evaluation_id) is None
        self.references = {} if first else {
            cam: reference_frame(ledger, campaign_dir, trial.evaluation_id, cam) for cam in OVERLAY_CAMERAS}
        self.publisher.set_references(self.references)
        self.rendered = self._rendered(scene)
        if self.server is not None:   # what the console process serves for this trial
            self.server.push(references={cam: (str(p) if p is not None else None) for cam, p in self.references.items()})
        self._push_rendered()
        card = {**public_trial(trial), "checklist": checklist_text.splitlines(),
                **campaign_progress(ledger, trial, self._cycle_s),
                "first_attempt": first,
                "references": {cam: p is not None for cam, p in self.references.items()},
                "rendered": self._rendered_card()}
        self.channel.set_phase("reset", card=card, threshold=self.console_cfg.alignment_threshold,
                               roi=self.console_cfg.workspace_roi, **self._comparison())
        self.publisher.score_live(True)   # the live alignment, only while the operator stages the scene
        try:
            return self._until_ready(card, first, scene)
        finally:
            self.publisher.score_live(False)

    def _rendered_card(self) -> dict[str, Any] | None:
        rendered = self.rendered
        return None if rendered is None else {"files": sorted(rendered.files()), "problem": rendered.problem}

    def _push_rendered(self) -> None:
        rendered = self.rendered
        if self.server is not None:
            self.server.push(rendered=None if rendered is None else {
                "files": {k: str(v) for k, v in rendered.files().items()}, "problem": rendered.problem})

    def _views_arrived(self, scene: SceneSpec, card: dict) -> None:
        """The background worker has drawn the twin's views the scene reset began without: show them."""
        rendered = self._rendered(scene)
        if rendered is None or rendered.drawing_views() or self.rendered is None:
            return
        self.rendered = rendered
        card["rendered"] = self._rendered_card()
        self._push_rendered()
        self.channel.update(card=card)

    def _until_ready(self, card: dict, first: bool, scene: SceneSpec) -> bool:
        """The scene reset's wait: live alignment shown until "ready" passes the gate, or the end."""
        period = 1.0 / self.console_cfg.stream_hz
        recheck = time.monotonic()
        while True:
            started = time.monotonic()
            if self.rendered is not None and self.rendered.drawing_views() and started >= recheck:
                recheck = started + VIEWS_RECHECK_S
                self._views_arrived(scene, card)
            try:
                self._observe()
            except Exception as exc:
                self.channel.update(error=str(exc))
            self.channel.live = {"alignment": dict(self.publisher.alignment)}
            cmd = self.channel.wait_command(max(0.0, period - (time.monotonic() - started)))
            if self._estop_ends_wait():
                return False
            if cmd is None:
                continue
            if cmd[0] == "end":
                self.channel.accept()
                self.channel.live = {}
                self.channel.set_phase("ended", message="session ended by the operator")
                return False
            if cmd[0] == "ready":
                has_reference = any(p is not None for p in self.references.values())  # none on a first attempt
                verdict = AlignmentVerdict(self.console_cfg.alignment_threshold, has_reference, self.publisher.score_now())
                given = cmd[1].get("override_reason")
                reason = override_reason(given)
                if verdict.below and reason is None:   # the gate: no rollout below the threshold without a reason
                    self.channel.update(error=reason_too_short(given) or override_needed(verdict), needs_override=True,
                                        alignment=dict(verdict.scores))
                    continue
                self._events = [("scene_alignment", alignment_event(
                    verdict, reason, roi=self.console_cfg.workspace_roi, shown=cmd[1].get("shown"), rater=self.rater,
                    note="first attempt of this evaluation: its first frame becomes the reference" if first else ""))]
                self._last_ready = time.monotonic()
                self.channel.accept()
                self.channel.live = {}
                self.channel.set_phase("homing", card=card)
                return True

    def _comparison(self) -> dict[str, Any]:
        """A comparison campaign's evidence so far (the object its terminal line was made from, by aliases
        only) for the scene reset and score phases; nothing in other campaigns and dry runs."""
        stopping = self.session.stopping if self.session is not None else None
        evidence = stopping.evidence if stopping is not None else None
        return {} if evidence is None else {"comparison": evidence.public()}

    def _rendered(self, scene: SceneSpec) -> RenderedReference | None:
        """The scene's rendered reference (twin views and placement diagram), drawn on its first
        placement in this campaign; None without a scene specification."""
        suite = self.session.suite if self.session is not None else None
        if scene is None or suite is None or self.session is None:
            return None
        home = self.bench.cfg.home_pose if self.bench is not None else None
        return rendered_reference(Path(self.session.campaign_dir), suite, scene, home=home,
                                  views=not drawing_ahead(self.session))

    def attempt_events(self) -> list[tuple[str, dict]]:
        events, self._events = self._events, []
        return events

    @contextmanager
    def during_homing(self, controls: StopControl) -> Iterator[None]:
        with self._armed(controls):
            yield

    @contextmanager
    def during_rollout(self, controls: StopControl) -> Iterator[None]:
        card = self.channel.snapshot().get("card")
        session_controls, self.channel.controls = self.channel.controls, controls
        stats = self.stats
        stats.reset()  # the previous rollout's numbers must not show as this one's

        def live():
            return {"time_left_s": round(stats.time_left_s, 2), "timer_s": stats.timer_s, "t": round(stats.t, 2),
                    "steps": stats.steps, "rate_hz": _num(stats.rate_hz), "latency_ms": _num(stats.last_latency_s * 1000),
                    "clamps": stats.clamps}

        self.channel.live_fn = live
        self.channel.set_phase("rollout", card=card)
        try:
            with self._armed(controls):
                yield
        finally:
            self.channel.controls = session_controls if session_controls is not None else controls
            self.channel.live_fn = None
            self.channel.set_phase("stopping", card=card)

    def observers(self) -> list[Any]:
        return [self.stats, self.publisher]

    def show_health(self, text: str, cooling: dict | None = None) -> None:
        """The bench page shows the cool-down (phase 'cooling'): the line the terminal printed, and while
        it waits the hottest motor, its temperature, the resume threshold, the estimate and the arm."""
        if self.channel.phase == "cooling":
            self.channel.update(message=text, cooling=cooling)
        else:
            self.channel.set_phase("cooling", message=text, cooling=cooling)

    def score(self, trial: TrialRow, result: EpisodeResult | None, prefill: Score | None = None) -> Score | None:
        form = {**public_trial(trial),
                "result": None if result is None else {"stop_reason": result.stop_reason,
                                                       "duration_s": round(result.duration_s, 2),
                                                       "steps": result.n_steps},
                "prefill": None if prefill is None else {"success": prefill.success,
                                                         "failure_mode": prefill.failure_mode, "note": prefill.note}}
        self.channel.set_phase("score", form=form, rater=self.rater, **self._comparison())
        modes = {m["name"] for m in form["failure_modes"]}
        while True:
            self._log_console_events()
            cmd = self.channel.wait_command(1.0)
            if self._estop_ends_wait():
                return None  # left unscored: `spabench score` or the review page
            if cmd is None:
                continue
            kind, data = cmd
            if kind == "leave":
                self.channel.accept()
                self.channel.set_phase("stopping", message="left unscored")
                return None
            success = data.get("success")
            mode = data.get("failure_mode") or None
            if not isinstance(success, bool) or (success and mode) or (mode is not None and mode not in modes):
                self.channel.update(error=f"score refused: success must be true/false; failure mode one of "
                                          f"{', '.join(sorted(modes))} (failures only)")
                continue
            note = str(data.get("note") or "")
            source = "operator"
            if prefill is not None and prefill.success == success and prefill.failure_mode == mode:
                source = "operator_confirmed_prefill"
                note = note or prefill.note
            self.channel.accept()   # the first page's score; another page's is refused, naming this one
            self.channel.set_phase("stopping", message="scored")
            return Score(success, mode, note, self.rater, source)

    def estop_cause(self, ended_rollout: bool, estop: dict) -> tuple[str, str] | None:
        """The bench page asks why the operator e-stopped (phase 'estop_cause'); None when no page
        has been watching for UNWATCHED_S (the cause is then not recorded, and the terminal says so)."""
        causes = estop_causes_for(ended_rollout)
        self.channel.live = {}
        self.channel.set_phase("estop_cause", during=estop.get("during") or "the session",
                               ended_rollout=ended_rollout,
                               causes=[{"name": c, "label": ESTOP_CAUSE_LABELS[c],
                                        "effect": ESTOP_CAUSE_EFFECTS[c] if ended_rollout else ""} for c in causes])
        self.show("e-stop: the bench page asks why (" + " / ".join(ESTOP_CAUSE_LABELS[c] for c in causes) + ")")
        while True:
            cmd = self.channel.wait_command(0.5)
            if cmd is None:
                if not self.channel.watched(UNWATCHED_S):
                    self.show(f"no bench page has been open for {UNWATCHED_S:g} s to say why: the e-stop's cause is "
                              "not recorded")
                    return None
                continue
            cause, text = str(cmd[1].get("cause") or ""), " ".join(str(cmd[1].get("text") or "").split())
            problem = estop_cause_problem(cause, text, ended_rollout)
            if problem:
                self.channel.update(error=problem)
                continue
            self.channel.accept()
            self.channel.set_phase("stopping", message=f"e-stop cause recorded: {ESTOP_CAUSE_LABELS[cause]}")
            return cause, text

    def _said(self) -> list[str]:
        """What the session's terminal was told so far (nothing without a session)."""
        return list(self.session.said) if self.session is not None else []

    def end_text(self) -> str:
        """Why the session ended and what to do next: the lines its terminal printed at the end (the
        e-stop's StopControl.estop_message, the held arm's instruction, "campaign complete", ...)."""
        said = self._said()[self._said_from:]
        shown = self.channel.snapshot().get("message") or ""
        if self.channel.estopped():
            first = self.channel.controls.estop_message()
        else:
            first = shown if self.channel.phase == "ended" and shown else ""
        lines = ([first] if first else []) + [line for line in said if line != first]  # the reason first
        return "\n".join(lines) or "session closed"

    def close(self) -> None:
        if self.keys is not None:   # the terminal as it was
            self.keys.stop()
            self.keys = None
        # the page shows the terminal's closing lines: the reason and, after an e-stop, the held arm
        self.channel.set_phase("ended", message=self.end_text())
        if self.session is not None:
            live.clear(Path(self.session.campaign_dir))   # review consoles stop sending people here
            with contextlib.suppress(Exception):          # a restart the session has not logged yet
                self._log_console_events()
        if self.server is not None:
            # the page shows why the session ended, not "console unreachable"
            self.channel.wait_seen(LINGER_S, WATCHING_S)
            self.server.stop()
            self.server = None
        self.publisher.close()


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), 2)


@register_operator("web")
def _web(config: OperatorConfig, bench: Bench | None = None, stdin=None, stdout=None) -> WebOperator:
    return WebOperator(config, bench=bench, out=stdout, stdin=stdin or sys.stdin)
