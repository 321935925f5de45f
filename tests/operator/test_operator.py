"""Checklists, reference images, the terminal prompts (stdin fed), keys on a real pty, `score`."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from spabench.errors import ConfigError
from spabench.ledger import Ledger, TrialRow
from spabench.operator.auto import AutoOperator, UnattendedOperator, make_operator
from spabench.operator.base import Score, failure_modes_for, motion_prefill
from spabench.operator.checklist import SCENE_STAGED, SCENE_UNSTAGED, checklist, reference_image
from spabench.operator.commands import ScoreConfig
from spabench.operator.commands import score as score_command
from spabench.operator.config import OperatorConfig
from spabench.operator.failure_modes import FAILURE_MODE_DEFINITIONS
from spabench.operator.terminal import TerminalOperator
from spabench.record.recorder import Recorder
from spabench.rollout.types import EpisodeMeta, EpisodeResult, StepRecord
from spabench.suite.model import BenchGeometry, Cell, Goal, Instructions, ObjectState, PlacedObject, SceneSpec
from spabench.suite.vocabulary import FAILURE_MODE_LABELS, FAILURE_MODES
from tests.support.sessions import session_view

GEOM = BenchGeometry((80, 60), (12, 30), (-10, 18), (20.0, -19.0), 6.5, 7.5, 5.0, {})


def _scene():
    return SceneSpec(
        scene_id="object_state-ood-001", task="object_state", condition="ood",
        cell=Cell("upside_down", "white_cup"), withheld=True,
        objects=(PlacedObject("white_cup_a", 22.0, 5.0, state=ObjectState(lid="closed", pose="upside_down")),
                 PlacedObject("red_block", 15.5, -3.25, yaw_deg=30.0)),
        instructions=Instructions("Place the upside-down white cup in the bowl."),
        goal=Goal("in_bowl", ("white_cup_a",)), targets=("white_cup_a",))


class _Suite:
    """The two Suite members the checklist reads (objects, geometry)."""

    geometry = GEOM

    class _Obj:
        def __init__(self, name):
            self.display_name = name

    objects = {"white_cup_a": _Obj("white cup"), "red_block": _Obj("red block")}

    def object(self, object_id):
        return self.objects[object_id]


def test_checklist_names_objects_in_robot_frame():
    text = checklist(_scene(), _Suite(), "/x/ref.png", instruction="Place it.")
    assert "white cup (white_cup_a): 22.0 cm forward of the robot base, 5.0 cm to the robot's LEFT" in text
    assert "upside-down, lid closed" in text
    assert "red block (red_block): 15.5 cm forward of the robot base, 3.2 cm to the robot's RIGHT" in text
    assert "turned +30 deg" in text
    assert "Bowl at its fixed mark: 20.0 cm forward, 19.0 cm to the robot's RIGHT" in text
    assert "/x/ref.png" in text and '"Place it."' in text
    no_ref = checklist(_scene(), GEOM, None)
    assert "none yet" in no_ref and "white_cup_a:" in no_ref  # geometry only: ids, no display names


def _trial_rows(n=2):
    return [TrialRow(trial_id=f"E{i:04d}-P1", evaluation_id=f"E{i:04d}", policy="pol", card="pol", alias="P1",
                     task="counting" if i else "object_state", condition="no_intervention" if i else "ood",
                     scene_id=f"s{i}", scene_condition="no_intervention" if i else "ood", matched_group=None,
                     cell="c|a", withheld=False, instruction="Do it.", instruction_variant="original",
                     timer_s=60.0, order=i) for i in range(n)]


def _record(campaign, attempt_id, moving=True, n=12):
    with Recorder(campaign) as rec:
        shape = (16, 20, 3)
        cams = ("overhead", "middle")
        rec.on_episode_start(EpisodeMeta(attempt_id=attempt_id, cameras=cams, camera_shapes={c: shape for c in cams}))
        for i in range(n):
            state = np.full(6, 3.0 * i if moving else 0.0)
            img = np.full(shape, 200 if i == 0 else 50, np.uint8)
            rec.on_step(StepRecord(i, i / 30, state, {"overhead": img, "middle": img}, state, state))
        rec.on_episode_end(EpisodeResult("timer", True, None, n, n / 30))
        assert rec.wait_idle(60)


def test_reference_image_is_first_overhead_frame_of_first_complete_attempt(tmp_path):
    import dataclasses

    first = _trial_rows(1)[0]
    later = dataclasses.replace(first, trial_id="E0000-P2", policy="pol2", card="pol2", alias="P2", order=1)
    ledger = Ledger.create(tmp_path / "ledger.sqlite", [first, later], "h")
    assert reference_image(ledger, tmp_path, "E0000") is None
    # an attempt on a scene nobody staged (e.g. the empty twin table) is never the reference
    unstaged = ledger.begin_attempt("E0000-P1")
    ledger.log_event(unstaged, SCENE_UNSTAGED, {"by": None})
    _record(tmp_path, unstaged)
    ledger.finish_attempt(unstaged, "complete", "timer", episode_path=f"episodes/{unstaged}")
    assert reference_image(ledger, tmp_path, "E0000") is None
    assert not (tmp_path / "references" / "E0000.png").exists()
    a = ledger.begin_attempt("E0000-P2")
    ledger.log_event(a, SCENE_STAGED, {"by": "operator"})
    _record(tmp_path, a)
    ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
    png = reference_image(ledger, tmp_path, "E0000")
    assert png == tmp_path / "references" / "E0000.png"
    from PIL import Image

    pixels = np.asarray(Image.open(png))
    assert pixels.shape == (16, 20, 3) and abs(int(pixels.mean()) - 200) <= 4  # frame 0, not a later one
    ledger.close()


def test_terminal_ready_gate_and_score_prompt():
    out = io.StringIO()
    op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO("\nwhat\nq\n"), stdout=out)
    trial = _trial_rows(1)[0]
    assert op.wait_scene_ready(trial, None, "CHECKLIST") is True
    assert op.wait_scene_ready(trial, None, "CHECKLIST") is False  # 'what' is re-asked, then q
    assert "CHECKLIST" in out.getvalue() and "Press Enter" in out.getvalue()
    modes = failure_modes_for("object_state", "ood")
    pick = modes.index("grasp_failure") + 1
    op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO(f"x\nn\n99\n{pick}\nslipped\n"), stdout=io.StringIO())
    s = op.score(trial, EpisodeResult("timer", True, None, 10, 1.0))
    assert s == Score(False, "grasp_failure", "slipped", "Ada", "operator")
    op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO("y\n\n"), stdout=io.StringIO())
    assert op.score(trial, None).success is True
    assert TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO(""), stdout=io.StringIO()).score(trial, None) is None


def test_a_failure_number_means_the_same_mode_for_every_task():
    """Measured on main: the list was renumbered per task; '9' recorded Timeout for object_state and
    Other for relative_size, silently. Now one numbering for the suite, the browser's too."""
    from dataclasses import replace

    from spabench.console.views import public_trial
    from spabench.operator.failure_modes import FAILURE_MODE_NUMBERS

    base = _trial_rows(1)[0]
    got, shown = {}, {}
    for task in ("object_state", "relative_size", "counting"):
        trial = replace(base, task=task, condition="ood")
        out = io.StringIO()
        op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO("n\n9\n\n"), stdout=out)
        got[task] = op.score(trial, None).failure_mode
        shown[task] = {m["number"]: m["name"] for m in public_trial(trial)["failure_modes"]}
        assert f" 9) {FAILURE_MODE_LABELS[got[task]]}" in out.getvalue()
    assert len(set(got.values())) == 1 and FAILURE_MODE_NUMBERS[got["counting"]] == 9, got
    assert all(s[9] == got["counting"] for s in shown.values())             # the browser's 9 is the same


def test_a_mode_that_does_not_apply_keeps_its_number_and_is_refused():
    from dataclasses import replace

    from spabench.console.views import public_trial
    from spabench.operator.failure_modes import FAILURE_MODE_NUMBERS

    trial = replace(_trial_rows(1)[0], task="counting", condition="id")
    n = FAILURE_MODE_NUMBERS["wrong_instance"]                               # object_state / referential only
    out = io.StringIO()
    op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO(f"n\n{n}\n?\n1\n\n"), stdout=out)
    assert op.score(trial, None).failure_mode == "wrong_target"
    text = out.getvalue()
    assert f"{n:2d}) {FAILURE_MODE_LABELS['wrong_instance']} (n/a)" in text
    assert "does not apply here" in text and FAILURE_MODE_DEFINITIONS["wrong_target"] in text
    (choice,) = [m for m in public_trial(trial)["failure_modes"] if m["name"] == "wrong_instance"]
    assert choice["number"] == n and not choice["applicable"] and "object_state" in choice["why_not"]


def test_failure_modes_follow_the_protocol_restrictions():
    assert "unnecessary_intervention" not in failure_modes_for("counting", "ood")
    assert "unnecessary_intervention" in failure_modes_for("counting", "no_intervention")
    assert "wrong_instance" in failure_modes_for("object_state", "id")
    assert "wrong_instance" not in failure_modes_for("counting", "id")
    assert set(failure_modes_for("object_state", "no_intervention")) == set(FAILURE_MODES)


def test_motion_prefill_and_enter_accepts_it():
    assert motion_prefill("ood", True, "r") is None
    assert motion_prefill("no_intervention", False, "r").success is True
    moved = motion_prefill("no_movement", True, "r")
    assert (moved.success, moved.failure_mode) == (False, "unnecessary_intervention")
    trial = _trial_rows(2)[1]
    op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO("\n\n\n"), stdout=io.StringIO())
    s = op.score(trial, None, moved)
    assert (s.success, s.failure_mode, s.source) == (False, "unnecessary_intervention", "operator_confirmed_prefill")


def test_operator_config_validation_and_factory():
    with pytest.raises(ConfigError, match=r"allowed: terminal \| unattended \| auto \| web"):
        OperatorConfig(type="robot")
    with pytest.raises(ConfigError, match="recorder"):
        OperatorConfig(recorder={"codec": "h265"})
    with pytest.raises(ConfigError, match="timer_s"):
        OperatorConfig(timer_s=-1)
    assert OperatorConfig(type="auto").rater == "sim_evaluator"
    assert isinstance(make_operator(OperatorConfig(type="unattended")), UnattendedOperator)
    assert UnattendedOperator().score(None, None) is None


def test_auto_operator_uses_the_sim_evaluator():
    class B:  # the two Bench methods the twin overrides that matter here (MuJoCo twin tested in tests/sim)
        loaded = None
        scored = None

        def load_scene(self, scene):
            self.loaded = scene
            return True

        def evaluate(self, scene=None, states=None):
            self.scored = scene
            return (False, "wrong_target")

    bench = B()
    op = AutoOperator(OperatorConfig(type="auto"), bench=bench)
    scene = _scene()
    assert op.wait_scene_ready(None, scene, "")
    assert bench.loaded is None and not op.confirms_scene  # the run session stages twin scenes
    s = op.score(None, None)
    assert (s.success, s.failure_mode, s.rater) == (False, "wrong_target", "sim_evaluator")
    assert bench.scored is scene



# the terminal operator on a pty: inside one of its key contexts until a stop request arrives
_KEYS = textwrap.dedent("""
    import sys, time
    from spabench.operator.config import OperatorConfig
    from spabench.operator.terminal import TerminalOperator
    from spabench.rollout.controls import StopControl
    op = TerminalOperator(OperatorConfig(status_line=False))
    c = StopControl()
    with getattr(op, sys.argv[1] if len(sys.argv) > 1 else "during_rollout")(c):
        print("READY", flush=True)   # inside: the keys are read from here on
        t = time.time()
        while c.pending() is None and time.time() - t < 10:
            time.sleep(0.01)
    print("GOT", c.pending(), flush=True)
    print("ANSWER", op.ask("prompt? "), flush=True)
""")


class PtyScript:
    """A Python script whose stdin/stdout is a real pseudo-terminal (cbreak keys work as at a bench)."""

    def __init__(self, script: str, *args: str):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-c", script, *args], stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.buf = b""

    def read_until(self, token: bytes, timeout: float = 20) -> bool:
        deadline = time.time() + timeout
        while token not in self.buf and time.time() < deadline:
            try:
                self.buf += os.read(self.master, 1024)
            except OSError:
                break
        return token in self.buf

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        self.proc.wait(10)
        os.close(self.master)


def test_keys_in_cbreak_mode_on_a_pty():
    term = PtyScript(_KEYS)
    assert term.read_until(b"READY")
    term.type(b"a")                   # no Enter needed: cbreak mode
    assert term.read_until(b"GOT")
    assert term.read_until(b"prompt?")
    term.type(b"typed line\n")        # canonical mode is back for prompts
    assert term.read_until(b"ANSWER typed line")
    term.close()
    assert b"GOT ('abort', \"key 'a'\")" in term.buf


def test_estop_keys_while_going_home_before_a_trial():
    """Measured on main: no key was read while the arm went home before a trial (only Ctrl-C)."""
    term = PtyScript(_KEYS, "during_homing")
    assert term.read_until(b"Going home (space or e = e-stop)")   # said once the keys are read
    assert term.read_until(b"READY")
    term.type(b"sa")                  # stop and abort end a rollout: none is running, nothing happens
    time.sleep(0.3)                   # (time for a wrongly taken 's' to end the wait before the e-stop)
    term.type(b" ")                   # space: e-stop
    assert term.read_until(b"prompt?")
    term.type(b"\n")
    term.close()
    assert b"GOT ('estop', \"key ' '\")" in term.buf, term.buf


def test_score_command_scores_unscored_attempts(tmp_path):
    ledger = Ledger.create(tmp_path / "ledger.sqlite", _trial_rows(2), "h")
    ids = []
    for trial_id, moving in (("E0000-P1", True), ("E0001-P1", False)):
        a = ledger.begin_attempt(trial_id)
        _record(tmp_path, a, moving=moving)
        ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
        ids.append(a)
    ledger.close()
    out = io.StringIO()
    # first: a failure (mode 1), second (no_intervention, no motion recorded): Enter accepts the pre-fill
    code = score_command(ScoreConfig.from_mapping({"campaign_dir": str(tmp_path), "operator": {"type": "terminal"}}),
                         stdin=io.StringIO("Grace Hopper\nn\n1\nmissed\n\n\n"), stdout=out)
    assert code == 0
    ledger = Ledger.open(tmp_path / "ledger.sqlite")
    assert ledger.unscored_attempts() == []
    s0, s1 = ledger.scores_for(ids[0])[0], ledger.scores_for(ids[1])[0]
    assert (s0.success, s0.failure_mode, s0.note) == (False, failure_modes_for("object_state", "ood")[0], "missed")
    assert s1.success is True and "no motion" in s1.note
    assert "Pre-filled from motion detection: success" in out.getvalue()
    assert {s0.rater, s1.rater} == {"Grace Hopper"}   # the name asked once, on every score
    ledger.close()


def test_status_line_shows_the_key_legend_literally():
    """Measured on main: rich read "[s]" and "[a]" as markup; the legend showed as struck-through
    "top bort". The status line is rendered by rich Live on a real pty, as at the bench."""
    from spabench.rollout.controls import StopControl

    master, slave = pty.openpty()
    out = os.fdopen(slave, "w")
    op = TerminalOperator(OperatorConfig(keys=False, status_line=True), stdin=io.StringIO(), stdout=out)
    op.label = "E0001-P1"
    with op.during_rollout(StopControl()):
        time.sleep(0.6)  # a few refreshes at 4 Hz
    out.flush()
    buf = b""
    while True:
        import select

        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            break
        buf += os.read(master, 65536)
    out.close()
    os.close(master)
    text = buf.decode(errors="replace")
    assert "[s]top [a]bort [space/e] e-stop" in text, text
    assert "\x1b[9m" not in text  # no strike-through


def test_score_corrections_rescore_and_invalidate_then_report(tmp_path):
    """Measured on main: a score could not be corrected, nor a complete attempt declared invalid,
    from any command. Now `spabench score attempt=... reason=...` (and invalidate=true) do both, the
    history keeps every score with rater, time and reason, and the report counts the corrections."""
    from spabench.analysis.commands import load_campaign_outcomes
    from spabench.analysis.report import score_audit

    ledger = Ledger.create(tmp_path / "ledger.sqlite", _trial_rows(2), "h")
    ids = []
    for trial_id in ("E0000-P1", "E0001-P1"):
        a = ledger.begin_attempt(trial_id)
        _record(tmp_path, a)
        ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
        ledger.record_score(a, "Ada", True)
        ids.append(a)
    ledger.close()
    base = {"campaign_dir": str(tmp_path), "operator": {"type": "terminal", "rater": "Ada"}}
    out = io.StringIO()
    # a correction without a reason is refused, nothing changes
    assert score_command(ScoreConfig.from_mapping({**base, "attempt": ids[0]}), stdin=io.StringIO("n\n1\n\n"),
                         stdout=out) == 2
    assert "a correction needs reason=" in out.getvalue()
    out = io.StringIO()
    code = score_command(ScoreConfig.from_mapping({**base, "attempt": ids[0], "reason": "gripper slipped on replay"}),
                         stdin=io.StringIO("n\n1\nre-watched\n"), stdout=out)
    assert code == 0, out.getvalue()
    assert "current: success by Ada" in out.getvalue() and "(alias P1" in out.getvalue()
    out = io.StringIO()
    assert score_command(ScoreConfig.from_mapping({**base, "attempt": ids[1], "invalidate": True,
                                           "reason": "cup was upright, scene wrong"}), stdout=out) == 0
    assert "is now invalid: operator_invalidated: cup was upright, scene wrong" in out.getvalue()
    ledger = Ledger.open(tmp_path / "ledger.sqlite")
    history = ledger.score_history(ids[0])
    assert [(s.success, s.reason, s.superseded_at is not None) for s in history] == [
        (True, None, True), (False, "gripper slipped on replay", False)]
    assert all(s.rater == "Ada" and s.scored_at for s in history)
    assert ledger.attempt(ids[1]).status == "invalid" and ledger.pending_trials()[0].trial_id == "E0001-P1"
    assert ledger.score_history(ids[1])[0].success is True  # kept in the history
    ledger.close()
    outcomes = load_campaign_outcomes(tmp_path)
    first = outcomes[outcomes["attempt_id"] == ids[0]].iloc[0]
    assert int(first["success"]) == 0  # the latest score is the outcome
    assert score_audit(outcomes).startswith("Score corrections: 1 on 1 attempt(s)")
    assert "1 complete attempt(s) declared invalid afterwards" in score_audit(outcomes)


# a session's terminal operator at its prompts, on a pty: the e-stop keys answer the gate and the
# score prompts (issue 18; measured on main: only Enter/q and lines were read there, and space+Enter
# at the gate started the rollout)
_PROMPTS = textwrap.dedent("""
    import sys
    from spabench.operator.config import OperatorConfig
    from spabench.operator.terminal import TerminalOperator
    from spabench.rollout.controls import StopControl
    from tests.operator.test_operator import _trial_rows
    from tests.support.sessions import session_view
    c = StopControl()
    op = TerminalOperator(OperatorConfig(status_line=False, rater="Ada"))
    op.begin_session(session_view(controls=c))
    trial = _trial_rows(1)[0]
    which = sys.argv[1]
    if which == "gate":
        c.stage = "scene reset"
        print("FIRST", op.wait_scene_ready(trial, None, "CHECKLIST"), c.estop(), flush=True)
        print("SECOND", op.wait_scene_ready(trial, None, "CHECKLIST"), flush=True)
    else:
        c.stage = "scoring"
        print("FIRST", op.score(trial, None), c.estop(), flush=True)
        print("SECOND", op.score(trial, None), flush=True)
    e = c.estop() or {}
    print("ESTOP", e.get("source"), "|", e.get("during"), flush=True)
""")


def _prompted(term: PtyScript, prompt: bytes, times: int, timeout: float = 20.0) -> bool:
    """The prompt has been shown `times` times (keys typed before it shows are dropped, as at a bench)."""
    deadline = time.time() + timeout
    while term.buf.count(prompt) < times and time.time() < deadline:
        if select.select([term.master], [], [], 0.2)[0]:
            try:
                term.buf += os.read(term.master, 1024)
            except OSError:
                break
    return term.buf.count(prompt) >= times


def test_space_then_enter_at_the_gate_estops_and_never_starts_the_rollout():
    term = PtyScript(_PROMPTS, "gate")
    gate = b"space/e = e-stop] "
    assert term.read_until(gate)
    term.type(b"\n")                          # Enter alone starts, as before
    assert term.read_until(b"FIRST True None")
    assert _prompted(term, gate, 2)
    term.type(b" \n")                         # space+Enter: the space e-stops at once
    assert term.read_until(b"ESTOP key ' ' | scene reset"), term.buf
    term.close()
    assert b"SECOND False" in term.buf, term.buf


def test_estop_keys_at_the_score_prompts_on_a_pty():
    term = PtyScript(_PROMPTS, "score")
    assert term.read_until(b"Success? [y/n, l = leave unscored] ")
    term.type(b"n\n")                         # a failure ...
    assert term.read_until(b"Failure mode [number")
    term.type(b"e")                           # ... then e at the number: e-stop, left unscored
    assert term.read_until(b"FIRST None {")
    assert _prompted(term, b"Success? [y/n, l = leave unscored] ", 2)
    term.type(b" ")                           # space at y/n: the same
    assert term.read_until(b"ESTOP key 'e' | scoring"), term.buf   # the first e-stop is the one kept
    term.close()
    assert b"SECOND None" in term.buf, term.buf


def test_typed_answers_still_work_at_a_session_terminal():
    """Key by key, the answers are the same as the lines before: a two-digit failure number with a
    backspace, then a free-text note in which e and space are letters."""
    script = _PROMPTS.replace('print("FIRST", op.score(trial, None), c.estop(), flush=True)',
                              'print("FIRST", op.score(trial, None), c.estop(), flush=True); sys.exit(0)')
    term = PtyScript(script, "score")
    assert term.read_until(b"Success? [y/n, l = leave unscored] ")
    term.type(b"n\n")
    assert term.read_until(b"Failure mode [number")
    term.type(b"19\x7f1\n")                   # 19, backspace, 1: mode 11
    assert term.read_until(b"Note (optional) ")
    term.type(b"e stop not needed\n")
    assert term.read_until(b"source='operator') None"), term.buf     # no e-stop
    term.close()
    from spabench.operator.failure_modes import FAILURE_MODE_NUMBERS

    eleven = {n: m for m, n in FAILURE_MODE_NUMBERS.items()}[11]
    assert f"failure_mode='{eleven}', note='e stop not needed'".encode() in term.buf, term.buf


_WEB_KEYS = textwrap.dedent("""
    import sys, time
    from spabench.console.operator import WebOperator
    from spabench.operator.config import OperatorConfig
    from spabench.rollout.controls import StopControl
    op = WebOperator(OperatorConfig(type="web"), out=sys.stdout, stdin=sys.stdin)
    c = StopControl()
    op.channel.controls = c
    op.channel.set_phase("rollout")
    op._read_terminal_keys()
    print("ROLLOUT", flush=True)
    t = time.time()
    while c.pending() is None and time.time() - t < 10:
        time.sleep(0.01)
    print("GOT", c.pending(), flush=True)
    op.channel.set_phase("reset")
    op.channel.controls = c = StopControl()
    print("RESET", flush=True)
    t = time.time()
    while not c.estopped() and time.time() - t < 10:
        time.sleep(0.01)
    print("GOT", c.pending(), c.estop()["during"] if c.estop() else None, flush=True)
    op.close()
""")


def test_the_terminal_of_a_web_session_takes_the_stop_and_estop_keys():
    """Measured on main: a web session's terminal took only Ctrl-C."""
    term = PtyScript(_WEB_KEYS)
    assert term.read_until(b"terminal keys: space or e = e-stop")
    assert term.read_until(b"ROLLOUT")
    term.type(b"s")                           # stop, as the page's S
    assert term.read_until(b"RESET")
    term.type(b"a")                           # abort outside a rollout: refused, said
    assert term.read_until(b"no rollout is running (phase reset)")
    term.type(b"e")
    assert term.read_until(b"GOT ('estop'")
    term.close()
    assert b"GOT ('operator_stop', \"terminal key 's'\")" in term.buf, term.buf
    assert b"GOT ('estop', \"terminal key 'e'\")" in term.buf, term.buf


def test_a_person_operator_is_asked_for_a_rater_name_once_and_machine_labels_are_refused():
    """Measured before: every score was by "operator" and nothing asked for a name."""
    from spabench.errors import ConfigError

    out = io.StringIO()
    op = TerminalOperator(OperatorConfig(), stdin=io.StringIO("\noperator\nx\n  Ada   Lovelace \ny\n\ny\n\n"), stdout=out)
    assert op.begin_session(session_view()) and op.rater == "Ada Lovelace"
    assert out.getvalue().count("Give your name or initials") == 3   # "", "operator", "x"
    trial = _trial_rows(1)[0]
    assert [op.score(trial, None).rater for _ in range(2)] == ["Ada Lovelace"] * 2   # asked once
    assert out.getvalue().count("Your name as rater") == 4
    # without a name (end of input) the session does not start, and no score is made
    assert not TerminalOperator(OperatorConfig(), stdin=io.StringIO(""), stdout=io.StringIO()).begin_session(session_view())
    assert TerminalOperator(OperatorConfig(), stdin=io.StringIO(""), stdout=io.StringIO()).score(trial, None) is None
    # operator.rater= gives it up front; a machine label there is refused before anything starts
    assert OperatorConfig(type="web", rater=" Grace  Hopper ").rater == "Grace Hopper"
    for bad in ("operator", "sim_evaluator", "x", "42"):
        with pytest.raises(ConfigError, match="names no person"):
            OperatorConfig(type="terminal", rater=bad)
    assert OperatorConfig(type="auto").rater == "sim_evaluator"   # the twin's labelled machine rater


def test_a_score_prompt_fits_an_80x24_terminal():
    """Measured before: the failure list took a line per mode (11, then the prompt); on 80x24 the
    trial's lines scrolled away. Two columns under one suite-wide numbering: 7 lines, 79 wide."""
    from spabench.operator.failure_modes import FAILURE_MODE_NUMBERS, failure_mode_choices
    from spabench.operator.terminal import failure_mode_lines

    for task, condition in (("object_state", "id"), ("counting", "ood"), ("relative_size", "no_intervention")):
        lines = failure_mode_lines(failure_mode_choices(task, condition))
        assert len(lines) <= 7 and max(map(len, lines)) <= 79, lines
        text = "\n".join(lines)
        for mode, n in FAILURE_MODE_NUMBERS.items():   # every mode, at its one number
            assert f"{n:2d}) {FAILURE_MODE_LABELS[mode][:20]}" in text, (mode, text)
    out = io.StringIO()
    trial = _trial_rows(1)[0]
    op = TerminalOperator(OperatorConfig(rater="Ada"), stdin=io.StringIO("n\n1\n\n"), stdout=out)
    assert op.score(trial, EpisodeResult("timer", True, None, 10, 1.0)).failure_mode == "wrong_target"
    shown = out.getvalue().splitlines()   # (the prompts share lines here: stdin is not echoed)
    assert len(shown) <= 24 and max(len(line) for line in shown if "Success?" not in line) <= 80, shown


def test_the_review_page_refuses_a_score_without_a_persons_name(tmp_path):
    """The console's review API (spabench.console.review) stores a score only under a name that can
    be a person's: the old default "operator" and the machine labels are refused, nothing written."""
    from spabench.console.review import ReviewError, submit_score

    ledger = Ledger.create(tmp_path / "ledger.sqlite", _trial_rows(1), "h")
    a = ledger.begin_attempt("E0000-P1")
    ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
    for bad in ("", "operator", "Sim_Evaluator", "x"):
        with pytest.raises(ReviewError, match="rater"):
            submit_score(ledger, a, bad, True, None, "", None, 0)
    assert ledger.score_history(a) == []
    submit_score(ledger, a, "  Ada  ", True, None, "", None, 0)
    assert [s.rater for s in ledger.score_history(a)] == ["Ada"]
    ledger.close()
