"""The `run` session: the resources of one run and the sequence of its trials.

Order of things, chosen so that nothing moves before everything it depends on is known good:
bench binding -> ledger (hash check; attempts left running by a crash become invalid 'interrupted', their partial
folders kept) -> policy clients (health/metadata) -> bench config -> bench connect -> per trial:
checklist + ready gate -> home -> policy reset + EMA reset -> rollout -> recorder close -> score ->
ledger commit. Ctrl-C during a rollout aborts that attempt (invalid 'operator_abort', the arm holds)
and ends the session; everything is disconnected in `close()`.

An e-stop (console button or key, terminal key, a second Ctrl-C) is honoured at any moment of the
session: the session's one StopControl latches it, every blocking motion polls it each step and
holds, and the session ends at its next check with the arm held and an 'estop' ledger event saying
during what (scene reset, homing before the trial, rollout, homing after the rollout, scoring). The
browser console's dead-man (no request from the bench page while the arm moves) latches the same way
and ends the session likewise, with a 'console_lost' event and the attempt invalid (`console_lost`).

The parts live beside it: `binding` (what the plan binds), `policies` (servers and their pre-flight),
`leases` (which trial next, scene-set claims), `preflight` (disk and motors before a trial).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.bench.errors import BenchFault, MotionStopped
from spabench.ledger import ClaimLost, LedgerStorageError, SceneSetTaken, ScoreConflict
from spabench.operator.base import Operator, motion_prefill
from spabench.operator.blinding import Blinder, BlindStream, blind_logging
from spabench.operator.checklist import (
    SCENE_STAGED,
    SCENE_UNSTAGED,
    checklist,
    reference_attempt,
    reference_image,
)
from spabench.operator.config import OperatorConfig
from spabench.paths import campaign_folder
from spabench.policy.servers import ServerIdentityChanged
from spabench.rollout.binding import (
    check_bench_binding,
    check_operator_binding,
    check_relation_binding,
    check_timer_binding,
    open_ledger,
    record_safety_limits,
)
from spabench.rollout.controls import StopControl
from spabench.rollout.exits import (
    EXIT_BENCH,
    EXIT_CONFIG,
    EXIT_INVALID_STREAK,
    EXIT_OK,
    EXIT_SERVER_DOWN,
    EXIT_SIGINT,
    EXIT_STORAGE,
)
from spabench.rollout.heap import heap_frozen_for_motion, thaw_heap
from spabench.rollout.leases import SceneSetClaims
from spabench.rollout.policies import PolicyServers, card_yaml, check_identity_override, load_cards
from spabench.rollout.preflight import check_space, motors_ready
from spabench.rollout.stopping import ComparisonStop
from spabench.rollout.types import EpisodeMeta
from spabench.suite.rules import (
    ESTOP_CAUSE_LABELS,
    ESTOP_CAUSE_NOT_RECORDED,
    UNSAFE,
    estop_invalid_reason,
    estop_is_failure,
)

if TYPE_CHECKING:
    from spabench.ledger.schema import TrialRow
    from spabench.operator.render_ahead import RenderAhead
    from spabench.policy.card import PolicyCard
    from spabench.rollout.commands import RunConfig

log = logging.getLogger(__name__)

INVALID_EPISODE_WAIT_S = 10.0   # how long an invalid attempt's videos may take before the ledger names its folder
# Faults after which the session stops: the bench can no longer be trusted, or a person said stop,
# or nothing more can be recorded.
STOP_SESSION_REASONS = frozenset({"estop", "console_lost", "bus_error", "camera_lost", "safety_error",
                                  "harness_error", "storage_error", "undervoltage"})
# Faults after which the policy server's health is checked before the next attempt.
SERVER_FAULT_REASONS = frozenset({"server_lost"})
MAX_CONSECUTIVE_INVALID = 3


def _scene(suite: Any, scene_id: str) -> Any:
    if suite is None:
        return None
    try:
        return suite.scene(scene_id)
    except Exception:
        return None


def _load_suite(cfg: RunConfig) -> Any:
    from spabench.suite.config import load_suite_of

    return load_suite_of(cfg.need("suite"))


class Session:
    """The resources of one `run`: ledger, policy servers, bench, recorder, operator."""

    def __init__(self, cfg: RunConfig, out: Any = None, stdin: Any = None):
        self.cfg = cfg
        self.out = out or sys.stdout
        self.said: list[str] = []   # what the terminal was told, for a console page to show the same
        self.stdin = stdin
        self.campaign_dir = campaign_folder(cfg.campaign_dir, "run")
        self.op_cfg: OperatorConfig = cfg.need("operator")
        self.bench_cfg = cfg.need("bench")
        self.max_trials = cfg.max_trials
        self.dry_run = False
        self.bench_id = cfg.bench_id or socket.gethostname()
        self.ledger: Any = None
        self.claims: SceneSetClaims | None = None   # which trial next; scene-set claims on a shared ledger
        self.policies: PolicyServers | None = None
        self.bench: Any = None
        self.suite: Any = None         # the suite (after the bench connects)
        self.health: Any = None        # the bench's HealthMonitor (motor telemetry and guards), or None
        self.recorder: Any = None
        self.operator: Operator | Any = None
        self.controls = StopControl()
        self.estop_logged = False
        self.estop_cause: tuple[str, str] | None = None   # (cause, text) the operator gave (suite.rules)
        self.estop_asked = False
        self.running_attempt: str | None = None
        self.blinder: Blinder | None = None
        self._blind_logging = blind_logging(None)
        self.running_reason = "operator_abort"   # how close() ends an attempt left running
        self.resume_note: str | None = None      # unscored attempts found at start, for the bench page too
        self.identity_error: Exception | None = None   # a policy server changed its checkpoint mid-session
        self.render_ahead: RenderAhead | None = None   # the background process drawing the scenes' references
        self.stopping: ComparisonStop | None = None   # a comparison campaign's stopping rule

    @property
    def open_policies(self) -> PolicyServers:
        """The policy servers, once open() started them (trials run only after it)."""
        if self.policies is None:
            raise RuntimeError("the session is not open: no policy servers")
        return self.policies

    @property
    def open_claims(self) -> SceneSetClaims:
        """Which trial next and the scene-set claims, once open() started them."""
        if self.claims is None:
            raise RuntimeError("the session is not open: no trial claims")
        return self.claims

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)
        self.said.append(text)

    # ---- start-up, in the order that keeps the arm still until everything is known good --------
    def open(self) -> bool:
        """False when there is nothing to run or the operator ended the session before the first trial."""
        check_identity_override(self.cfg)
        planned = check_bench_binding(self.campaign_dir, self.bench_cfg.type, self.cfg.dry_run)
        check_relation_binding(self.campaign_dir, self.cfg.need("suite").relation)
        # dry_run=true means a dry run on any bench: its attempts are marked and kept out of the results
        self.dry_run = self.cfg.dry_run or (planned is not None and planned != self.bench_cfg.type)
        check_operator_binding(self.op_cfg.type, self.bench_cfg.type)
        self.ledger = open_ledger(self.campaign_dir, self.cfg.ledger_url)
        self.ledger.reconnect_s = self.cfg.reconnect_s
        self._blind(Blinder.for_trials(self.ledger.trials()))
        # every card of the plan, with its overrides: a bad cards.<name>.<field> fails before any write
        trials = self.ledger.trials()
        cards = load_cards(list(dict.fromkeys(t.card for t in trials)), self.cfg.cards, self.cfg.group_dirs("policy"),
                           aliases={t.alias: t.card for t in trials}, blind=any(t.alias != t.policy for t in trials))
        check_timer_binding(self.ledger.pending_trials(), self.op_cfg.timer_s, self.dry_run)   # before any write
        self.claims = SceneSetClaims(self.ledger, self.bench_id, self.cfg.lease_s, self.say)
        self.claims.dry_run = self.dry_run
        self._recover()
        self._open_stopping()
        pending = [t for t in self.ledger.pending_trials() if t.policy not in self.claims.skip]
        if not pending:
            self.say(f"campaign {self.campaign_dir}: every trial has a complete attempt"
                     + (" or belongs to the decided comparison (stopping rule)" if self.claims.skip else ""))
            return False
        self.resume_note = self.unscored_note("resuming")
        if self.resume_note:
            self.say(self.resume_note)
        self._blind(Blinder.for_trials(self.ledger.trials(), cards))
        record_safety_limits(self.ledger, self.campaign_dir, self.say)   # checks are done: a change is written
        self._note_bench_check()
        names = set(t.card for t in pending)
        self.policies = PolicyServers(self.cfg, {n: c for n, c in cards.items() if n in names},
                                      self.campaign_dir, self.ledger, self.say, self.blinder,
                                      self.op_cfg.server_wait_s)
        self.policies.connect()
        self._connect_bench()
        self._check_camera_identity()
        self._render_ahead(pending)
        self.controls.stage = "session start"
        self.claims.start()
        if not self.operator.begin_session(self):  # e.g. the browser's camera check was not confirmed
            self.say("session ended by the operator before the first trial")
            return False
        return True

    def _note_bench_check(self) -> None:
        """The last `spabench bench check` of this bench (the lab folder's or the campaign's): its age and
        result, shown before anything connects; the session goes on either way."""
        from spabench.bench_record import last_check

        last = last_check(Path.cwd(), self.ledger, self.bench_cfg.robot_id, self.bench_cfg.type)
        if last is not None:
            self.say(last.line())
        elif self.bench_cfg.commissioned:
            self.say(f"no bench check on record for this bench (in {Path.cwd() / 'bench-checks'} or the campaign): "
                     f"`spabench bench check bench=<preset> campaign={self.campaign_dir}` commissions it")

    def _check_camera_identity(self) -> None:
        """Refuses (BenchFault) a camera whose view is nearer another camera's `bench check` reference
        than its own (operator.camera_identity), before the first trial; accept_cameras=true goes on and
        records the override in the ledger. Without stored references (or on the twin) nothing to compare."""
        from spabench.operator.camera_identity import (
            identity_problems,
            read_png,
            references_dir,
            stored_references,
        )

        if self.bench.rendered_cameras:
            return
        folder = references_dir(self.cfg.camera_references, self.bench_cfg.robot_id)
        stored = stored_references(folder, self.bench.camera_names)
        if not stored:
            return
        views = {n: img for n, img in self.bench.observe().images.items() if n in self.bench.camera_names}
        problems = identity_problems(views, {n: read_png(p) for n, p in stored.items()})
        if not problems:
            return
        if self.cfg.accept_cameras:
            self.say("camera identity NOT as in the bench check, going on (accept_cameras=true): "
                     + "; ".join(problems.values()))
            self.ledger.log_event(None, "camera_identity_override", {"references": str(folder), "problems": problems})
            return
        raise BenchFault("; ".join(problems.values()) + f" (references: {folder}). To run anyway for this "
                         "session, add accept_cameras=true (recorded in the ledger)", component="cameras")

    def _open_stopping(self) -> None:
        """A comparison campaign's rule: its pairs are not scheduled once decided (not in a dry run,
        whose attempts are no evidence; not on a shared ledger, where `plan` refuses a rule)."""
        if self.dry_run or self.open_claims.multi_bench:
            return
        self.stopping = ComparisonStop.for_campaign(self.campaign_dir, self.ledger, self.say)
        self._check_stopping()

    def _check_stopping(self) -> None:
        if self.stopping is not None and self.stopping.update(self.ledger):
            self.open_claims.skip = set(self.stopping.policies)

    def _recover(self) -> None:
        """Attempts a crash left running become invalid ('interrupted'), their partial folders final.

        On a shared ledger only this bench's own leftovers, after locking its bench id (one live
        process per bench)."""
        from spabench.record.recovery import recover_campaign

        multi_bench = self.claims is not None and self.claims.multi_bench
        if multi_bench:
            self.ledger.lock_bench(self.bench_id)
            interrupted = self.ledger.mark_interrupted(bench_id=self.bench_id)
        else:
            interrupted = self.ledger.mark_interrupted()
        for attempt_id in interrupted:
            self.say(f"attempt {attempt_id} was interrupted (kill or crash): marked invalid, "
                     "its partial recording is kept; the trial will be re-run")
        recover_campaign(self.ledger, self.campaign_dir, say=self.say,  # .partial folders -> final
                         bench_id=self.bench_id if multi_bench else None)

    def _connect_bench(self) -> None:
        """The suite, the bench (checked against the suite's envelope before connecting), its health
        monitor, the recorder and the operator."""
        from spabench.bench.bench import make_bench
        from spabench.operator.auto import make_operator
        from spabench.record.recorder import Recorder

        self.suite = _load_suite(self.cfg)
        # the arm's Cartesian envelope is the suite's hardware/bench.yaml: checked before connecting
        self.bench = make_bench(self.bench_cfg, workspace=self.suite.geometry.arm_envelope)
        self.bench.connect()
        self.health = self.bench.health_monitor()
        self.recorder = Recorder(self.campaign_dir, self.op_cfg.recorder_config())
        self.recorder.start_encoders(self.bench.camera_shapes)   # not under the first trial's dead-man
        self.operator = make_operator(self.op_cfg, bench=self.bench, stdin=self.stdin, stdout=self.out)
        self.bench.adopt_suite(self.suite)   # the twin scores by the configured success rules

    def _render_ahead(self, pending: list[Any]) -> None:
        """A person places the scenes: their rendered references are drawn ahead, in the order the
        pending trials run, by a low-priority background process (spabench.operator.render_ahead)."""
        from spabench.operator.render_ahead import RenderAhead, scenes_in_order

        if not self.operator.confirms_scene or self.suite is None:
            return
        home = self.bench.cfg.home_pose if self.bench is not None else None   # as the operators pass it
        self.render_ahead = RenderAhead(self.campaign_dir, self.suite, scenes_in_order(pending, self.suite),
                                        home=home).start()

    def _blind(self, blinder: Blinder | None) -> None:
        """With aliases on, everything the operator reads (this stream, the logs) is redacted."""
        if blinder is None:
            return
        if isinstance(self.out, BlindStream):
            self.out.blinder = blinder
        else:
            self.out = BlindStream(self.out, blinder)
        self._blind_logging.__exit__()
        self._blind_logging = blind_logging(blinder).__enter__()
        self.blinder = blinder

    def _arm_at_home(self) -> bool:
        """At home, the arm may be let go as conf/bench says; a bus that cannot be read counts as
        home (nothing could hold the arm anyway)."""
        try:
            return self.bench.at_home()
        except Exception as exc:
            log.warning("could not read the arm's pose at shutdown: %s", exc)
            return True

    # ---- shutdown: the arm holds first, then the ledger, videos, servers, bus ----------------------
    def close(self) -> None:
        self.controls.stage = "shutdown"
        thaw_heap()
        if self.bench is not None and self.bench.is_connected:   # the arm first
            try:
                self.bench.hold()
            except Exception as exc:
                log.warning("hold at shutdown failed: %s", exc)
        if self.render_ahead is not None:
            self.render_ahead.stop()
        if self.claims is not None:
            self.claims.stop()
        self._close_running_attempt()
        if self.recorder is not None:
            if not self.recorder.wait_idle(self.op_cfg.wait_videos_s):
                self.say("warning: some videos were still being written at exit; their folders stay .partial "
                         "until the next `spabench run` of this campaign finishes them")
            self.recorder.close()
        if self.policies is not None:
            self.policies.close()
        self._disconnect_bench()
        if self.ledger is not None and self.running_reason != "storage_error":  # a lost ledger is not asked again
            note = self.unscored_note("session end")
            if note:
                self.say(note)   # before the operator closes: the bench page shows it with the reason
        if self.operator is not None:
            self.operator.close()
        if self.ledger is not None:
            if self.controls.estopped() and not self.estop_logged:   # e.g. a second Ctrl-C
                try:
                    self._log_estop()
                except Exception as exc:
                    log.warning("the e-stop could not be logged in the ledger: %s", exc)
            self.ledger.close()
        self._blind_logging.__exit__()

    def unscored_note(self, when: str) -> str | None:
        """How many complete attempts of the campaign wait for a score and where to score them; None
        when none do. Said at every session end and on resume, so that no attempt is forgotten."""
        try:
            waiting = self.ledger.unscored_attempts()
        except Exception as exc:
            log.warning("could not count the unscored attempts: %s", exc)
            return None
        if not waiting:
            return None
        named = ", ".join(a.attempt_id for a in waiting[:5]) + (", ..." if len(waiting) > 5 else "")
        return (f"{when}: {len(waiting)} complete attempt(s) unscored ({named}); score them with "
                f"`spabench score campaign={self.campaign_dir}` or on the console's review page (/review, "
                "'Unscored only')")

    def _close_running_attempt(self) -> None:
        """An attempt still running at shutdown ends invalid with `running_reason`."""
        if self.running_attempt is None or self.ledger is None:
            return
        stop = "fault" if self.running_reason == "storage_error" else "abort"
        try:
            try:
                self.ledger.finish_attempt(self.running_attempt, "invalid", stop,
                                           invalid_reason=self.running_reason)
            except LedgerStorageError:   # a full disk: the ledger's reserve makes room for this one
                if not self.ledger.release_reserve():
                    raise
                self.ledger.finish_attempt(self.running_attempt, "invalid", stop,
                                           invalid_reason=self.running_reason)
        except Exception as exc:
            self.say(f"attempt {self.running_attempt} could not be closed in the ledger ({exc}); "
                     "the next run marks it invalid (interrupted)")
        self.running_attempt = None

    def _disconnect_bench(self) -> None:
        """Torque stays on when the arm could drop: after an e-stop or away from its home pose."""
        if self.bench is None:
            return
        held = self.bench.is_connected and (self.controls.estopped() or not self._arm_at_home())
        try:
            self.bench.disconnect(keep_torque=held)
        except Exception as exc:
            log.warning("bench disconnect failed: %s", exc)
        if held:
            latch = (self.controls.estop() or {}).get("kind") or ""
            why = {"estop": "e-stop", "console_lost": "console lost"}.get(latch, "the arm is not at its home pose")
            self.say(f"{why}: the arm is held where it stopped, torque on (it would drop with torque off). "
                     "Support it, then switch its power off or run the next session to home it.")

    # ---- one trial ----------------------------------------------------------------------------
    def _stage_scene(self, scene: Any) -> str | None:
        """The twin builds the trial's scene itself, whoever the operator is; "twin" when it did (a
        person sets up the scene on a real bench)."""
        return "twin" if scene is not None and self.bench.load_scene(scene) else None

    def _trial_card(self, trial: TrialRow) -> PolicyCard:
        """The trial's card at the plan's control rate (a campaign may override the card's)."""
        card = self.open_policies.cards[trial.card]
        if float(trial.control_hz) != float(card.control_hz):  # the plan's rate (campaign override)
            card = dataclasses.replace(card, control_hz=float(trial.control_hz))
        return card

    def _checklist_text(self, trial: Any, scene: Any) -> str:
        """What the operator reads at the scene gate, with the scene set's reference image."""
        ref = reference_image(self.ledger, self.campaign_dir, trial.evaluation_id,
                              self.op_cfg.reference_camera, self.op_cfg.reference_fallback)
        first = reference_attempt(self.ledger, trial.evaluation_id)
        if ref is None and first is not None and first.bench_id in (None, self.bench_id):
            # the reference attempt's videos may still be encoding (e.g. it was the previous trial)
            self.recorder.wait_idle(30.0)
            ref = reference_image(self.ledger, self.campaign_dir, trial.evaluation_id,
                                  self.op_cfg.reference_camera, self.op_cfg.reference_fallback)
        if scene is not None:
            return checklist(scene, self.suite, ref, instruction=trial.instruction,
                             relation_rule=self.cfg.need("suite").relation)
        return f"Scene {trial.scene_id} (no scene specification loaded)\nReference image: {ref or 'none yet'}"

    def _scene_ready(self, trial: Any, scene: Any) -> tuple[bool, str | None]:
        """The scene gate. (False, _): the operator ended the session or an e-stop came; else (True,
        who staged the scene: "twin", "operator" or None)."""
        if self.render_ahead is not None:
            self.render_ahead.reached(trial.scene_id)
        text = self._checklist_text(trial, scene)
        staged_by = self._stage_scene(scene)
        self.controls.stage = "scene reset"
        if not self.operator.wait_scene_ready(trial, scene, text) or self.controls.estopped():
            return False, None
        if staged_by is None and self.operator.confirms_scene:
            staged_by = "operator"
        return True, staged_by

    def _at_home(self) -> bool:
        """Homing before the trial. False: an e-stop (or the console's dead-man) came on the way."""
        self.controls.stage = "homing before the trial"
        try:
            with self.operator.during_homing(self.controls):
                self.bench.go_home(should_stop=self.controls.estopped)
        except MotionStopped as exc:  # e-stopped on the way: the bench holds; loop() ends the session
            log.info("%s", exc)
            return False
        return not self.controls.estopped()

    def _begin_attempt(self, trial: Any, staged_by: str | None) -> str:
        """The ledger's attempt (now running) with its scene-staging and operator events."""
        n_before = len(self.ledger.attempts_for(trial.trial_id))
        expected = f"{trial.trial_id}-a{n_before + 1}"  # the ledger's id scheme, so the path is known up front
        events = self.operator.attempt_events()  # e.g. the scene alignment at "scene ready"
        gate: dict[str, Any] = next((p for kind, p in events if kind == "scene_alignment"), {})  # stored with the attempt
        attempt_id = self.ledger.begin_attempt(trial.trial_id, episode_path=f"episodes/{expected}",
                                               bench_id=self.bench_id, bench_kind=self.bench.cfg.type,
                                               operator=self.operator.rater if self.op_cfg.type == "terminal"
                                               else self.op_cfg.type, dry_run=self.dry_run,
                                               alignment=gate.get("alignment"),
                                               alignment_override=gate.get("override_reason"))
        self.running_attempt = attempt_id
        self.ledger.log_event(attempt_id, SCENE_STAGED if staged_by else SCENE_UNSTAGED,
                              {"by": staged_by, "scene_id": trial.scene_id})
        for kind, payload in events:
            self.ledger.log_event(attempt_id, kind, payload)
        return attempt_id

    def _episode_meta(self, trial: Any, card: Any, attempt_id: str, timer_s: float) -> EpisodeMeta:
        """What the recorder writes into the episode about the attempt, its plan and its bench."""
        return EpisodeMeta(
            attempt_id=attempt_id, trial_id=trial.trial_id, campaign=self.ledger.campaign,
            evaluation_id=trial.evaluation_id, policy=trial.policy, alias=trial.alias, task=trial.task,
            condition=trial.condition, scene_id=trial.scene_id, instruction=trial.instruction,
            timer_s=timer_s, control_hz=float(card.control_hz), policy_card_yaml=card_yaml(card),
            server_metadata=self.open_policies.metadata.get(trial.card, {}), config_hash=self.ledger.config_hash,
            calibration_id=str(self.bench.calibration_id), bench_type=self.bench.cfg.type,
            extra={"operator": self.op_cfg.type, "planned_timer_s": trial.timer_s,
                   "timer_override": self.op_cfg.timer_s is not None, "cell": trial.cell,
                   "instruction_variant": trial.instruction_variant, "order": trial.order,
                   "matched_group": trial.matched_group or "", "bench_id": self.bench_id,
                   "bench_kind": self.bench.cfg.type, "dry_run": self.dry_run,
                   "calibration_file": self.bench.calibration_file or "",
                   "server_identity": self.open_policies.identity_text(trial.card)},
        )

    def _roll_out(self, trial: Any, card: Any, meta: EpisodeMeta, observers: list[Any]) -> Any:
        """The rollout itself, on the twin's own clock in lockstep when the bench is the twin."""
        from spabench.rollout.ema import EmaFilter
        from spabench.rollout.loop import Rollout

        self.controls.clear()
        clock = self.bench.lockstep_clock()  # the twin runs in lockstep on its own clock
        timing = {"clock": clock, "lockstep": True} if clock is not None else {}
        rollout = Rollout(self.bench, self.open_policies.brokers[trial.card], card, EmaFilter(card.ema_alpha),
                          meta.timer_s, observers, self.controls, go_home_after=self.op_cfg.go_home_after,
                          health=self.health, realtime_priority=self.bench_cfg.realtime_priority, **timing)
        with self.operator.during_rollout(self.controls):
            return rollout.run(meta, trial.instruction)

    def _finish_attempt(self, attempt_id: str, result: Any, rel_path: str) -> bool:
        """The attempt's end in the ledger. False: this bench lost the scene set's claim meanwhile.

        An attempt the e-stop ended is the policy's failure when the operator says it was for unsafe
        policy behaviour (once its recording is complete), else invalid with the cause given."""
        unsafe, text = False, ""
        if result.stop_reason == "estop" and not result.valid:
            cause, text = self.ask_estop_cause(ended_rollout=True) or (None, "")
            if estop_is_failure(cause):
                self.confirm_recorded(attempt_id, result)
                unsafe = result.invalid_reason == "estop"   # not when the recording failed
            if unsafe:   # a valid rollout: the policy's failure, scored below in the same transaction
                result.valid, result.invalid_reason = True, None
            elif result.invalid_reason == "estop":
                result.invalid_reason = estop_invalid_reason(cause, text)
        elif result.valid:
            self.confirm_recorded(attempt_id, result)
        if result.invalid_reason == "storage_error":
            self.running_reason = "storage_error"
        try:
            if unsafe:
                self.ledger.finish_attempt(attempt_id, "complete", "estop", episode_path=rel_path,
                                           unsafe_by=self.operator.rater, unsafe_note=text)
            elif result.valid:
                self.ledger.finish_attempt(attempt_id, "complete", result.stop_reason, episode_path=rel_path)
            else:
                self.ledger.finish_attempt(attempt_id, "invalid", result.stop_reason,
                                           episode_path=self._recorded_path(attempt_id, rel_path),
                                           invalid_reason=result.invalid_reason)
        except ClaimLost as exc:
            # this bench's lease lapsed (it was paused or stalled) and another bench took the set over:
            # that bench already made the attempt invalid ('interrupted'), once; the finish wrote nothing
            # (a compare-and-set), so the attempt is never complete and its trial is run by the taker
            self.running_attempt = None
            self.say(f"attempt {attempt_id}: {exc}; its recording is kept at {rel_path}")
            self.open_claims.lost(exc.evaluation_id, exc.holder, attempt_id)
            return False
        self.running_attempt = None
        return True

    def _score(self, trial: Any, attempt_id: str, result: Any, moved: Any) -> None:
        """The operator's score (prefilled from the motion when configured), unless e-stopped."""
        if not result.valid or self.controls.estopped():  # after an e-stop nothing more is asked
            return
        self.controls.stage = "scoring"
        prefill = None
        if self.op_cfg.prefill_from_motion:
            prefill = motion_prefill(trial.condition, moved, self.operator.rater)
        if prefill is not None:
            self.ledger.log_event(attempt_id, "score_prefill", dataclasses.asdict(prefill))
        rater = self.operator.rater
        version = self.ledger.score_version(attempt_id, rater)  # what this prompt is asked against
        score = self.operator.score(trial, result, prefill)
        if score is None:
            return
        try:
            self.ledger.record_score(attempt_id, score.rater, score.success, score.failure_mode, score.note,
                                     expect_version=version if score.rater == rater else None)
        except ScoreConflict as conflict:  # a review tab scored it under the same name meanwhile
            kept = conflict.current
            said = "withdrawn" if kept is None else ("success" if kept.success else f"failure ({kept.failure_mode})")
            self.ledger.log_event(attempt_id, "score_conflict", {"rater": score.rater, "kept": said,
                                                                 "refused": dataclasses.asdict(score)})
            self.say(f"NOTE: {attempt_id} was scored meanwhile by {score.rater} in the review console ({said}); "
                     "that score is kept and this one was not saved. Re-score it there with a reason if it "
                     "is wrong.")

    def run_trial(self, trial: Any) -> tuple[Any, str | None]:
        """Returns (result or None when the operator ended the session, attempt_id)."""
        from spabench.rollout.observers import ClampCounter, MotionDetector

        card = self._trial_card(trial)
        scene = _scene(self.suite, trial.scene_id)
        ready, staged_by = self._scene_ready(trial, scene)
        if not ready:
            return None, None
        with heap_frozen_for_motion():   # no full garbage collection while the arm moves (see heap)
            if not self._at_home():
                return None, None
            changed = self.open_policies.changed(trial.card, f"before trial {trial.trial_id}")
            if changed is not None:   # swapped between trials: nothing begins against it
                raise changed
            timer_s = self.op_cfg.timer_s or trial.timer_s
            check_space(self.bench, self.recorder, self.campaign_dir, timer_s, trial, card)
            attempt_id = self._begin_attempt(trial, staged_by)
            rel_path = self.recorder.relative_path(attempt_id)
            meta = self._episode_meta(trial, card, attempt_id, timer_s)
            motion = MotionDetector(self.cfg.need("suite").motion_onset)
            clamps = ClampCounter()
            # the detector ends first, so the recorder writes the onset frame into the episode's attributes
            observers = [motion, clamps, self.recorder, *self.operator.observers()]
            result = self._roll_out(trial, card, meta, observers)
        if result.valid:   # swapped while this attempt ran: not counted
            self.identity_error = self.open_policies.changed(trial.card, f"during attempt {attempt_id}")
            if self.identity_error is not None:
                result.valid, result.invalid_reason, result.stop_reason = False, "server_changed", "fault"
                result.detail = "the policy server changed its checkpoint during the attempt"
        if not self._finish_attempt(attempt_id, result, rel_path):
            return dataclasses.replace(result, valid=False, invalid_reason="interrupted",
                                       detail="its scene set was taken over by another bench"), attempt_id
        self.ledger.log_event(attempt_id, "rollout_summary", {
            "steps": result.n_steps, "duration_s": round(result.duration_s, 3), "detail": result.detail,
            "motion_onset": motion.onset, "timer_s": timer_s, "timing": result.timing,
            "camera_frames": result.camera_frames, "clamps": clamps.counts,
            "calibration_file": self.bench.calibration_file, "calibration_id": str(self.bench.calibration_id)})
        if result.health:
            self.ledger.log_event(attempt_id, "health_summary", result.health)
        self._score(trial, attempt_id, result, motion.moved)
        return result, attempt_id

    def confirm_recorded(self, attempt_id: str, result: Any) -> None:
        """A valid rollout counts only once its whole episode (HDF5 and videos) is on disk."""
        if not self.recorder.wait_finished(attempt_id, self.op_cfg.wait_videos_s):
            problem = f"its videos were not finished within {self.op_cfg.wait_videos_s:g} s"
        else:
            problem = self.recorder.episode_error(attempt_id)
        if problem:
            result.valid, result.invalid_reason, result.stop_reason = False, "storage_error", "fault"
            result.detail = f"recording failed: {problem}"

    def _recorded_path(self, attempt_id: str, rel_path: str) -> str:
        """The folder an invalid attempt's recording is in once its videos are done: the final name, or
        `.partial` when something could not be written (a full disk), so the ledger never names a folder
        that does not exist."""
        from spabench.record.recorder import RecordError, resolve_episode_dir

        self.recorder.wait_finished(attempt_id, timeout=INVALID_EPISODE_WAIT_S)
        try:
            return resolve_episode_dir(self.campaign_dir / rel_path).relative_to(self.campaign_dir).as_posix()
        except (RecordError, ValueError):
            return rel_path

    # ---- e-stop ---------------------------------------------------------------------------------
    def ask_estop_cause(self, ended_rollout: bool) -> tuple[str, str] | None:
        """Why the operator e-stopped (suite.rules.ESTOP_CAUSES; 'unsafe' only when the e-stop ended a
        rollout), asked once per session; None when no answer came (an operator without a person, end
        of input, no page watching)."""
        if not self.estop_asked:
            self.estop_asked = True
            self.estop_cause = self.operator.estop_cause(ended_rollout, self.controls.estop() or {})
        return self.estop_cause

    def _log_estop(self, trial: TrialRow | None = None, attempt_id: str | None = None) -> None:
        """The ledger's 'estop' event (with the cause the operator gave), or 'console_lost' for the
        console's dead-man (source, during, wall time, trial; the dead-man's silence), once per session."""
        info = self.controls.estop() or {"source": "?", "during": self.controls.stage, "wall_time": time.time()}
        kind = info.get("kind", "estop")
        payload = {**info, "trial_id": trial.trial_id if trial is not None else None}
        if kind == "estop":
            cause, text = self.estop_cause or (ESTOP_CAUSE_NOT_RECORDED, "")
            payload |= {"cause": cause, "cause_text": text}
        self.ledger.log_event(attempt_id, kind, payload)
        self.estop_logged = True

    def end_by_estop(self, trial: Any = None, attempt_id: str | None = None, result: Any = None) -> int:
        """The session ends after an e-stop (or the console's dead-man), whenever it came: after an
        e-stop the operator says why; it is logged in the ledger and said."""
        if (self.controls.estop() or {}).get("kind", "estop") == "estop":
            self.ask_estop_cause(ended_rollout=False)
        self._log_estop(trial, attempt_id)
        self.say(self.controls.estop_message())
        cause, text = self.estop_cause or (None, "")
        if result is not None and result.stop_reason == "estop" and result.valid:
            self.say(f"{attempt_id}: e-stopped for {ESTOP_CAUSE_LABELS[UNSAFE]}: scored as the policy's failure "
                     f"(failure mode {UNSAFE}); its trial is not run again")
        elif result is not None and result.valid:
            self.say(f"{attempt_id} is complete but unscored: score it with `spabench score` or the console's "
                     "review page")
        elif result is not None and result.stop_reason == "estop":
            said = f"{ESTOP_CAUSE_LABELS[cause]}{': ' + text if text else ''}" if cause else "cause not given"
            self.say(f"{attempt_id}: e-stop ({said}): invalid, its trial is run again")
        return EXIT_BENCH

    # ---- the sequence of trials ---------------------------------------------------------------
    def loop(self) -> int:
        """Trials until the campaign is done, max_trials ran, or something ends the session; the exit code."""
        done = 0
        invalid_streak = 0
        suspect = None  # the trial whose policy server faulted last
        while self.max_trials is None or done < int(self.max_trials):
            if self.controls.estopped():
                return self.end_by_estop()
            trial = self.open_claims.next_trial()
            if trial is None:
                self.say("dry run done: every pending trial ran once; nothing was counted and the trials "
                         "stay pending" if self.dry_run else "campaign complete: every trial has a complete attempt"
                         + (" except the decided comparison's, which the stopping rule leaves unrun"
                            if self.open_claims.skip else ""))
                break
            if suspect is not None:
                if not self.open_policies.server_back(suspect):
                    return EXIT_SERVER_DOWN
                suspect = None
            self.open_policies.check_launched(trial)
            if not motors_ready(self.health, self.bench, self.ledger, self.controls, self.operator, self.say,
                                campaign_dir=self.campaign_dir):
                if self.controls.estopped():
                    return self.end_by_estop(trial)
                return EXIT_BENCH
            try:
                result, attempt_id = self.run_trial(trial)
            except ServerIdentityChanged as exc:   # before the attempt began: nothing was recorded
                self.say(f"error: {exc}")
                return EXIT_CONFIG
            except SceneSetTaken as exc:   # paused past its lease before the attempt began: nothing began
                self.open_claims.lost(exc.evaluation_id, exc.holder)
                continue
            if result is None:
                if self.controls.estopped():
                    return self.end_by_estop(trial)
                self.say("session ended by the operator before the trial started")
                break
            done += 1
            if self.dry_run and result.valid:
                self.open_claims.dry_ran.add(trial.trial_id)
            self._say_progress(attempt_id, result)
            if self.stopping is not None and trial.policy in self.stopping.policies and result.valid:
                self._check_stopping()
            code = self._stop_after(trial, attempt_id, result)
            if code is not None:
                return code
            if not result.valid and result.invalid_reason in SERVER_FAULT_REASONS:
                suspect = trial  # its server is checked before the next attempt starts
            invalid_streak = 0 if result.valid else invalid_streak + 1
            if invalid_streak >= MAX_CONSECUTIVE_INVALID:
                self.say(f"{invalid_streak} invalid attempts in a row (last: {result.invalid_reason}); "
                         "stopping so that the cause can be fixed")
                return EXIT_INVALID_STREAK
        return EXIT_OK

    def _say_progress(self, attempt_id: str | None, result: Any) -> None:
        p = self.ledger.progress()
        status = "complete" if result.valid else f"INVALID ({result.invalid_reason}: {result.detail})"
        if result.valid and result.stop_reason == "estop":
            status = f"FAILURE ({UNSAFE}: e-stopped for {ESTOP_CAUSE_LABELS[UNSAFE]})"
        if self.dry_run:
            status += " (dry run: not counted)"
        self.say(f"[{p['complete']}/{p['trials']}] {attempt_id}: {result.stop_reason} -> {status}; "
                 f"{p['invalid_attempts']} invalid so far, {p['unscored']} unscored")

    def _stop_after(self, trial: Any, attempt_id: str | None, result: Any) -> int | None:
        """The exit code when the attempt's end stops the session (Ctrl-C, e-stop, a storage or
        bench fault), else None."""
        if self.controls.sigint_count:
            self.say("Ctrl-C: attempt aborted, the arm holds; resume with the same command")
            return EXIT_SIGINT
        if self.controls.estopped():
            return self.end_by_estop(trial, attempt_id, result)
        if not result.valid and result.invalid_reason == "server_changed" and self.identity_error is not None:
            self.say(f"error: {self.identity_error}")
            return EXIT_CONFIG
        if not result.valid and result.invalid_reason == "storage_error":
            from spabench.storage_advice import storage_advice

            self.say(f"session stopped: {attempt_id} could not be recorded ({result.detail}); it is "
                     "invalid (storage_error) and will be re-run. The arm holds. "
                     + storage_advice(self.campaign_dir / "episodes", str(result.detail)))
            return EXIT_STORAGE
        if not result.valid and result.invalid_reason in STOP_SESSION_REASONS:
            self.say(f"session stopped after {result.invalid_reason}: check the bench, then resume "
                     "with the same command")
            return EXIT_BENCH
        return None
