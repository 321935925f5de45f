"""The session's policy servers: the plan's cards with their overrides, the pre-flight that connects
to every server before the arm moves (protocol, card against metadata, pinned identity), launched
servers kept up, and a server's recovery after a fault.

Policies come first in a session: nothing moves if one is unreachable or answers with another
checkpoint than the one the campaign pinned."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.errors import ConfigError, SpabenchError

if TYPE_CHECKING:
    from spabench.operator.blinding import Blinder
    from spabench.rollout.commands import (
        RunConfig,  # annotations only: spabench.config builds the groups and sits above every package
    )

log = logging.getLogger(__name__)

SERVER_POLL_S = 2.0


def card_yaml(card: Any) -> str:
    import yaml

    return yaml.safe_dump(dataclasses.asdict(card), sort_keys=False)


def load_cards(names: list[str], overrides: dict[str, dict[str, Any]], search: list[Path], policy: Any = None,
               aliases: dict[str, str] | None = None, blind: bool = False) -> dict[str, Any]:
    """One PolicyCard per card name in the plan, from the card files in `search`; `policy` (a card given
    with policy=..., bench check) wins for its own name, and `overrides` (`cards.<card or alias>.<field>=...`)
    overrides single fields of any card (e.g. each
    policy's GPU host in a multi-policy campaign). `aliases` (alias -> card) lets a blinded operator
    address a card by its alias; errors then name the alias only. `blind` (the campaign's blind aliases
    are on): a card is addressed by its alias only, a real card name is refused like an unknown one, so
    no answer (nor the alias the screen would show for it) ties a policy to its alias."""
    from spabench.policy.card import card_from_mapping, load_card

    aliases = {a: c for a, c in (aliases or {}).items() if a != c}
    by_card: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, fields in overrides.items():
        if blind and key not in aliases:   # the key is not echoed: the screen would show a card name as its alias
            raise ConfigError(f"a cards.<name> key is not one of this campaign's aliases: with blind aliases on, "
                              f"address cards by alias ({', '.join(sorted(aliases))}); plan.csv's alias column "
                              "says which card each is")
        card_name = aliases.get(key, key)
        if card_name not in names:
            allowed = sorted(aliases) if aliases else sorted(names)
            raise ConfigError(f"cards.{key}: no policy card or alias {key!r} in this campaign "
                              f"(allowed: {', '.join(allowed)})")
        by_card.setdefault(card_name, (key, {}))[1].update(fields)
    cards = {}
    for name in names:
        card = policy if policy is not None and policy.name == name else load_card(name, search=search)
        if name in by_card:
            key, fields = by_card[name]
            base = dataclasses.asdict(card)
            if "horizon" in fields and "execute_steps" not in fields and card.execute_steps == card.horizon:
                base["execute_steps"] = None   # a card that executes the whole chunk keeps doing so
            card = card_from_mapping({**base, **fields}, source=f"cards.{key}")
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


def check_identity_override(cfg: RunConfig) -> None:
    """`accept_new_identity=true` needs a reason, and a reason at `run` is only for it."""
    if cfg.accept_new_identity and not (cfg.reason or "").strip():
        raise ConfigError("run: accept_new_identity=true needs reason=\"...\" (why the policy server's new "
                          "checkpoint is accepted; logged in the ledger and listed in the report)")
    if cfg.reason is not None and not cfg.accept_new_identity:
        raise ConfigError("run: reason= goes with accept_new_identity=true (allowed at run: both or neither)")


class PolicyServers:
    """The cards of the trials still to run, their clients and action brokers, and the identity each
    server answered with. `close()` stops what `connect()` opened, also after a partial connect."""

    def __init__(self, cfg: RunConfig, cards: dict[str, Any], campaign_dir: Path, ledger: Any,
                 say: Callable[[str], None], blinder: Blinder | None, server_wait_s: float | None):
        self.cfg, self.cards, self.campaign_dir, self.ledger = cfg, cards, campaign_dir, ledger
        self.say, self.blinder, self.server_wait_s = say, blinder, server_wait_s
        self.clients: dict[str, Any] = {}
        self.brokers: dict[str, Any] = {}
        self.metadata: dict[str, dict] = {}
        self.supervisor: Any = None                # the campaign's launched policy servers
        self.launched: list[str] = []             # the servers this session started (launch=true)
        self.identities: dict[str, Any] = {}      # card -> the ServerIdentity that answered
        self._local_digests: dict[str, str] = {}  # card -> its local checkpoint's digest (not launched here)

    def who(self, name: str) -> str:
        """How messages name a card's policy: its alias in a blind campaign, else the card."""
        if self.blinder is None:
            return f"policy card '{name}'"
        return f"policy {self.blinder.redact(name)}"

    def connect(self) -> None:
        """Every server up (launched if asked), then a client and a broker per card, each checked
        against its card and its pinned identity."""
        from spabench.policy.broker import ActionBroker
        from spabench.policy.endpoints import check_protocol
        from spabench.policy.factory import make_client
        from spabench.policy.preflight import check_card_against_server

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
        identity = identity_of(card, metadata, *self.local_digest(name))
        what = pin_or_compare(self.ledger, name, self.who(name), identity,
                              accept=bool(self.cfg.accept_new_identity), reason=self.cfg.reason)
        if what == "accepted":
            self.say(f"{self.who(name)}: new server identity accepted ({identity.describe()}); "
                     f"reason: {self.cfg.reason}")
        elif what == "pinned":
            log.info("%s: server identity pinned: %s", name, identity.describe())
        self.identities[name] = identity

    def changed(self, name: str, when: str) -> Exception | None:
        """Between trials: the error to stop with when the card's server no longer answers with the
        identity this session connected to (a checkpoint swapped without a restart), else None.

        One fresh connection per call, so its metadata on connect is current (openpi's first frame,
        GR00T's modality config, the HTTP status routes): one round trip per attempt, none per tick.
        A server that does not answer is left to the rollout's own fault handling."""
        from spabench.policy.factory import make_client
        from spabench.policy.identity import identity_of
        from spabench.policy.servers import ServerIdentityChanged, changed_in_session

        pinned = self.identities.get(name)
        client = self.clients.get(name)
        if pinned is None or not getattr(client, "identity_probe_between_trials", True):
            return None
        card = self.cards[name]
        probe = make_client(card)
        try:
            metadata = dict(probe.connect() or {})
        except SpabenchError as exc:
            log.info("%s: identity not checked %s: %s", name, when, exc)
            return None
        finally:
            with contextlib.suppress(Exception):
                probe.close()
        try:
            identity = identity_of(card, metadata, *self.local_digest(name))
        except ConfigError as exc:   # e.g. it now advertises another digest than the card's checkpoint
            return ServerIdentityChanged(f"{self.who(name)}, {when}: {exc}")
        return changed_in_session(self.ledger, name, self.who(name), pinned, identity, when)

    def local_digest(self, name: str) -> tuple[str | None, str]:
        """(digest, source) of the card's checkpoint as computed on this machine: the one this campaign's
        launcher computed when it started the server ("launch"), else, when the card names a local
        checkpoint and the server is not run over ssh, computed now from its files ("local"; once per
        session). The same unchanged checkpoint thus gives one identity whoever started its server."""
        from spabench.policy.identity import checkpoint_digest

        launched = self.supervisor.launched_digest(name) if self.supervisor else None
        if launched:
            return launched, "launch"
        card = self.cards[name]
        local = card.local_checkpoint
        if local is None or (card.launch is not None and card.launch.ssh):
            return None, "local"
        if name not in self._local_digests:
            self._local_digests[name] = checkpoint_digest(local)
        return self._local_digests[name], "local"

    def identity_text(self, name: str) -> str:
        """The identity that answered the card, as JSON (the episode's `extra.server_identity`)."""
        identity = self.identities.get(name)
        return json.dumps(identity.as_dict(), sort_keys=True) if identity is not None else ""

    def check_launched(self, trial: Any) -> None:
        """Before an attempt: a launched server that died is restarted and its identity checked again."""
        card = self.cards[trial.card]
        if self.supervisor is not None and self.supervisor.ensure_up(trial.card, card, probe_server):
            problem = self.server_answers(trial.card)
            if problem is not None:
                raise ConfigError(f"the restarted server of {self.who(trial.card)} does not answer: {problem}")

    def server_answers(self, name: str) -> str | None:
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
            with contextlib.suppress(Exception):  # the probe is thrown away
                probe.close()
        check_card_against_server(card, metadata, f"{card.host}:{card.port}")  # a ConfigError stops the run
        self.pin_identity(name, metadata)   # another checkpoint: ServerIdentityChanged stops the run
        self.metadata[name] = metadata
        return None

    def server_back(self, trial: Any) -> bool:
        """After a server fault: True when the server answers (at once, or within server_wait_s)."""
        card = self.cards[trial.card]
        where = f"the policy server of {trial.alias} ({card.host}:{card.port})"
        if self.supervisor is not None:
            self.supervisor.ensure_up(trial.card, card, probe_server)   # launched and dead: restart it
        problem = self.server_answers(trial.card)
        if problem is None:
            self.say(f"{where} answers again; continuing")
            return True
        wait_s = float(self.server_wait_s or 0.0)
        if wait_s > 0:
            self.say(f"{where} does not answer ({problem}); waiting up to {wait_s:g} s for it to come back "
                     "(restart it now; Ctrl-C ends the session)")
            deadline = time.monotonic() + wait_s
            while problem is not None and time.monotonic() < deadline:
                time.sleep(min(SERVER_POLL_S, max(0.0, deadline - time.monotonic())))
                problem = self.server_answers(trial.card)
            if problem is None:
                self.say(f"{where} answers again; continuing")
                return True
        self.ledger.log_event(None, "server_down", {"card": trial.card, "host": card.host, "port": card.port,
                                                    "error": problem})
        self.say(f"{where} does not answer ({problem}): session stopped, so that no attempt is recorded "
                 "against a dead server. Restart the server, then resume with the same command.")
        return False

    def close(self) -> None:
        """Brokers stopped, clients closed, and the servers this session launched taken down."""
        for broker in self.brokers.values():
            broker.stop()
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                client.close()
        if self.launched and self.supervisor is not None:   # run launch=true: down at the end
            try:
                self.supervisor.down(self.launched)
            except Exception as exc:
                self.say(f"warning: the launched policy servers could not all be stopped ({exc}); "
                         f"`spabench servers down campaign={self.campaign_dir}` stops them")
