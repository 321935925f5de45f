"""`spabench ledger collect`: bring a campaign's episodes from the benches that recorded them to one place.

Episodes stay on the bench that recorded them; the ledger says where (the attempt's bench id and its
path inside that bench's campaign folder). Given where each bench keeps its campaign folder (a local
path, or an rsync-able `[user@]host:/path`), this copies every recorded episode into one campaign
folder for review and export. Each episode lands as `<id>.partial/` and is renamed when complete, so
an interrupted collection is resumed by running it again (episodes already there are skipped).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spabench.errors import ConfigError
from spabench.ledger.copy import CAMPAIGN_FILES, copy_ledger
from spabench.ledger.ledger import Ledger
from spabench.outputs import add_entries, claim_new_folder, read_marker

COMMAND = "ledger collect"

_REMOTE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9._-]+:(?!//)")


def is_remote(location: str) -> bool:
    """`host:/path` or `user@host:path` (rsync over ssh), not a local path or a URL."""
    return bool(_REMOTE.match(location)) and not Path(location).exists()


@dataclass
class CollectResult:
    copied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)   # (attempt_id, why)


def _copy_local(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=False)


def _copy_rsync(src: str, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["rsync", "-a", "--partial", "--", src.rstrip("/") + "/", str(dst) + "/"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise OSError(f"rsync {src}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")


def collect_episodes(campaign_dir: Path, out: Path, bench_dirs: Mapping[str, str], *,
                     include_invalid: bool = True, url: str | None = None,
                     progress: Callable[[str], None] | None = None) -> CollectResult:
    """Copy every recorded episode of the campaign into `out` (a campaign folder, made if new).

    `bench_dirs` maps bench id -> that bench's campaign folder; attempts of a bench not listed are
    looked for in `campaign_dir` itself (this bench's own). `url` replaces a PostgreSQL pointer's URL."""
    campaign_dir, out = Path(campaign_dir), Path(out)
    say = progress or (lambda _text: None)
    for bench, where in bench_dirs.items():
        if not is_remote(str(where)) and not Path(str(where)).is_dir():
            raise ConfigError(f"bench_dirs.{bench}={where!r}: no such folder (allowed: a local campaign folder "
                              "or an rsync-able [user@]host:/path)")
    result = CollectResult()
    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        every = ledger.attempts()
        benches = sorted({a.bench_id for a in every if a.bench_id})
        unknown = [b for b in bench_dirs if b not in benches]
        if unknown:   # a typo would silently look for that bench's episodes here
            raise ConfigError(f"bench_dirs.{unknown[0]}: no attempt of this campaign was run on bench "
                              f"{unknown[0]!r} (benches in its ledger: {', '.join(benches) or 'none yet'})")
        attempts = [a for a in every if a.episode_path and
                    (a.status == "complete" or (include_invalid and a.status == "invalid"))]
        marker = read_marker(out) if out.is_dir() else None
        if marker is not None and marker.get("command") == COMMAND:
            pass                       # an earlier collection: add what is new
        elif ledger.backend == "sqlite":
            copy_ledger(campaign_dir, out, command=COMMAND, key="out")   # a consistent snapshot, checked
        else:                          # the same shared ledger: its pointer and the campaign files
            claim_new_folder(out, COMMAND)
            names = [n for n in (*CAMPAIGN_FILES, Ledger.POINTER) if (campaign_dir / n).is_file()]
            for name in names:
                shutil.copy2(campaign_dir / name, out / name)
            add_entries(out, *names)
        add_entries(out, "episodes")
        for i, attempt in enumerate(attempts, 1):
            rel = Path(attempt.episode_path)
            if rel.is_absolute() or ".." in rel.parts:
                result.missing.append((attempt.attempt_id, f"episode path {attempt.episode_path!r} is not "
                                                            "inside the campaign folder"))
                continue
            target = out / rel
            if target.is_dir():
                result.already.append(attempt.attempt_id)
                continue
            base = str(bench_dirs.get(attempt.bench_id or "", campaign_dir))
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            try:
                if is_remote(base):
                    _copy_rsync(f"{base.rstrip('/')}/{rel.as_posix()}", partial)
                else:
                    source = Path(base) / rel
                    if not source.is_dir():
                        result.missing.append((attempt.attempt_id, f"not on bench {attempt.bench_id!r} at {source}"))
                        continue
                    _copy_local(source, partial)
            except OSError as exc:
                shutil.rmtree(partial, ignore_errors=True)
                result.missing.append((attempt.attempt_id, str(exc)))
                continue
            os.replace(partial, target)
            result.copied.append(attempt.attempt_id)
            say(f"[{i}/{len(attempts)}] {attempt.attempt_id} from {attempt.bench_id or 'this bench'}")
    return result
