"""Provenance of the policy servers for the report: which checkpoint answered, restarts, overrides.

Read from the ledger's server events (spabench.policy.servers): the identity pinned per card, each
restart of a launched server and each identity change accepted with `accept_new_identity=true`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spabench.escaping import markdown_text

__all__ = ["ServerProvenance", "server_provenance", "campaign_server_provenance", "servers_section"]


@dataclass
class ServerProvenance:
    policy: str
    card: str
    pinned: dict[str, Any] | None = None            # the first identity pinned
    current: dict[str, Any] | None = None           # the identity in force at the end
    restarts: int = 0
    overrides: list[dict[str, Any]] = field(default_factory=list)   # {t, previous, identity, reason}


def server_provenance(ledger: Any) -> list[ServerProvenance]:
    """One row per card of the plan, in plan order."""
    from spabench.policy.servers import ACCEPTED, PINNED, RESTARTED

    rows: dict[str, ServerProvenance] = {}
    for trial in ledger.trials():
        rows.setdefault(trial.card, ServerProvenance(policy=trial.policy, card=trial.card))
    for event in ledger.events():
        payload = event["payload"]
        row = rows.get(payload.get("card") or "") if isinstance(payload, dict) else None
        if row is None or event["attempt_id"] is not None:
            continue
        if event["kind"] == PINNED:
            row.pinned = row.pinned or payload["identity"]
            row.current = payload["identity"]
        elif event["kind"] == ACCEPTED:
            row.current = payload["identity"]
            row.overrides.append({"t": event["t"], "previous": payload.get("previous"),
                                  "identity": payload["identity"], "reason": payload.get("reason") or ""})
        elif event["kind"] == RESTARTED:
            row.restarts += 1
    return list(rows.values())


def campaign_server_provenance(campaign_dir: Any) -> list[ServerProvenance]:
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True) as ledger:
        return server_provenance(ledger)


def _short(digest: Any) -> str:
    return f"`{str(digest)[:19]}`" if digest else "unknown"


def _identity(identity: dict[str, Any] | None) -> tuple[str, str, str]:
    if not identity:
        return "not connected", "", ""
    source = f" ({identity.get('digest_source')})" if identity.get("checkpoint_digest") else ""
    return _short(identity.get("checkpoint_digest")) + source, _short(identity.get("metadata_digest")), \
        markdown_text(str(identity.get("protocol", "")))


def servers_section(rows: list[ServerProvenance], name: Callable[[str], str] = str) -> list[str]:
    """The report's "Policy servers" section (empty when the input was a CSV, not a campaign)."""
    if not rows:
        return []
    lines = ["## Policy servers", "",
             "The identity each policy's server had when the campaign pinned it (checkpoint digest: `server` "
             "as the server advertised it, `launch` as spabench computed it from the checkpoint it started; "
             "metadata digest; protocol), restarts of servers spabench launched, and every identity change "
             "accepted with `accept_new_identity=true`.", ""]
    header = ["Policy", "Checkpoint", "Metadata", "Protocol", "Restarts", "Identity overrides"]
    table = []
    for row in rows:
        ckpt, meta, proto = _identity(row.pinned)
        table.append([markdown_text(name(row.policy)), ckpt, meta, proto, str(row.restarts),
                      str(len(row.overrides)) if row.overrides else "none"])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table]
    lines.append("")
    for row in rows:
        for o in row.overrides:
            new_ckpt, new_meta, _ = _identity(o["identity"])
            lines.append(f"- {markdown_text(name(row.policy))}, {markdown_text(o['t'])}: new identity accepted "
                         f"(checkpoint {new_ckpt}, metadata {new_meta}); reason: {markdown_text(o['reason'])}")
    if any(row.overrides for row in rows):
        lines.append("")
    return lines
