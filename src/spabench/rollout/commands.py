"""`spabench run campaign=DIR [operator=...]`: run (or resume) a planned campaign on its bench.

The bench kind the campaign was planned for is binding: the CLI picks that kind's bench preset when
no `bench=` is given, and a bench of the other kind (twin for a robot campaign or the reverse) is
refused unless `dry_run=true`, whose attempts are marked dry_run.

Order of things, chosen so that nothing moves before everything it depends on is known good:
bench binding -> ledger (hash check; attempts left running by a crash become invalid 'interrupted', their partial
folders kept) -> policy clients (health/metadata) -> bench config -> bench connect -> per trial:
checklist + ready gate -> home -> policy reset + EMA reset -> rollout -> recorder close -> score ->
ledger commit. Ctrl-C during a rollout aborts that attempt (invalid 'operator_abort', the arm holds)
and ends the session; everything is disconnected in `finally`.

An e-stop (console button or key, terminal key, a second Ctrl-C) is honoured at any moment of the
session: the session's one StopControl latches it, every blocking motion polls it each step and
holds, and the session ends at its next check with the arm held and an 'estop' ledger event saying
during what (scene reset, homing before the trial, rollout, homing after the rollout, scoring).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.bench.errors import BenchFault, MotionStopped
from spabench.errors import ConfigError, SpabenchError
from spabench.ledger import ClaimLost, LedgerStorageError
from spabench.operator.base import motion_prefill, stage_twin_scene
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
from spabench.rollout.controls import StopControl
from spabench.rollout.types import EpisodeMeta
from spabench.suite.vocabulary import JOINTS

if TYPE_CHECKING:  # annotations only: spabench.config builds the groups and sits above every package
    from spabench.config import SpabenchConfig


log = logging.getLogger(__name__)

INVALID_EPISODE_WAIT_S = 10.0   # how long an invalid attempt's videos may take before the ledger names its folder
EXIT_OK, EXIT_CONFIG, EXIT_BENCH, EXIT_INVALID_STREAK, EXIT_STORAGE, EXIT_SERVER_DOWN, EXIT_SIGINT = \
    0, 2, 3, 4, 5, 6, 130
# Faults after which the session stops: the bench can no longer be trusted, or a person said stop,
# or nothing more can be recorded.
STOP_SESSION_REASONS = frozenset({"estop", "bus_error", "camera_lost", "safety_error", "harness_error",
                                  "storage_error", "undervoltage"})
# Faults after which the policy server's health is checked before the next attempt.
SERVER_FAULT_REASONS = frozenset({"server_lost"})
SERVER_POLL_S = 2.0
MAX_CONSECUTIVE_INVALID = 3


def card_yaml(card: Any) -> str:
    import yaml

    return yaml.safe_dump(dataclasses.asdict(card), sort_keys=False)


def load_cards(names: list[str], cfg: SpabenchConfig, aliases: dict[str, str] | None = None) -> dict[str, Any]:
    """One PolicyCard per card name in the plan; `cfg.policy` (with its overrides) wins for its own
    name, and `cfg.cards.<card or alias>.<field>=...` overrides single fields of any card (e.g. each
    policy's GPU host in a multi-policy campaign). `aliases` (alias -> card) lets a blinded operator
    address a card by its alias; errors then name the alias only."""
    from spabench.policy.card import card_from_mapping, load_card

    aliases = {a: c for a, c in (aliases or {}).items() if a != c}
    by_card: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, fields in cfg.cards.items():
        card = aliases.get(key, key)
        if card not in names:
            allowed = sorted(aliases) if aliases else sorted(names)
            raise ConfigError(f"cards.{key}: no policy card or alias {key!r} in this campaign "
                              f"(allowed: {', '.join(allowed)})")
        by_card.setdefault(card, (key, {}))[1].update(fields)
    cards = {}
    for name in names:
        if cfg.policy is not None and cfg.policy.name == name:
            card = cfg.policy
        else:
            card = load_card(name, search=cfg.group_dirs("policy"))
        if name in by_card:
            key, fields = by_card[name]
            card = card_from_mapping({**dataclasses.asdict(card), **fields}, source=f"cards.{key}")
        cards[name] = card
    return cards


def probe_server(card: Any) -> None:
    """A launched server is up once a fresh client connects: its protocol's own health check."""
    from spabench.policy.factory import make_client

    client = make_client(card)
    try:
        client.connect()
    finally:
        client.close()


def check_bench_binding(campaign_dir: Path, bench_kind: str, dry_run: bool) -> str | None:
    """The planned bench kind; refuses (ConfigError) a bench of another kind unless dry_run."""
    from spabench.plan.planner import planned_bench_kind

    planned = planned_bench_kind(campaign_dir)
    if planned is None or planned == bench_kind:
        return planned
    if not dry_run:
        raise ConfigError(
            f"{campaign_dir}: this campaign was planned for bench kind '{planned}' ({BENCH_WORDS.get(planned, planned)}), "
            f"but bench kind '{bench_kind}' ({BENCH_WORDS.get(bench_kind, bench_kind)}) was asked for; "
            f"{BENCH_WORDS.get(bench_kind, bench_kind)} rollouts never enter a {planned} campaign. Run it on its own "
            f"bench (`spabench run campaign={campaign_dir}` picks bench={planned}), or add dry_run=true for a "
            "dry run whose attempts are marked dry_run and kept out of the results")
    log.warning("dry run: bench kind %s on a campaign planned for %s; attempts are marked dry_run",
                bench_kind, planned)
    return planned


BENCH_WORDS = {"so101": "the SO-101 robot", "sim": "the MuJoCo twin"}


def check_relation_binding(campaign_dir: Path, rule: Any) -> None:
    """Refuses (ConfigError) a Relational Placement rule other than the one the campaign was planned
    with: its scenes were checked for that rule, and its scores must all mean the same thing."""
    from spabench.plan.planner import planned_relation_rule

    planned = planned_relation_rule(campaign_dir)
    if planned is None or planned == rule:
        return
    raise ConfigError(
        f"{campaign_dir}: this campaign was planned with the Relational Placement rule {planned.as_dict()} "
        f"({planned.bound} bound) but conf/suite `relation` now says {rule.as_dict()}; scores under two rules "
        f"never mix. Run with the planned rule (e.g. suite.relation.bound={planned.bound}) or plan a new campaign")


def _scene(suite: Any, scene_id: str) -> Any:
    if suite is None:
        return None
    try:
        return suite.scene(scene_id)
    except Exception:
        return None


def _load_suite(cfg: SpabenchConfig) -> Any:
    from spabench.suite.config import load_suite_of

    return load_suite_of(cfg.need("suite"))


def _open_ledger(campaign_dir: Path, url: str | None = None):
    """The campaign's ledger, refused when the suite or campaign config changed since planning.

    A ledger without the planner's config.yaml beside it (built by another tool) opens unchecked.
    `url` (a shared PostgreSQL ledger) replaces the pointer's URL, e.g. to connect as this bench's role."""
    from spabench.ledger import Ledger
    from spabench.plan.planner import CONFIG_YAML, hash_for_campaign_dir

    if not (campaign_dir / CONFIG_YAML).is_file() and Ledger.exists(campaign_dir):
        log.warning("%s has no %s: the config hash cannot be checked", campaign_dir, CONFIG_YAML)
        return Ledger.open(campaign_dir, url=url, lock=True)
    return Ledger.open(campaign_dir, expect_hash=hash_for_campaign_dir(campaign_dir), url=url,
                       lock=True)  # one session per campaign, before anything is touched


class LeaseKeeper:
    """Renews this bench's claim on its scene set while it works (a thread beside the control loop),
    so the lease lapses only when the bench process dies or hangs."""

    def __init__(self, session: Session, every_s: float):
        self.session, self.every_s = session, every_s
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        s = self.session
        while not self._stop.wait(self.every_s):
            claim = s.claim
            if claim is None:
                continue
            try:
                if not s.ledger.renew_claim(s.bench_id, claim, s.lease_s) and s.claim == claim:
                    self.lost = claim
                    log.warning("bench %s lost its claim on scene set %s (its lease lapsed and another bench "
                                "took it over)", s.bench_id, claim)
            except Exception as exc:  # a ledger hiccup: the next renewal tries again, the lease is longer
                log.warning("lease renewal for scene set %s failed: %s", claim, exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Session:
    """The resources of one `run`: ledger, clients, brokers, bench, recorder, operator."""

    def __init__(self, cfg: SpabenchConfig, out=None, stdin=None):
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
        self.lease_s = cfg.lease_s
        self.ledger_url = cfg.ledger_url
        self.multi_bench = False       # a shared (PostgreSQL) ledger: claim scene sets, renew leases
        self.claim: str | None = None  # the scene set (evaluation id) this bench holds
        self.lease_keeper: LeaseKeeper | None = None
        self.ledger = None
        self.clients: dict[str, Any] = {}
        self.brokers: dict[str, Any] = {}
        self.metadata: dict[str, dict] = {}
        self.cards: dict[str, Any] = {}
        self.bench = None
        self.health = None             # the bench's HealthMonitor (motor telemetry and guards), or None
        self.recorder = None
        self.operator = None
        self.controls = StopControl()
        self.estop_logged = False
        self.running_attempt: str | None = None
        self.blinder: Blinder | None = None
        self._blind_logging = blind_logging(None)
        self.running_reason = "operator_abort"   # how close() ends an attempt left running
        self.supervisor = None                    # the campaign's launched policy servers
        self.launched: list[str] = []             # the servers this session started (launch=true)
        self.identities: dict[str, Any] = {}      # card -> the ServerIdentity that answered

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)
        self.said.append(text)

    # ---- start-up, in the order that keeps the arm still until everything is known good --------
    def open(self) -> bool:
        from spabench.bench.bench import make_bench
        from spabench.policy.broker import ActionBroker
        from spabench.policy.endpoints import check_protocol
        from spabench.policy.factory import make_client
        from spabench.policy.preflight import check_card_against_server
        from spabench.record.recorder import Recorder

        self.check_identity_override()
        planned = check_bench_binding(self.campaign_dir, self.bench_cfg.type, self.cfg.dry_run)
        check_relation_binding(self.campaign_dir, self.cfg.need("suite").relation)
        # dry_run=true means a dry run on any bench: its attempts are marked and kept out of the results
        self.dry_run = self.cfg.dry_run or (planned is not None and planned != self.bench_cfg.type)
        if self.op_cfg.type == "auto" and self.bench_cfg.type != "sim":
            raise ConfigError(f"operator=auto scores from the twin's object poses and runs only on the twin; "
                              f"at the robot (bench kind {self.bench_cfg.type}) use operator=terminal (the "
                              "default), operator=web or operator=unattended")
        self.ledger = _open_ledger(self.campaign_dir, self.ledger_url)
        self.ledger.reconnect_s = self.cfg.reconnect_s
        self._blind(Blinder.for_trials(self.ledger.trials()))
        # every card of the plan, with its overrides: a bad cards.<name>.<field> fails before any write
        trials = self.ledger.trials()
        self.cards = load_cards(list(dict.fromkeys(t.card for t in trials)), self.cfg,
                                aliases={t.alias: t.card for t in trials})
        self.multi_bench = self.ledger.storage.multi_bench
        if self.multi_bench:  # one live process per bench id; then this bench's own leftovers only
            self.ledger.lock_bench(self.bench_id)
            interrupted = self.ledger.mark_interrupted(bench_id=self.bench_id)
        else:
            interrupted = self.ledger.mark_interrupted()
        for attempt_id in interrupted:
            self.say(f"attempt {attempt_id} was interrupted (kill or crash): marked invalid, "
                     "its partial recording is kept; the trial will be re-run")
        from spabench.record.recovery import recover_campaign

        recover_campaign(self.ledger, self.campaign_dir, say=self.say,  # .partial folders -> final
                         bench_id=self.bench_id if self.multi_bench else None)
        pending = self.ledger.pending_trials()
        if not pending:
            self.say(f"campaign {self.campaign_dir}: every trial has a complete attempt")
            return False
        self._blind(Blinder.for_trials(self.ledger.trials(), self.cards))
        names = set(t.card for t in pending)
        self.cards = {n: c for n, c in self.cards.items() if n in names}
        self.start_servers()
        for name, card in self.cards.items():  # policies first: nothing moves if one is unreachable
            check_protocol(card, self.who(name))
            client = make_client(card)
            try:
                self.metadata[name] = dict(client.connect() or {})
                check_card_against_server(card, self.metadata[name], f"{card.host}:{card.port}")
                self.pin_identity(name, self.metadata[name])
            except Exception:
                client.close()
                raise
            self.clients[name] = client
            self.brokers[name] = ActionBroker(client, card)
        self.suite = _load_suite(self.cfg)
        # the arm's Cartesian envelope is the suite's hardware/bench.yaml: checked before connecting
        self.bench = make_bench(self.bench_cfg, workspace=self.suite.geometry.arm_envelope)
        self.bench.connect()
        self.health = self.bench.health_monitor()
        self.recorder = Recorder(self.campaign_dir, self.op_cfg.recorder_config())
        from spabench.operator.auto import make_operator

        self.operator = make_operator(self.op_cfg, bench=self.bench, stdin=self.stdin, stdout=self.out)
        self.bench.adopt_suite(self.suite)   # the twin scores by the configured success rules
        self.controls.stage = "session start"
        if self.multi_bench:
            self.say(f"bench {self.bench_id}: shared ledger {self.ledger.location}; claims whole scene sets, "
                     f"lease {self.lease_s:g} s")
            self.lease_keeper = LeaseKeeper(self, self.lease_s / 3.0)
        if not self.operator.begin_session(self):  # e.g. the browser's camera check was not confirmed
            self.say("session ended by the operator before the first trial")
            return False
        return True

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

    def close(self) -> None:
        self.controls.stage = "shutdown"
        if self.lease_keeper is not None:
            self.lease_keeper.stop()   # the claim is kept: this bench resumes it first, else it lapses
        if self.bench is not None and self.bench.is_connected:
            try:
                self.bench.hold()
            except Exception as exc:
                log.warning("hold at shutdown failed: %s", exc)
        if self.running_attempt is not None and self.ledger is not None:
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
        if self.recorder is not None:
            if not self.recorder.wait_idle(self.op_cfg.wait_videos_s):
                self.say("warning: some videos were still being written at exit; their folders stay .partial "
                         "until the next `spabench run` of this campaign finishes them")
            self.recorder.close()
        for broker in self.brokers.values():
            broker.stop()
        for client in self.clients.values():
            try:
                client.close()
            except Exception:
                pass
        if self.launched and self.supervisor is not None:   # run launch=true: down at the end
            try:
                self.supervisor.down(self.launched)
            except Exception as exc:
                self.say(f"warning: the launched policy servers could not all be stopped ({exc}); "
                         f"`spabench servers down campaign={self.campaign_dir}` stops them")
        if self.bench is not None:
            held = self.bench.is_connected and (self.controls.estopped() or not self._arm_at_home())
            try:
                self.bench.disconnect(keep_torque=held)
            except Exception as exc:
                log.warning("bench disconnect failed: %s", exc)
            if held:
                why = "e-stop" if self.controls.estopped() else "the arm is not at its home pose"
                self.say(f"{why}: the arm is held where it stopped, torque on (it would drop with torque off). "
                         "Support it, then switch its power off or run the next session to home it.")
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

    # ---- policy servers ------------------------------------------------------------------------
    def who(self, name: str) -> str:
        """How messages name a card's policy: its alias in a blind campaign, else the card."""
        if self.blinder is None:
            return f"policy card '{name}'"
        return f"policy {self.blinder.redact(name)}"

    def check_identity_override(self) -> None:
        """`accept_new_identity=true` needs a reason, and a reason at `run` is only for it."""
        if self.cfg.accept_new_identity and not (self.cfg.reason or "").strip():
            raise ConfigError("run: accept_new_identity=true needs reason=\"...\" (why the policy server's new "
                              "checkpoint is accepted; logged in the ledger and listed in the report)")
        if self.cfg.reason is not None and not self.cfg.accept_new_identity:
            raise ConfigError("run: reason= goes with accept_new_identity=true (allowed at run: both or neither)")

    def start_servers(self) -> None:
        """Pre-flight of the servers: no two cards on one host and port; with launch=true every
        launched server is started (and taken down at the end); a launched server that died is
        restarted (launch.max_restarts)."""
        from spabench.policy.endpoints import check_collisions
        from spabench.policy.servers import Supervisor

        check_collisions(self.cards, {n: self.who(n) for n in self.cards})
        labels = {n: self.blinder.redact(n) if self.blinder else n for n in self.cards}
        self.supervisor = Supervisor(self.campaign_dir, self.ledger, self.say, labels)
        if self.cfg.launch:
            self.launched = self.supervisor.up(self.cards, probe_server)
        else:
            for name, card in self.cards.items():
                self.supervisor.ensure_up(name, card, probe_server)

    def pin_identity(self, name: str, metadata: dict) -> None:
        """Pin (first connection of the campaign) or compare the identity of the card's server."""
        from spabench.policy.identity import identity_of
        from spabench.policy.servers import pin_or_compare

        card = self.cards[name]
        identity = identity_of(card, metadata, self.supervisor.launched_digest(name) if self.supervisor else None)
        what = pin_or_compare(self.ledger, name, self.who(name), identity,
                              accept=bool(self.cfg.accept_new_identity), reason=self.cfg.reason)
        if what == "accepted":
            self.say(f"{self.who(name)}: new server identity accepted ({identity.describe()}); "
                     f"reason: {self.cfg.reason}")
        elif what == "pinned":
            log.info("%s: server identity pinned: %s", name, identity.describe())
        self.identities[name] = identity

    def identity_text(self, name: str) -> str:
        """The identity that answered the card, as JSON (the episode's `extra.server_identity`)."""
        import json

        identity = self.identities.get(name)
        return json.dumps(identity.as_dict(), sort_keys=True) if identity is not None else ""

    def check_launched(self, trial: Any) -> None:
        """Before an attempt: a launched server that died is restarted and its identity checked again."""
        card = self.cards[trial.card]
        if self.supervisor is not None and self.supervisor.ensure_up(trial.card, card, probe_server):
            problem = self._server_answers(trial.card)
            if problem is not None:
                raise ConfigError(f"the restarted server of {self.who(trial.card)} does not answer: {problem}")

    def _server_answers(self, name: str) -> str | None:
        """None when a fresh connection to the card's server works and still fits the card, else why not.

        A fresh client, so that the session's own client (and a request its broker may still have
        in flight) is left alone; a server restarted with another checkpoint fails pre-flight."""
        from spabench.policy.factory import make_client
        from spabench.policy.preflight import check_card_against_server

        card = self.cards[name]
        probe = make_client(card)
        try:
            metadata = dict(probe.connect() or {})
        except SpabenchError as exc:
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        finally:
            try:
                probe.close()
            except Exception:  # noqa: BLE001 - the probe is thrown away
                pass
        check_card_against_server(card, metadata, f"{card.host}:{card.port}")  # a ConfigError stops the run
        self.pin_identity(name, metadata)   # another checkpoint: ServerIdentityChanged stops the run
        self.metadata[name] = metadata
        return None

    def _server_back(self, trial: Any) -> bool:
        """After a server fault: True when the server answers (at once, or within server_wait_s)."""
        import time

        card = self.cards[trial.card]
        where = f"the policy server of {trial.alias} ({card.host}:{card.port})"
        if self.supervisor is not None:
            self.supervisor.ensure_up(trial.card, card, probe_server)   # launched and dead: restart it
        problem = self._server_answers(trial.card)
        if problem is None:
            self.say(f"{where} answers again; continuing")
            return True
        wait_s = float(self.op_cfg.server_wait_s or 0.0)
        if wait_s > 0:
            self.say(f"{where} does not answer ({problem}); waiting up to {wait_s:g} s for it to come back "
                     "(restart it now; Ctrl-C ends the session)")
            deadline = time.monotonic() + wait_s
            while problem is not None and time.monotonic() < deadline:
                time.sleep(min(SERVER_POLL_S, max(0.0, deadline - time.monotonic())))
                problem = self._server_answers(trial.card)
            if problem is None:
                self.say(f"{where} answers again; continuing")
                return True
        self.ledger.log_event(None, "server_down", {"card": trial.card, "host": card.host, "port": card.port,
                                                    "error": problem})
        self.say(f"{where} does not answer ({problem}): session stopped, so that no attempt is recorded "
                 "against a dead server. Restart the server, then resume with the same command.")
        return False

    # ---- one trial ----------------------------------------------------------------------------
    def _stage_scene(self, scene: Any) -> str | None:
        """The twin builds the trial's scene itself, whoever the operator is; "twin" when it did."""
        return "twin" if stage_twin_scene(self.bench, scene) else None

    def run_trial(self, trial: Any) -> tuple[Any, str | None]:
        """Returns (result or None when the operator ended the session, attempt_id)."""
        from spabench.policy.ema import EmaFilter
        from spabench.rollout.loop import Rollout
        from spabench.rollout.observers import ClampCounter, MotionDetector

        card, broker = self.cards[trial.card], self.brokers[trial.card]
        planned_hz = getattr(trial, "control_hz", None)
        if planned_hz and float(planned_hz) != float(card.control_hz):  # the plan's rate (campaign override)
            card = dataclasses.replace(card, control_hz=float(planned_hz))
        scene = _scene(self.suite, trial.scene_id)
        ref = reference_image(self.ledger, self.campaign_dir, trial.evaluation_id,
                              self.op_cfg.reference_camera, self.op_cfg.reference_fallback)
        first = reference_attempt(self.ledger, trial.evaluation_id)
        if ref is None and first is not None and first.bench_id in (None, self.bench_id):
            # the reference attempt's videos may still be encoding (e.g. it was the previous trial)
            self.recorder.wait_idle(30.0)
            ref = reference_image(self.ledger, self.campaign_dir, trial.evaluation_id,
                                  self.op_cfg.reference_camera, self.op_cfg.reference_fallback)
        if scene is not None:
            text = checklist(scene, self.suite, ref, instruction=trial.instruction,
                             relation_rule=self.cfg.need("suite").relation)
        else:
            text = f"Scene {trial.scene_id} (no scene specification loaded)\nReference image: {ref or 'none yet'}"
        staged_by = self._stage_scene(scene)
        self.controls.stage = "scene reset"
        if not self.operator.wait_scene_ready(trial, scene, text) or self.controls.estopped():
            return None, None
        if staged_by is None and self.operator.confirms_scene:
            staged_by = "operator"
        self.controls.stage = "homing before the trial"
        try:
            with self.operator.during_homing(self.controls):
                self.bench.go_home(should_stop=self.controls.estopped)
        except MotionStopped as exc:  # e-stopped on the way: the bench holds; loop() ends the session
            log.info("%s", exc)
            return None, None
        if self.controls.estopped():
            return None, None
        self.check_space(trial, card)
        n_before = len(self.ledger.attempts_for(trial.trial_id))
        expected = f"{trial.trial_id}-a{n_before + 1}"  # the ledger's id scheme, so the path is known up front
        attempt_id = self.ledger.begin_attempt(trial.trial_id, episode_path=f"episodes/{expected}",
                                               bench_id=self.bench_id, bench_kind=self.bench.cfg.type,
                                               operator=self.op_cfg.rater if self.op_cfg.type == "terminal"
                                               else self.op_cfg.type, dry_run=self.dry_run)
        self.running_attempt = attempt_id
        self.ledger.log_event(attempt_id, SCENE_STAGED if staged_by else SCENE_UNSTAGED,
                              {"by": staged_by, "scene_id": trial.scene_id})
        for kind, payload in self.operator.attempt_events():  # e.g. the scene alignment at "scene ready"
            self.ledger.log_event(attempt_id, kind, payload)
        rel_path = self.recorder.relative_path(attempt_id)
        timer_s = self.op_cfg.timer_s or trial.timer_s
        meta = EpisodeMeta(
            attempt_id=attempt_id, trial_id=trial.trial_id, campaign=self.ledger.campaign,
            evaluation_id=trial.evaluation_id, policy=trial.policy, alias=trial.alias, task=trial.task,
            condition=trial.condition, scene_id=trial.scene_id, instruction=trial.instruction,
            timer_s=timer_s, control_hz=float(card.control_hz), policy_card_yaml=card_yaml(card),
            server_metadata=self.metadata.get(trial.card, {}), config_hash=self.ledger.config_hash,
            calibration_id=str(self.bench.calibration_id), bench_type=self.bench.cfg.type,
            extra={"operator": self.op_cfg.type, "planned_timer_s": trial.timer_s,
                   "timer_override": self.op_cfg.timer_s is not None, "cell": trial.cell,
                   "instruction_variant": trial.instruction_variant, "order": trial.order,
                   "matched_group": trial.matched_group or "", "bench_id": self.bench_id,
                   "bench_kind": self.bench.cfg.type, "dry_run": self.dry_run,
                   "calibration_file": self.bench.calibration_file or "",
                   "server_identity": self.identity_text(trial.card)},
        )
        motion = MotionDetector(self.cfg.need("suite").motion_onset)
        clamps = ClampCounter()
        # the detector ends first, so the recorder writes the onset frame into the episode's attributes
        observers = [motion, clamps, self.recorder, *self.operator.observers()]
        self.controls.clear()
        sim_time = getattr(self.bench, "sim_time", None)  # the twin runs in lockstep on its own clock
        timing = {"clock": sim_time, "lockstep": True} if callable(sim_time) else {}
        rollout = Rollout(self.bench, broker, card, EmaFilter(card.ema_alpha), timer_s, observers,
                          self.controls, go_home_after=self.op_cfg.go_home_after, health=self.health, **timing)
        with self.operator.during_rollout(self.controls):
            result = rollout.run(meta, trial.instruction)
        if result.valid:
            self.confirm_recorded(attempt_id, result)
        if result.invalid_reason == "storage_error":
            self.running_reason = "storage_error"
        try:
            if result.valid:
                self.ledger.finish_attempt(attempt_id, "complete", result.stop_reason, episode_path=rel_path)
            else:
                self.ledger.finish_attempt(attempt_id, "invalid", result.stop_reason,
                                           episode_path=self._recorded_path(attempt_id, rel_path),
                                           invalid_reason=result.invalid_reason)
        except ClaimLost as exc:
            # this bench's lease lapsed (it stalled) and another bench took the set over: that bench
            # already made the attempt invalid ('interrupted'); the finish wrote nothing
            self.running_attempt = None
            self.say(f"attempt {attempt_id}: {exc}; its recording is kept at {rel_path}")
            self.claim = None
            return dataclasses.replace(result, valid=False, invalid_reason="interrupted"), attempt_id
        self.running_attempt = None
        self.ledger.log_event(attempt_id, "rollout_summary", {
            "steps": result.n_steps, "duration_s": round(result.duration_s, 3), "detail": result.detail,
            "motion_onset": motion.onset, "timer_s": timer_s, "timing": result.timing,
            "camera_frames": result.camera_frames, "clamps": clamps.counts,
            "calibration_file": self.bench.calibration_file, "calibration_id": str(self.bench.calibration_id)})
        if result.health:
            self.ledger.log_event(attempt_id, "health_summary", result.health)
        if result.valid and not self.controls.estopped():  # after an e-stop nothing more is asked
            self.controls.stage = "scoring"
            prefill = None
            if self.op_cfg.prefill_from_motion:
                prefill = motion_prefill(trial.condition, motion.moved, self.operator.rater)
            if prefill is not None:
                self.ledger.log_event(attempt_id, "score_prefill", dataclasses.asdict(prefill))
            score = self.operator.score(trial, result, prefill)
            if score is not None:
                self.ledger.record_score(attempt_id, score.rater, score.success, score.failure_mode, score.note)
        return result, attempt_id

    def next_trial(self) -> Any:
        """The next trial this bench runs. One bench (SQLite): the lowest-order pending trial. Several
        benches (PostgreSQL): the next trial of this bench's scene set; when the set is done, claim the
        next free one; when every pending set is held by another bench, wait (a dead bench's lease
        lapses and its set comes free)."""
        if not self.multi_bench:
            return self.ledger.next_trial()
        waiting = False
        while True:
            if self.claim is not None and self.lease_keeper is not None and self.lease_keeper.lost == self.claim:
                self.say(f"bench {self.bench_id}: scene set {self.claim} was taken over by another bench")
                self.claim = None
            if self.claim is not None:
                trial = self.ledger.next_trial(self.claim)
                if trial is not None:
                    return trial
                done, self.claim = self.claim, None      # first, so the lease keeper stops renewing it
                self.ledger.release_claim(self.bench_id, done)
            eid = self.ledger.claim_scene_set(self.bench_id, self.lease_s)
            if eid is not None:
                self.claim = eid
                self.say(f"bench {self.bench_id}: claimed scene set {eid}")
                continue
            if not self.ledger.pending_trials():
                return None
            if not waiting:
                held = sorted({c["bench_id"] for c in self.ledger.claims() if c["bench_id"]})
                self.say(f"bench {self.bench_id}: every pending scene set is held by another bench "
                         f"({', '.join(held) or '?'}); waiting for them (a lapsed lease frees a set)")
                waiting = True
            time.sleep(min(self.lease_s / 3.0, 2.0))

    def check_space(self, trial: Any, card: Any) -> None:
        """Refuse to start an attempt whose recording would not fit on the campaign's disk."""
        from spabench.rollout.space import check_free_space, expected_episode_bytes

        cams = getattr(getattr(self.bench, "cfg", None), "cameras", {}) or {}
        shapes = {name: (int(getattr(c, "height", 480)), int(getattr(c, "width", 640)), 3)
                  for name, c in cams.items()}
        timer_s = self.op_cfg.timer_s or trial.timer_s
        expected = expected_episode_bytes(timer_s, float(card.control_hz), shapes,
                                          self.campaign_dir / "episodes", video=self.recorder.config.video)
        what = f"the next attempt ({trial.trial_id}, {timer_s:g} s)"
        check_free_space(self.campaign_dir / "episodes", expected, what)
        if os.stat(self.campaign_dir).st_dev != os.stat(self.campaign_dir / "episodes").st_dev:
            check_free_space(self.campaign_dir, 0, f"the ledger of {what}")

    def confirm_recorded(self, attempt_id: str, result: Any) -> None:
        """A valid rollout counts only once its whole episode (HDF5 and videos) is on disk."""
        if not self.recorder.wait_finished(attempt_id, self.op_cfg.wait_videos_s):
            problem = f"its videos were not finished within {self.op_cfg.wait_videos_s:g} s"
        else:
            problem = self.recorder.episode_error(attempt_id)
        if problem:
            result.valid, result.invalid_reason, result.stop_reason = False, "storage_error", "fault"
            result.detail = f"recording failed: {problem}"

    def _log_estop(self, trial: Any = None, attempt_id: str | None = None) -> None:
        """The ledger's 'estop' event (source, during, wall time, trial), once per session."""
        info = self.controls.estop() or {"source": "?", "during": self.controls.stage, "wall_time": time.time()}
        self.ledger.log_event(attempt_id, "estop", {**info, "trial_id": getattr(trial, "trial_id", None)})
        self.estop_logged = True

    def end_by_estop(self, trial: Any = None, attempt_id: str | None = None, result: Any = None) -> int:
        """The session ends after an e-stop, whenever it came: logged in the ledger and said."""
        self._log_estop(trial, attempt_id)
        self.say(self.controls.estop_message())
        if result is not None and result.valid:
            self.say(f"{attempt_id} is complete but unscored: score it with `spabench score` or the console's "
                     "review page")
        return EXIT_BENCH

    def loop(self) -> int:
        done = 0
        invalid_streak = 0
        suspect = None  # the trial whose policy server faulted last
        while self.max_trials is None or done < int(self.max_trials):
            if self.controls.estopped():
                return self.end_by_estop()
            trial = self.next_trial()
            if trial is None:
                self.say("campaign complete: every trial has a complete attempt")
                break
            if suspect is not None:
                if not self._server_back(suspect):
                    return EXIT_SERVER_DOWN
                suspect = None
            self.check_launched(trial)
            if not self.motors_ready():
                if self.controls.estopped():
                    return self.end_by_estop(trial)
                return EXIT_BENCH
            result, attempt_id = self.run_trial(trial)
            if result is None:
                if self.controls.estopped():
                    return self.end_by_estop(trial)
                self.say("session ended by the operator before the trial started")
                break
            done += 1
            p = self.ledger.progress()
            status = "complete" if result.valid else f"INVALID ({result.invalid_reason}: {result.detail})"
            self.say(f"[{p['complete']}/{p['trials']}] {attempt_id}: {result.stop_reason} -> {status}; "
                     f"{p['invalid_attempts']} invalid so far, {p['unscored']} unscored")
            if self.controls.sigint_count:
                self.say("Ctrl-C: attempt aborted, the arm holds; resume with the same command")
                return EXIT_SIGINT
            if self.controls.estopped():
                return self.end_by_estop(trial, attempt_id, result)
            if not result.valid and result.invalid_reason == "storage_error":
                from spabench.rollout.space import storage_advice

                self.say(f"session stopped: {attempt_id} could not be recorded ({result.detail}); it is "
                         "invalid (storage_error) and will be re-run. The arm holds. "
                         + storage_advice(self.campaign_dir / "episodes", str(result.detail)))
                return EXIT_STORAGE
            if not result.valid and result.invalid_reason in SERVER_FAULT_REASONS:
                suspect = trial  # its server is checked before the next attempt starts
            if not result.valid and result.invalid_reason in STOP_SESSION_REASONS:
                self.say(f"session stopped after {result.invalid_reason}: check the bench, then resume "
                         "with the same command")
                return EXIT_BENCH
            invalid_streak = 0 if result.valid else invalid_streak + 1
            if invalid_streak >= MAX_CONSECUTIVE_INVALID:
                self.say(f"{invalid_streak} invalid attempts in a row (last: {result.invalid_reason}); "
                         "stopping so that the cause can be fixed")
                return EXIT_INVALID_STREAK
        return EXIT_OK

    # ---- motor health between trials ----------------------------------------------------------
    def motors_ready(self) -> bool:
        """Before a trial: a motor at or above the warning temperature pauses the session until every
        motor is below the resume temperature (shown in the terminal and on the bench page); a supply
        below the servos' range stops it. False: the session ends (e-stop, undervoltage)."""
        if self.health is None:
            return True
        from spabench.bench.health import hot_motors, temperatures_text

        cfg = self.health.cfg
        sample = self.bench.read_health()
        if float(sample.voltage_v.min()) < cfg.min_voltage_v:
            self.ledger.log_event(None, "undervoltage", {"voltage_v": sample.voltage_v.tolist(),
                                                         "min_voltage_v": cfg.min_voltage_v})
            self.say(f"session stopped: the servo supply reads {sample.voltage_v.min():.1f} V, below "
                     f"{cfg.min_voltage_v:g} V (bench.health.min_voltage_v). Check the power supply, then resume "
                     "with the same command")
            return False
        hot = hot_motors(sample, cfg.warn_temperature_c)
        if not hot:
            return True
        self.controls.stage = "cooling down"
        started, first = time.monotonic(), sample
        self.say(f"motors hot ({', '.join(f'{j} {t:.0f} C' for j, t in hot.items())}; warning at "
                 f"{cfg.warn_temperature_c:g} C): pausing before the next trial until every motor is below "
                 f"{cfg.resume_temperature_c:g} C")
        while float(sample.temperature_c.max()) >= cfg.resume_temperature_c:
            waited = time.monotonic() - started
            text = (f"cooling down, {waited:.0f} s so far, resume below {cfg.resume_temperature_c:g} C: "
                    f"{temperatures_text(sample)}")
            self.say(text)
            self.operator.show_health(text)
            deadline = time.monotonic() + cfg.cool_poll_s
            while time.monotonic() < deadline:
                if self.controls.estopped():
                    return False
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            sample = self.bench.read_health()
        waited = time.monotonic() - started
        self.ledger.log_event(None, "cool_down", {
            "waited_s": round(waited, 1), "hot": hot, "resume_temperature_c": cfg.resume_temperature_c,
            "before_c": dict(zip(JOINTS, first.temperature_c.tolist())),
            "after_c": dict(zip(JOINTS, sample.temperature_c.tolist()))})
        text = f"motors cooled below {cfg.resume_temperature_c:g} C after {waited:.0f} s ({temperatures_text(sample)}); continuing"
        self.say(text)
        self.operator.show_health(text)
        return True

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


def run(cfg: SpabenchConfig, out=None, stdin=None) -> int:
    """Entry point of `spabench run`. Returns the exit code."""
    from spabench.rollout.space import NoSpaceForAttempt

    session = Session(cfg, out=out, stdin=stdin)
    code = EXIT_OK
    try:
        try:
            if not session.open():
                return session.end_by_estop() if session.controls.estopped() else EXIT_OK
        except SpabenchError as exc:  # nothing has moved: a config, ledger, policy or bench problem
            session.say(f"error: {exc}")
            return EXIT_BENCH if isinstance(exc, BenchFault) else EXIT_CONFIG
        code = session.loop()
    except (LedgerStorageError, NoSpaceForAttempt) as exc:  # nothing more can be recorded: stop here
        session.running_reason = "storage_error"
        session.say(f"session stopped, the arm holds: {exc}")
        code = EXIT_STORAGE
    except SpabenchError as exc:
        session.say(f"error: {exc}")
        code = EXIT_BENCH
    except KeyboardInterrupt:
        session.say("Ctrl-C: stopping; the arm holds")
        code = EXIT_SIGINT
    finally:
        # a Ctrl-C while shutting down (videos, ledger, bus) latches an e-stop; the cleanup goes on
        with session.controls.sigint_aborts():
            session.close()
    return code
