"""Thin adapters from the typed config for the commands that move recorded episodes:
`spabench export lerobot campaign_dir=DIR out=OUT [reencode=true codec=libx264 crf=23]
[include_invalid=true] [repo_id=org/name]` (recorded episodes -> LeRobotDataset v3) and
`spabench ledger collect` (episodes from the benches that recorded them into one folder)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from spabench.config import CampaignInput, LabConfig, LedgerKeys, opt
from spabench.configtools import required
from spabench.errors import ConfigError, SpabenchError
from spabench.paths import campaign_folder


@dataclass
class ExportLerobotConfig(CampaignInput):
    """`spabench export lerobot`."""

    command: ClassVar[str] = "export lerobot"

    out: Path | None = opt(None, "the dataset folder to write")
    repo_id: str | None = opt(None, "the exported dataset's repo id (org/name)")
    include_invalid: bool = opt(False, 'export invalid attempts too')
    reencode: bool = opt(False, 're-encode every camera stream instead of copying it')
    codec: str | None = opt(None, 'codec for reencode=true (null: libx264)')
    crf: int | None = opt(None, 'quality for reencode=true, lower is better (null: 23)', lo=0, hi=51)


@dataclass
class ImportLerobotConfig(LabConfig):
    """`spabench import lerobot`."""

    command: ClassVar[str] = "import lerobot"

    out: Path | None = opt(None, "the new (review) campaign folder")
    dataset: Path | None = opt(None, "a LeRobotDataset v3 folder to import (or a Hub id already in LeRobot's local cache)")
    cells: Path | None = opt(None, 'a CSV mapping each episode to its Spa-Bench cell: episode_index, task, condition, evaluation_id [, policy, matched_group, scene_id] (without it: a review campaign)')


@dataclass
class LedgerCollectConfig(CampaignInput, LedgerKeys):
    """`spabench ledger collect`."""

    command: ClassVar[str] = "ledger collect"

    out: Path | None = opt(None, "where the gathered episodes are written")
    bench_dirs: dict[str, str] = opt({}, 'bench id -> its campaign folder (local path or [user@]host:/path)')


def export_lerobot(cfg: ExportLerobotConfig, out_stream=None) -> int:
    out_stream = out_stream or sys.stdout
    if cfg.campaign_dir is None or cfg.out is None:
        print("error: export lerobot needs campaign=DIR (a recorded campaign) and out=DIR (a new folder)",
              file=out_stream)
        return 2
    from spabench.record.export import export_lerobot_dataset

    started = time.perf_counter()
    try:
        codec, crf = _reencode_settings(cfg)
        report = export_lerobot_dataset(campaign_folder(cfg.campaign_dir, "export lerobot"), cfg.out,
                                        repo_id=cfg.repo_id, include_invalid=cfg.include_invalid,
                                        reencode=cfg.reencode, codec=codec, crf=crf)
    except SpabenchError as exc:
        print(f"error: {exc}", file=out_stream)
        return 2
    for stale in report.cleaned:
        print(f"removed {stale.name}, a partial output left by an interrupted export", file=out_stream)
    print(f"LeRobotDataset v3 written to {report.root}: {report.episodes} episode(s), {report.frames} frames; "
          f"{report.copied} camera stream(s) copied, {report.reencoded} re-encoded, "
          f"{time.perf_counter() - started:.1f} s"
          + (f"; skipped {', '.join(report.skipped)}" if report.skipped else ""), file=out_stream)
    return 0


REENCODE_CODEC, REENCODE_CRF = "libx264", 23   # a camera the export cannot copy, and reencode=true's default


def _reencode_settings(cfg: ExportLerobotConfig) -> tuple[str, int]:
    """codec= and crf= for reencode=true, checked before anything is written: without reencode=true
    they would change nothing (streams are copied), and a codec FFmpeg cannot encode with is refused."""
    given = [f"{k}={v}" for k, v in (("codec", cfg.codec), ("crf", cfg.crf)) if v is not None]
    if given and not cfg.reencode:
        raise ConfigError(f"export lerobot: {' '.join(given)} applies only with reencode=true (without it the "
                          f"recorded streams are copied, and a camera that cannot be copied is re-encoded with "
                          f"{REENCODE_CODEC} crf {REENCODE_CRF})")
    codec = cfg.codec or REENCODE_CODEC
    import av

    try:
        found = av.codec.Codec(codec, "w")
    except Exception:
        found = None
    if found is None or found.type != "video":
        raise ConfigError(f"export lerobot: codec={codec}: not a video encoder this FFmpeg has (e.g. libx264, "
                          "libx265, mpeg4, libsvtav1)")
    return codec, REENCODE_CRF if cfg.crf is None else cfg.crf


@dataclass(frozen=True)
class CollectArgs:
    campaign_dir: Path
    out: Path
    bench_dirs: dict[str, str] = field(default_factory=dict)
    include_invalid: bool = True
    url: str | None = None           # ledger=: the URL to read the campaign's ledger with

    @classmethod
    def from_cfg(cls, cfg: LedgerCollectConfig) -> CollectArgs:
        dirs = cfg.bench_dirs
        if not all(isinstance(v, str) and v for v in dirs.values()):
            raise ConfigError("ledger collect: bench_dirs must map bench ids to folders, e.g. "
                              "bench_dirs.bench-a=/mnt/bench-a/campaign bench_dirs.bench-b=lab@bench-b:/data/campaign")
        return cls(required(cfg.campaign_dir, "campaign", "ledger collect",
                            "campaign=DIR, this bench's campaign folder"),
                   required(cfg.out, "out", "ledger collect", "out=DIR, where the episodes are gathered"),
                   {str(k): str(v) for k, v in dirs.items()}, url=cfg.ledger_url)


def run_collect(args: CollectArgs, out=None) -> int:
    from spabench.record.collect import collect_episodes

    out = out or sys.stdout
    result = collect_episodes(args.campaign_dir, args.out, args.bench_dirs, include_invalid=args.include_invalid,
                              url=args.url,
                              progress=lambda text: print(text, file=out, flush=True))
    print(f"collected {len(result.copied)} episode(s) into {args.out}; {len(result.already)} already there; "
          f"{len(result.missing)} missing", file=out)
    for attempt_id, why in result.missing:
        print(f"  missing {attempt_id}: {why}", file=out)
    return 1 if result.missing else 0


def ledger_collect(cfg: LedgerCollectConfig) -> int:
    return run_collect(CollectArgs.from_cfg(cfg))


def import_lerobot(cfg: ImportLerobotConfig, out_stream=None) -> int:
    """`spabench import lerobot dataset=DIR out=DIR [cells=FILE.csv]` (record/lerobot_import.py)."""
    out_stream = out_stream or sys.stdout
    if cfg.dataset is None or cfg.out is None:
        print("error: import lerobot needs dataset=DIR (a LeRobotDataset v3 folder) and out=DIR (a new campaign "
              "folder)", file=out_stream)
        return 2
    from spabench.record.lerobot_import import import_lerobot as run_import

    started = time.perf_counter()
    try:
        result = run_import(cfg.dataset, cfg.out, cfg.cells)
    except SpabenchError as exc:
        print(f"error: {exc}", file=out_stream)
        return 2
    took = time.perf_counter() - started
    kind = ("a review campaign (no cells=: per-task success and failure modes in the report)" if result.review
            else "a protocol campaign (cells=)")
    print(f"imported {result.episodes} episode(s), {result.frames} frames ({result.seconds:.1f} s recorded) into "
          f"{result.out}: {kind}; videos {result.videos_linked} linked, {result.videos_copied} copied, none "
          f"re-encoded; {took:.1f} s", file=out_stream)
    print(f"next: spabench score campaign={result.out}  (or spabench console campaign={result.out})",
          file=out_stream)
    return 0
