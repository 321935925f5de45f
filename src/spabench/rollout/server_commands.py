"""`spabench servers up|status|down campaign=DIR`: the campaign's policy servers, launched from their cards.

`up` starts the server of every card with pending trials that has a `launch:` block (lower
`launch.order` first, equal orders together) and returns once each answers its protocol's health
check; logs and pids go to `<campaign>/servers/`. Cards without a launch block are listed: their
servers are started by hand. `status` lists them; `down` stops what spabench launched.
With aliases on, policies are named by their alias.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from spabench.operator.blinding import Blinder
from spabench.paths import campaign_folder

if TYPE_CHECKING:
    from spabench.config import SpabenchConfig

__all__ = ["servers_up", "servers_status", "servers_down"]


def _open(cfg: SpabenchConfig, command: str, pending_only: bool = True):
    from spabench.ledger import Ledger
    from spabench.policy.servers import Supervisor
    from spabench.rollout.commands import load_cards

    folder = campaign_folder(cfg.campaign_dir, command)
    ledger = Ledger.open(folder)
    try:
        trials = ledger.pending_trials() if pending_only else ledger.trials()
        cards = load_cards(list(dict.fromkeys(t.card for t in trials)), cfg)
        blinder = Blinder.for_trials(ledger.trials(), cards)
        who = {n: (blinder.redact(n) if blinder else n) for n in cards}

        def say(text: str) -> None:
            print(blinder.redact(text) if blinder else text, file=sys.stdout, flush=True)

        return ledger, cards, who, Supervisor(folder, ledger, say, who), say
    except BaseException:
        ledger.close()
        raise


def servers_up(cfg: SpabenchConfig) -> int:
    from spabench.policy.endpoints import check_collisions
    from spabench.rollout.commands import probe_server

    ledger, cards, who, supervisor, say = _open(cfg, "servers up")
    try:
        check_collisions(cards, who)
        for name, card in cards.items():
            if card.launch is None:
                say(f"{who[name]}: no launch: block in its card; start its server by hand "
                    f"({card.host}:{card.port})")
        started = supervisor.up(cards, probe_server)
        say(f"{len(started)} server(s) started; `spabench servers down campaign={cfg.campaign_dir}` stops them")
        return 0
    finally:
        ledger.close()


def servers_status(cfg: SpabenchConfig) -> int:
    ledger, cards, who, supervisor, say = _open(cfg, "servers status", pending_only=False)
    try:
        for row in supervisor.status(cards):
            name = row["card"]
            if not row["launch"]:
                say(f"{who[name]}: started by hand (no launch: block)")
                continue
            state = f"up, pid {row['pid']}" if row["alive"] else ("down" if row["pid"] is None else
                                                                   f"dead (was pid {row['pid']})")
            digest = row["checkpoint_digest"] or "unknown"
            say(f"{who[name]}: {state}; restarts {row['restarts']}; checkpoint {digest}; log {row['log'] or '-'}")
        return 0
    finally:
        ledger.close()


def servers_down(cfg: SpabenchConfig) -> int:
    ledger, cards, who, supervisor, say = _open(cfg, "servers down", pending_only=False)
    try:
        stopped = supervisor.down()
        say(f"{len(stopped)} server(s) stopped")
        return 0
    finally:
        ledger.close()
