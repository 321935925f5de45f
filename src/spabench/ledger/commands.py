"""`spabench ledger copy|status`: thin adapters from the typed config to typed calls (`ledger collect`,
which gathers recorded episodes, is spabench.record.commands)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from spabench.config import CampaignInput, LedgerKeys, opt
from spabench.configtools import required


@dataclass
class LedgerCopyConfig(LedgerKeys):
    """`spabench ledger copy`."""

    command: ClassVar[str] = "ledger copy"

    ledger_grant: str | None = opt(None, "the benches' group role on a PostgreSQL ledger, granted what a bench needs")
    src: Path | None = opt(None, 'the campaign folder to copy (first positional)')
    dst: Path | None = opt(None, 'the new campaign folder (its back end: ledger=)')


@dataclass
class LedgerStatusConfig(CampaignInput, LedgerKeys):
    """`spabench ledger status`."""

    command: ClassVar[str] = "ledger status"


@dataclass(frozen=True)
class CopyArgs:
    src: Path
    dst: Path
    ledger: str | None = None        # the destination back end: None/sqlite, or a postgresql:// URL
    ledger_grant: str | None = None  # PostgreSQL: the benches' role, granted what a bench needs

    @classmethod
    def from_cfg(cls, cfg: LedgerCopyConfig) -> CopyArgs:
        url = cfg.ledger
        if url not in (None, "", "sqlite"):
            from spabench.ledger.postgres import check_url

            check_url(str(url))
        usage = "spabench ledger copy SRC DST"
        return cls(required(cfg.src, "src", "ledger copy", f"{usage}: the campaign folder to copy"),
                   required(cfg.dst, "dst", "ledger copy", f"{usage}: a new campaign folder"),
                   None if url in (None, "", "sqlite") else str(url), cfg.ledger_grant or None)


def run_copy(args: CopyArgs, out=None) -> int:
    from spabench.ledger.copy import copy_ledger

    out = out or sys.stdout
    result = copy_ledger(args.src, args.dst, args.ledger, args.ledger_grant)
    rows = ", ".join(f"{n} {t}" for t, n in result.rows.items())
    print(f"copied {result.source} -> {result.destination}: {rows}; both ledgers compared equal", file=out)
    return 0


def ledger_copy(cfg: LedgerCopyConfig) -> int:
    return run_copy(CopyArgs.from_cfg(cfg))


def run_status(campaign_dir: Path, out=None, url: str | None = None) -> int:
    from spabench.ledger import Ledger
    from spabench.ledger.checks import duplicate_lines, split_lines

    out = out or sys.stdout
    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        p = ledger.progress()
        print(f"{ledger.campaign}: {ledger.location}", file=out)
        print(f"  {p['complete']}/{p['trials']} trials complete, {p['running']} running, "
              f"{p['invalid_attempts']} invalid attempt(s), {p['unscored']} unscored", file=out)
        dry = sum(1 for a in ledger.attempts() if a.dry_run)
        if dry:   # a dry run never consumes its trial: said apart, so that it is not read as progress
            print(f"  {dry} dry-run attempt(s) (dry_run=true: not counted; `spabench report` lists them)", file=out)
        for claim in ledger.claims():
            if claim["bench_id"]:
                left = claim["lease_left_s"]
                state = f"lease {left:.0f} s left" if left >= 0 else f"lease lapsed {-left:.0f} s ago"
                print(f"  scene set {claim['evaluation_id']}: bench {claim['bench_id']} ({state})", file=out)
        for line in duplicate_lines(ledger, campaign_dir):
            print(f"  PROBLEM: {line}", file=out)
        for line in split_lines(ledger):
            print(f"  WARNING: {line}", file=out)
    return 0


def ledger_status(cfg: LedgerStatusConfig) -> int:
    campaign_dir = required(cfg.campaign_dir, "campaign", "ledger status", "campaign=DIR")
    return run_status(campaign_dir, url=cfg.ledger_url)
