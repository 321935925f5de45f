"""The operator at the bench, in a terminal.

Before each trial: the reset checklist, the reference image and the scene's rendered reference
(spabench.operator.scene_reference), then a "scene ready" gate (Enter; v opens the reference images
in the desktop viewer when there is a display; q ends the campaign). During the rollout: a live status line (time left, achieved loop rate, last policy
latency) and single keys read without Enter (termios cbreak): s = stop (valid), a = abort (invalid),
space or e = e-stop (hold, no motion). When stdin is not a terminal no keys are read. After the
rollout: the score prompt (success y/n, failure mode by number, note). While the arm goes home
before a trial only the e-stop keys are read (s and a end a rollout; none is running yet).

In a session (after begin_session) the short answers (the gate, y/n, the failure number) are read
key by key on a terminal, so space or e as the first key e-stops at once: space+Enter at the gate
never starts a rollout. The note is free text: there space and e are letters.
"""

from __future__ import annotations

import math
import os
import select
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from spabench.ledger.schema import TrialRow
    from spabench.operator.config import OperatorConfig
    from spabench.rollout.controls import StopControl
    from spabench.rollout.types import EpisodeResult
    from spabench.suite.model import SceneSpec

from spabench.operator.alignment import (
    ALIGNMENT_CAMERAS,
    AlignmentVerdict,
    alignment_event,
    alignment_score,
    alignment_settings,
    load_rgb,
    override_needed,
    override_reason,
    reason_too_short,
)
from spabench.operator.base import RATER_RULE, Operator, Score, SessionView, person_rater
from spabench.operator.camera_check import CameraCheck, problems
from spabench.operator.checklist import reference_attempt, reference_frame
from spabench.operator.failure_modes import FAILURE_MODE_LABELS, FAILURE_MODE_NUMBERS, failure_mode_choices
from spabench.operator.progress import campaign_progress, progress_text
from spabench.operator.status import LoopStats
from spabench.suite.rules import (
    ESTOP_CAUSE_EFFECTS,
    ESTOP_CAUSE_LABELS,
    estop_cause_problem,
    estop_causes_for,
)
from spabench.suite.vocabulary import CAMERAS

KEYS = {"s": "operator_stop", "a": "abort", " ": "estop", "e": "estop"}
ESTOP_KEYS = {k: v for k, v in KEYS.items() if v == "estop"}
BACKSPACE = ("\x7f", "\b")


class EStopAtPrompt(Exception):
    """An e-stop key answered a prompt (the session's StopControl has the e-stop)."""


class KeyReader:
    """Reads single keys from a tty in cbreak mode on a background thread; restores the tty after."""

    def __init__(self, stream: TextIO, on_key) -> None:
        self.stream, self.on_key = stream, on_key
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved: list[Any] | None = None   # termios attributes to restore
        self._fd: int | None = None

    @staticmethod
    def available(stream: TextIO) -> bool:
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    def start(self) -> bool:
        if not self.available(self.stream):
            return False
        import termios
        import tty

        self._fd = self.stream.fileno()
        self._saved = termios.tcgetattr(self._fd)
        tty.setcbreak(self._fd)
        self._thread = threading.Thread(target=self._run, name="spabench-keys", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        fd = self._fd
        if fd is None:   # start() sets it before the thread runs
            return
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(fd, 1)
            except OSError:
                return
            if data:
                self.on_key(data.decode(errors="ignore").lower())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        if self._saved is not None and self._fd is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            termios.tcflush(self._fd, termios.TCIFLUSH)  # keys pressed late must not answer a prompt
            self._saved = None


KEY_LEGEND = "[s]top [a]bort [space/e] e-stop"


def loop_text(stats: LoopStats, label: str = "") -> str:
    rate = stats.rate_hz
    lat = stats.last_latency_s
    return (f"{label}  {stats.time_left_s:5.1f} s left | {'--' if math.isnan(rate) else f'{rate:5.1f}'} Hz | "
            f"policy {'--' if math.isnan(lat) else f'{lat * 1000:4.0f}'} ms | chunk {stats.chunk_id} | "
            f"clamps {stats.clamps}")


def status_text(stats: LoopStats, label: str = "") -> str:
    return f"{loop_text(stats, label)} | {KEY_LEGEND}"


def status_renderable(stats: LoopStats, label: str = ""):
    """The live status: loop figures, then the key legend on a line of its own (each fits 80
    columns). A rich Text, not markup: "[s]" and "[a]" would otherwise be read as style tags."""
    from rich.text import Text

    return Text(f"{loop_text(stats, label)}\n{KEY_LEGEND}")


def desktop_display() -> bool:
    """Whether a desktop viewer can show an image here: an X11 or Wayland display, or macOS/Windows."""
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_images(paths: list[Path]) -> str:
    """Open each image in the desktop's viewer (the standard library's webbrowser: xdg-open, open,
    $BROWSER); returns what to tell the operator."""
    import webbrowser

    failed = [p for p in paths if not webbrowser.open(Path(p).resolve().as_uri())]
    if failed:
        return "Could not start a viewer; open " + ", ".join(str(p) for p in failed) + " yourself."
    return "Opened " + ", ".join(Path(p).name for p in paths) + " in the desktop viewer."

TERMINAL_WIDTH = 79   # an 80-column terminal, without writing into its last column (some wrap there)
NOT_HERE = " (n/a)"


def _cell(choice: dict, width: int) -> str:
    """ " 4) Label", or " 4) Label (n/a)" for a mode that does not apply; the label is cut to fit."""
    head, tail = f"{choice['number']:2d}) ", "" if choice["applicable"] else NOT_HERE
    room = width - len(head) - len(tail)
    label = choice["label"] if len(choice["label"]) <= room else choice["label"][: room - 1] + "…"
    return f"{head}{label}{tail}".ljust(width)


def failure_mode_lines(choices: list[dict], width: int = TERMINAL_WIDTH) -> list[str]:
    """The suite-wide failure-mode list in two columns, numbers running across then down (1 2 / 3 4
    / ...), with a legend: ceil(n / 2) + 1 lines, none wider than `width`."""
    left = [c for i, c in enumerate(choices) if i % 2 == 0]
    right = [c for i, c in enumerate(choices) if i % 2 == 1]
    lw = min(max(len(_cell(c, 99).rstrip()) for c in left), (width - 2) // 2)
    rw = width - 2 - lw
    lines = [(_cell(a, lw) + "  " + (_cell(b, rw) if b is not None else "")).rstrip()
             for a, b in zip(left, right + [None] * (len(left) - len(right)), strict=True)]
    if not all(c["applicable"] for c in choices):
        lines.append(f"{NOT_HERE.strip()} = does not apply to this trial (the numbers are the same for every task)")
    return lines


class TerminalOperator(Operator):
    def __init__(self, config: OperatorConfig | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 bench: Any = None):
        super().__init__(config)
        self.bench = bench
        self.session: SessionView | None = None
        self._events: list[tuple[str, dict]] = []
        self._cycle_s: list[float] = []           # "scene ready" to "scene ready", this session
        self._last_ready: float | None = None
        self.inp = stdin or sys.stdin
        self.out = stdout or sys.stdout
        self.rater = person_rater(config.rater if config else "") or ""   # "" until the person gives it
        self.use_keys = config.keys if config else True
        self.use_status = config.status_line if config else True
        self.stats = LoopStats()
        self.label = ""
        self.controls: Any = None   # the session's StopControl (begin_session): e-stop keys at the prompts

    # ---- text I/O ---------------------------------------------------------------------------
    def show(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def ask(self, prompt: str) -> str | None:
        """One line from the operator; None at end of input."""
        line = self._line(prompt)
        return None if line is None else line.strip()

    def _line(self, prompt: str) -> str | None:
        self.out.write(prompt)
        self.out.flush()
        line = self.inp.readline()
        if not line:
            return None
        return line.rstrip("\r\n")

    def _estop(self, key: str) -> None:
        self.controls.request("estop", f"key {key!r}")
        raise EStopAtPrompt(key)

    def answer(self, prompt: str) -> str | None:
        """A short answer (Enter, a letter, a number): the e-stop keys as its first key e-stop (raises
        EStopAtPrompt) in a session; None at end of input. On a terminal it is read key by key. Only
        spaces are not an empty answer (space is an e-stop key: it never means Enter)."""
        if self.controls is not None and self.use_keys and KeyReader.available(self.inp):
            return self._typed(prompt)
        line = self._line(prompt)
        if line is None:
            return None
        if self.controls is not None and line[:1].lower() in ESTOP_KEYS:
            self._estop(line[:1].lower())
        return line.strip() or line

    def _typed(self, prompt: str) -> str | None:
        """The answer typed in cbreak mode (echoed here; backspace works). Entering cbreak mode drops
        keys typed before the prompt."""
        import termios
        import tty

        fd = self.inp.fileno()
        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
        try:
            self.out.write(prompt)
            self.out.flush()
            typed = ""
            while True:
                key = os.read(fd, 1).decode(errors="ignore")
                if not key:
                    return None
                if key in ("\r", "\n"):
                    self.show("")
                    return typed.strip()
                if not typed and key.lower() in ESTOP_KEYS:
                    self.show("")
                    self._estop(key.lower())
                if key in BACKSPACE:
                    if typed:
                        typed = typed[:-1]
                        self.out.write("\b \b")
                elif key.isprintable():
                    typed += key
                    self.out.write(key)
                self.out.flush()
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    # ---- session start ------------------------------------------------------------------------
    def begin_session(self, session: SessionView) -> bool:
        self.session = session      # its campaign folder and suite: the scenes' rendered references
        self.controls = session.controls
        return self.ask_rater() and self.camera_check()

    def camera_check(self) -> bool:
        """The browser's session-start camera check (operator.camera_check), before the first trial:
        a frozen, slow or missing camera is refused by name. As in the browser nothing overrides it:
        Enter measures again (after fixing the camera), q ends the session. A healthy bench passes
        without a question. Without a bench to observe (a bare operator in a test) there is nothing
        to check."""
        if self.bench is None or not hasattr(self.bench, "observe"):
            return True
        check = CameraCheck(self.bench)
        legend = ", space/e = e-stop" if self.controls is not None else ""
        self.show(f"Camera check: measuring {', '.join(check.names)} ...")
        while True:
            rows, fault = self._measure_cameras(check)
            if check.passes(rows):
                self.show("Camera check: " + "; ".join(
                    f"{r['name']} live ({r['width']}x{r['height']}, {r['new_frames_hz']} new images/s)" for r in rows))
                ledger = self.session.ledger if self.session is not None else None
                if ledger is not None:
                    ledger.log_event(None, "camera_check", {"cameras": rows, "rater": self.rater})
                return True
            missing = [c for c in CAMERAS if c not in check.names]
            self.show("CAMERA CHECK FAILED (no trial starts until every camera passes):")
            for line in problems(rows) + [f"{c}: missing (not in the bench's cameras)" for c in missing]:
                self.show(f"  {line}")
            if fault:
                self.show(f"  last camera error: {fault}")
            try:
                answer = self.answer(f"Fix the camera, then [Enter = measure again, q = end the session{legend}] ")
            except EStopAtPrompt:
                return False
            if answer is None or answer.lower() in ("q", "quit"):
                self.show("Session ended at the camera check.")
                return False
            check.restart()

    def _measure_cameras(self, check: CameraCheck) -> tuple[list[dict], str]:
        """Observe the bench at its frame rate until a check window is judged: (rows, last fault)."""
        fault = ""
        while True:
            started = time.monotonic()
            try:
                check.add(self.bench.observe().images)
            except Exception as exc:  # a camera fault: the window judges that camera, the reason is shown
                check.add(None)
                fault = str(exc)
            rows = check.judged()
            if rows is not None:
                return rows, fault
            time.sleep(max(0.0, check.period_s - (time.monotonic() - started)))

    def ask_rater_once(self) -> bool:
        """Before a score: the name is known (asked now if the session did not ask yet)."""
        return bool(self.rater) or self.ask_rater()

    def ask_rater(self) -> bool:
        """The rater's name, asked once (operator.rater= gives it up front); False at end of input."""
        if self.rater:
            self.show(f"Rater: {self.rater} (stored with every score of this session)")
            return True
        while True:
            answer = self.ask("Your name as rater (stored with every score of this session): ")
            if answer is None:
                return False
            name = person_rater(answer)
            if name is not None:
                self.rater = name
                return True
            self.show(f"Give {RATER_RULE}.")

    # ---- per trial ----------------------------------------------------------------------------
    def wait_scene_ready(self, trial: TrialRow, scene: SceneSpec, checklist_text: str) -> bool:
        self.label = trial.trial_id
        self._events = []
        self.show("\n" + "=" * 78)
        self.show(f"Trial {self.label}  (alias {trial.alias}, order {trial.order})")
        if self.session is not None and self.session.ledger is not None:   # where the campaign stands; a re-run?
            now = time.monotonic()
            if self._last_ready is not None:
                self._cycle_s.append(now - self._last_ready)
            progress = campaign_progress(self.session.ledger, trial, self._cycle_s)
            self.show(progress_text(progress))
            if progress["rerun"]:
                self.show(f"NOTE: {progress['rerun']}")
        self.show(checklist_text)
        images = self._reference_images(trial, scene)
        view = bool(images) and desktop_display()
        legend = ", space/e = e-stop" if self.controls is not None else ""
        prompt = "Scene ready? [Enter = start, " + ("v = view the reference images, " if view else "") + \
            f"q = end the campaign here{legend}] "
        while True:
            try:
                answer = self.answer(prompt)
            except EStopAtPrompt:
                return False   # the session ends on the e-stop
            if answer is None or answer.lower() in ("q", "quit"):
                return False
            if answer.lower() == "v" and images:
                self.show(open_images(images) if view else "No desktop display here (DISPLAY/WAYLAND_DISPLAY unset): "
                          "open " + ", ".join(str(p) for p in images) + " on a computer with a screen.")
                continue
            if answer != "":
                self.show(f"Press Enter when the scene matches the checklist, or q to stop{legend}.")
                continue
            verdict = self._alignment(trial)
            if verdict is None:   # no cameras or ledger to compare with (a bare operator in a test)
                self._last_ready = time.monotonic()
                return True
            self.show(verdict.text())
            reason = None
            if verdict.below:   # the gate: no rollout below the threshold without a person's reason
                self.show(override_needed(verdict))
                answer = self.ask("Reason to start anyway [Enter = back to the scene] ")
                if answer is None:
                    return False
                reason = override_reason(answer)
                if reason is None:
                    short = reason_too_short(answer)
                    if short:
                        self.show(short)
                    continue
            self._last_ready = time.monotonic()
            _, roi = alignment_settings(self.config.console if self.config else None)
            self._events = [("scene_alignment", alignment_event(verdict, reason, roi=roi,
                                                                rater=self.rater, via="terminal"))]
            return True

    def _alignment(self, trial: TrialRow) -> AlignmentVerdict | None:
        """The live scene against the evaluation's reference frames (as on the bench page), or None
        when this operator has no session, bench cameras or config to judge with."""
        session, bench = self.session, self.bench
        if session is None or session.ledger is None or bench is None or self.config is None:
            return None
        threshold, roi = alignment_settings(self.config.console if self.config else None)
        ledger, campaign_dir = session.ledger, Path(session.campaign_dir)
        refs: dict[str, Path] = {}
        if reference_attempt(ledger, trial.evaluation_id) is not None:
            for cam in ALIGNMENT_CAMERAS:
                path = reference_frame(ledger, campaign_dir, trial.evaluation_id, cam)
                if path is not None:
                    refs[cam] = path
        if not refs:
            return AlignmentVerdict(threshold, False)
        try:
            images = bench.observe().images
        except Exception as exc:  # a camera fault: not measured, so the gate asks for a reason
            self.show(f"Cameras could not be read for the alignment check: {exc}")
            images = {}
        scores = {cam: round(alignment_score(images[cam], load_rgb(p), roi), 4)
                  for cam, p in refs.items() if images.get(cam) is not None}
        return AlignmentVerdict(threshold, True, scores)

    def attempt_events(self) -> list[tuple[str, dict]]:
        events, self._events = self._events, []
        return events

    def _reference_images(self, trial: TrialRow, scene: SceneSpec) -> list[Path]:
        """Shows the scene's rendered reference (drawn on its first placement in the campaign) and
        returns the images "v" opens: the rendered sheet, then the real reference once it exists."""
        session = self.session
        if session is None or scene is None or session.suite is None:
            return []
        suite = session.suite
        from spabench.operator.checklist import reference_image
        from spabench.operator.scene_reference import drawing_ahead, rendered_reference

        home = session.bench.cfg.home_pose if session.bench is not None else None
        rendered = rendered_reference(session.campaign_dir, suite, scene, home=home,
                                      views=not drawing_ahead(session))
        self.show(f"Rendered reference (twin, from the specification): {rendered.sheet}")
        self.show("  yaw 0 deg = the object's length points forward, away from the base; "
                  "+ = counterclockwise seen from above (toward the robot's left)")
        if rendered.problem:
            self.show(f"  (placement diagram only: {rendered.problem}; the diagram: {rendered.placement})"
                      if rendered.drawing_views() else f"  (placement diagram only: {rendered.problem})")
        images = [rendered.sheet if rendered.sheet.exists() else rendered.placement]
        ledger = session.ledger
        if ledger is not None:
            cfg = self.config
            real = reference_image(ledger, session.campaign_dir, trial.evaluation_id,
                                   cfg.reference_camera if cfg else "overhead", cfg.reference_fallback if cfg else "middle")
            if real is not None:
                images.append(real)
        return images

    @contextmanager
    def _keys(self, controls: StopControl, keys: dict[str, str]) -> Iterator[None]:
        """Single keys (from `keys`) become stop requests while inside."""
        reader = None
        if self.use_keys:
            def pressed(key: str) -> None:
                if key in keys:
                    controls.request(keys[key], f"key {key!r}")

            reader = KeyReader(self.inp, pressed)
            if not reader.start():
                reader = None
        try:
            yield
        finally:
            if reader is not None:
                reader.stop()

    @contextmanager
    def during_homing(self, controls: StopControl) -> Iterator[None]:
        # said once the keys are read: entering cbreak mode discards what was typed before it
        with self._keys(controls, ESTOP_KEYS):
            if self.use_keys and KeyReader.available(self.inp):
                self.show("Going home (space or e = e-stop)")
            yield

    @contextmanager
    def during_rollout(self, controls: StopControl) -> Iterator[None]:
        with self._keys(controls, KEYS), self._status_line():
            yield

    @contextmanager
    def _status_line(self) -> Iterator[None]:
        live = None
        if self.use_status and KeyReader.available(self.out):
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.out)
            op = self

            class _Render:
                def __rich__(self):
                    # a Text, not a str: rich would read "[s]" and "[a]" in the key legend as markup
                    return status_renderable(op.stats, op.label)

            live = Live(_Render(), console=console, refresh_per_second=4, transient=True)
            live.start()
        try:
            yield
        finally:
            if live is not None:
                live.stop()

    def observers(self) -> list[Any]:
        return [self.stats]

    def _ask_failure_mode(self, task: str, condition: str, prefill: Score | None) -> str | None:
        """The failure mode by its suite-wide number (the same for every task, as in the browser);
        modes that do not apply to this trial are listed, marked, and refused. None: left unscored."""
        choices = failure_mode_choices(task, condition)
        by_number = {c["number"]: c for c in choices}
        preset = prefill.failure_mode if prefill is not None and not prefill.success else None
        if preset is not None and not by_number[FAILURE_MODE_NUMBERS[preset]]["applicable"]:
            preset = None
        for line in failure_mode_lines(choices):   # two columns: 6 lines, so a score fits an 80x24 terminal
            self.show(line)
        hint = f", Enter = {FAILURE_MODE_NUMBERS[preset]} {FAILURE_MODE_LABELS[preset]}" if preset else ""
        while True:
            answer = self.answer(f"Failure mode [number, ? = definitions{hint}] ")
            if answer is None:
                return None
            answer = answer.strip()
            if answer == "" and preset:
                return preset
            if answer == "?":
                for c in choices:
                    if c["applicable"]:
                        self.show(f"  {c['number']:2d}) {c['label']}: {c['definition']}")
                continue
            choice = by_number.get(int(answer)) if answer.isdigit() else None
            if choice is None:
                self.show(f"Enter a number from 1 to {len(choices)} (? lists the definitions).")
            elif not choice["applicable"]:
                self.show(f"{choice['number']}) {choice['label']} does not apply here: {choice['why_not']}.")
            else:
                return choice["name"]

    def score(self, trial: TrialRow, result: EpisodeResult | None, prefill: Score | None = None) -> Score | None:
        """None: left unscored (end of input, l, or an e-stop key, which ends the session)."""
        if not self.ask_rater_once():
            return None
        try:
            return self._score(trial, result, prefill)
        except EStopAtPrompt:
            return None

    def _score(self, trial: TrialRow, result: EpisodeResult | None, prefill: Score | None) -> Score | None:
        task, condition = trial.task, trial.condition
        self.show(f"\nScore attempt of trial {trial.trial_id}: task {task}, condition {condition}")
        self.show(f"Instruction: \"{trial.instruction}\"")
        if result is not None:
            self.show(f"Stopped by {result.stop_reason} after {result.duration_s:.1f} s ({result.n_steps} steps).")
        default = None
        if prefill is not None:
            default = "y" if prefill.success else "n"
            self.show(f"Pre-filled from motion detection: {'success' if prefill.success else 'failure'}"
                      + (f" ({prefill.failure_mode})" if prefill.failure_mode else "") + " - Enter accepts it.")
        while True:
            enter = f", Enter = {default}" if default else ""
            answer = self.answer(f"Success? [y/n{enter}, l = leave unscored] ")
            if answer is None or answer.lower() == "l":
                return None
            if answer == "" and default:
                answer = default
            if answer.lower() in ("y", "n"):
                break
            self.show("Answer y or n.")
        success = answer.lower() == "y"
        mode = None
        if not success:
            mode = self._ask_failure_mode(task, condition, prefill)
            if mode is None:
                return None
        note = self.ask("Note (optional) ") or ""
        source = "operator"
        if prefill is not None and prefill.success == success and prefill.failure_mode == mode:
            source = "operator_confirmed_prefill"
            note = note or prefill.note
        return Score(success, mode, note, self.rater, source)

    def estop_cause(self, ended_rollout: bool, estop: dict) -> tuple[str, str] | None:
        """Why the operator e-stopped, by number (unsafe policy behaviour only when the e-stop ended a
        rollout); 'other' asks for a few words. None at end of input."""
        causes = estop_causes_for(ended_rollout)
        self.show(f"\nE-stop during {estop.get('during') or 'the session'}: why?")
        for number, cause in enumerate(causes, 1):
            self.show(f"  {number}) {ESTOP_CAUSE_LABELS[cause]}" + (f" - {ESTOP_CAUSE_EFFECTS[cause]}"
                                                                     if ended_rollout else ""))
        while True:
            answer = self.ask(f"Cause [1-{len(causes)}] ")
            if answer is None:
                return None
            if not (answer.isdigit() and 1 <= int(answer) <= len(causes)):
                self.show(f"Enter a number from 1 to {len(causes)}.")
                continue
            cause, text = causes[int(answer) - 1], ""
            while estop_cause_problem(cause, text, ended_rollout) is not None:   # 'other': say what
                line = self.ask("What happened? ")
                if line is None:
                    return None
                text = line.strip()
            return cause, text
