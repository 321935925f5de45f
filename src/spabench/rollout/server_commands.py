"""`spabench servers up|status|down campaign=DIR`: the campaign's policy servers, launched from their cards.

`up` starts the server of every card with pending trials that has a `launch:` block (lower
`launch.order` first, equal orders together) and returns once each answers its protocol's health
check; logs and pids go to `<campaign>/servers/`. Cards without a launch block are listed: their
servers are started by hand. `status` lists them; `down` stops what spabench launched.
With aliases on, policies are named by their alias.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from spabench.config import CampaignInput, CardKeys
from spabench.operator.blinding import Blinder
from spabench.paths import campaign_folder

__all__ = ["servers_up", "servers_status", "servers_down"]


@dataclass
class ServersConfig(CampaignInput, CardKeys):
    """`spabench servers up|status|down`: the campaign's cards, with per-card overrides."""


class ServersUpConfig(ServersConfig):
    command: ClassVar[str] = "servers up"


class ServersStatusConfig(ServersConfig):
    command: ClassVar[str] = "servers status"


class ServersDownConfig(ServersConfig):
    command: ClassVar[str] = "servers down"


@dataclass
class _Servers:
    """What each servers command works on: the campaign's cards, how they are named, the supervisor."""

    cards: dict[str, Any]
    who: dict[str, str]
    supervisor: Any
    say: Callable[[str], None]


@contextmanager
def _campaign_servers(cfg: ServersConfig, command: str, pending_only: bool = True) -> Iterator[_Servers]:
    """The cards of the campaign's (pending) trials; the ledger stays open for the server events."""
    from spabench.ledger import Ledger
    from spabench.policy.servers import Supervisor
    from spabench.rollout.policies import load_cards

    folder = campaign_folder(cfg.campaign_dir, command)
    with Ledger.open(folder) as ledger:
        trials = ledger.trials()   # every card of the plan, with its overrides (by card or alias), as `run`
        cards = load_cards(list(dict.fromkeys(t.card for t in trials)), cfg.cards, cfg.group_dirs("policy"),
                           aliases={t.alias: t.card for t in trials}, blind=any(t.alias != t.policy for t in trials))
        if pending_only:
            needed = {t.card for t in ledger.pending_trials()}
            cards = {n: c for n, c in cards.items() if n in needed}
        blinder = Blinder.for_trials(trials, cards)
        who = {n: (blinder.redact(n) if blinder else n) for n in cards}

        def say(text: str) -> None:
            print(blinder.redact(text) if blinder else text, file=sys.stdout, flush=True)

        yield _Servers(cards, who, Supervisor(folder, ledger, say, who), say)


def servers_up(cfg: ServersConfig) -> int:
    from spabench.policy.endpoints import check_collisions
    from spabench.rollout.policies import probe_server

    with _campaign_servers(cfg, "servers up") as s:
        check_collisions(s.cards, s.who)
        for name, card in s.cards.items():
            if card.launch is None:
                s.say(f"{s.who[name]}: no launch: block in its card; start its server by hand "
                      f"({card.host}:{card.port})")
        started = s.supervisor.up(s.cards, probe_server)
        s.say(f"{len(started)} server(s) started; `spabench servers down campaign={cfg.campaign_dir}` stops them")
    return 0


def servers_status(cfg: ServersConfig) -> int:
    with _campaign_servers(cfg, "servers status", pending_only=False) as s:
        for row in s.supervisor.status(s.cards):
            name = row["card"]
            if not row["launch"]:
                s.say(f"{s.who[name]}: started by hand (no launch: block)")
                continue
            state = f"up, pid {row['pid']}" if row["alive"] else ("down" if row["pid"] is None else
                                                                   f"dead (was pid {row['pid']})")
            digest = row["checkpoint_digest"] or "unknown"
            s.say(f"{s.who[name]}: {state}; restarts {row['restarts']}; checkpoint {digest}; log {row['log'] or '-'}")
    return 0


def servers_down(cfg: ServersConfig) -> int:
    with _campaign_servers(cfg, "servers down", pending_only=False) as s:
        s.say(f"{len(s.supervisor.down())} server(s) stopped")
    return 0
