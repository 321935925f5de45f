"""`spabench ledger copy|collect|status`: thin adapters from the typed config to typed calls."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spabench.errors import ConfigError

if TYPE_CHECKING:  # annotations only: spabench.config builds the groups and sits above every package
    from spabench.config import SpabenchConfig


def _folder(value: Path | None, key: str, command: str, what: str) -> Path:
    if value is None:
        raise ConfigError(f"ledger {command}: {key} is missing ({what})")
    return value


@dataclass(frozen=True)
class CopyArgs:
    src: Path
    dst: Path
    ledger: str | None = None        # the destination back end: None/sqlite, or a postgresql:// URL
    ledger_grant: str | None = None  # PostgreSQL: the benches' role, granted what a bench needs

    @classmethod
    def from_cfg(cls, cfg: SpabenchConfig) -> CopyArgs:
        url = cfg.ledger
        if url not in (None, "", "sqlite"):
            from spabench.ledger.postgres import check_url

            check_url(str(url))
        return cls(_folder(cfg.src, "src", "copy", "spabench ledger copy SRC DST: the campaign folder to copy"),
                   _folder(cfg.dst, "dst", "copy", "spabench ledger copy SRC DST: a new campaign folder"),
                   None if url in (None, "", "sqlite") else str(url), cfg.ledger_grant or None)


def run_copy(args: CopyArgs, out=None) -> int:
    from spabench.ledger.copy import copy_ledger

    out = out or sys.stdout
    result = copy_ledger(args.src, args.dst, args.ledger, args.ledger_grant)
    rows = ", ".join(f"{n} {t}" for t, n in result.rows.items())
    print(f"copied {result.source} -> {result.destination}: {rows}; both ledgers compared equal", file=out)
    return 0


def ledger_copy(cfg: SpabenchConfig) -> int:
    return run_copy(CopyArgs.from_cfg(cfg))


@dataclass(frozen=True)
class CollectArgs:
    campaign_dir: Path
    out: Path
    bench_dirs: dict[str, str] = field(default_factory=dict)
    include_invalid: bool = True
    url: str | None = None           # ledger=: the URL to read the campaign's ledger with

    @classmethod
    def from_cfg(cls, cfg: SpabenchConfig) -> CollectArgs:
        dirs = cfg.bench_dirs
        if not all(isinstance(v, str) and v for v in dirs.values()):
            raise ConfigError("ledger collect: bench_dirs must map bench ids to folders, e.g. "
                              "bench_dirs.bench-a=/mnt/bench-a/campaign bench_dirs.bench-b=lab@bench-b:/data/campaign")
        return cls(_folder(cfg.campaign_dir, "campaign", "collect", "campaign=DIR, this bench's campaign folder"),
                   _folder(cfg.out, "out", "collect", "out=DIR, where the episodes are gathered"),
                   {str(k): str(v) for k, v in dirs.items()}, url=cfg.ledger_url)


def run_collect(args: CollectArgs, out=None) -> int:
    from spabench.ledger.collect import collect_episodes

    out = out or sys.stdout
    result = collect_episodes(args.campaign_dir, args.out, args.bench_dirs, include_invalid=args.include_invalid,
                              url=args.url,
                              progress=lambda text: print(text, file=out, flush=True))
    print(f"collected {len(result.copied)} episode(s) into {args.out}; {len(result.already)} already there; "
          f"{len(result.missing)} missing", file=out)
    for attempt_id, why in result.missing:
        print(f"  missing {attempt_id}: {why}", file=out)
    return 1 if result.missing else 0


def ledger_collect(cfg: SpabenchConfig) -> int:
    return run_collect(CollectArgs.from_cfg(cfg))


def run_status(campaign_dir: Path, out=None, url: str | None = None) -> int:
    from spabench.ledger import Ledger
    from spabench.ledger.checks import duplicate_lines, split_lines

    out = out or sys.stdout
    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        p = ledger.progress()
        print(f"{ledger.campaign}: {ledger.location}", file=out)
        print(f"  {p['complete']}/{p['trials']} trials complete, {p['running']} running, "
              f"{p['invalid_attempts']} invalid attempt(s), {p['unscored']} unscored", file=out)
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


def ledger_status(cfg: SpabenchConfig) -> int:
    return run_status(_folder(cfg.campaign_dir, "campaign", "status", "campaign=DIR"), url=cfg.ledger_url)
