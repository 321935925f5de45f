"""The system part of `bench check`: disk space, the clock and the software versions.

Disk: with campaign=DIR, room for the campaign's remaining episodes on the disk of its episodes/
folder (each pending trial at its own timer and its card's rate, estimated as `run`'s per-attempt check
does, spabench.rollout.space), else the free space where the check is written. Clock: UTC and local
time, and whether the system says it is synchronised (a clock that jumps misdates the records);
unknown or unsynchronised is shown, not failed. Versions: what every episode records as provenance.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spabench.commission.record import CheckRecord

GIB = 2**30


def _synchronised() -> str:
    """'yes' / 'no' from systemd's timedatectl, or 'unknown' where it cannot say."""
    try:
        done = subprocess.run(["timedatectl", "show", "--property=NTPSynchronized", "--value"],
                              capture_output=True, text=True, timeout=3.0, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    value = done.stdout.strip().lower()
    return value if done.returncode == 0 and value in ("yes", "no") else "unknown"


def check_system(cfg: Any, bench: Any, record: CheckRecord, folder: Path) -> None:
    from spabench.record.recorder import software_versions

    system: dict[str, Any] = {}
    record.parts["system"] = system
    now = datetime.now(UTC)
    system["clock_utc"] = now.isoformat(timespec="seconds")
    system["clock_local"] = datetime.now().astimezone().isoformat(timespec="seconds")
    system["timezone"] = time.strftime("%Z")
    system["clock_synchronised"] = sync = _synchronised()
    record.add("system", "clock", True, f"clock {system['clock_utc']} UTC ({system['clock_local']} local); "
               f"synchronised: {sync}", warn=sync != "yes")
    versions = software_versions()
    system.update({f"version {k}": v for k, v in versions.items()})
    record.add("system", "versions", True, ", ".join(f"{k} {v or '-'}" for k, v in versions.items()))
    _disk(cfg, bench, record, folder, system)


def _disk(cfg: Any, bench: Any, record: CheckRecord, folder: Path, system: dict[str, Any]) -> None:
    if cfg.campaign_dir is None:
        where = folder.parent if folder.parent.exists() else Path.cwd()
        free = shutil.disk_usage(where).free
        system["disk_free_gib"] = round(free / GIB, 2)
        record.add("system", "disk", True, f"{free / GIB:.1f} GiB free at {where}")
        return
    from spabench.ledger import Ledger
    from spabench.rollout.space import SAFETY_FACTOR, expected_episode_bytes
    from spabench.storage_advice import RESERVE_BYTES

    episodes = Path(cfg.campaign_dir) / "episodes"
    where = episodes if episodes.is_dir() else Path(cfg.campaign_dir)
    with Ledger.open(cfg.campaign_dir, readonly=True) as ledger:
        pending = ledger.pending_trials()
    rates = {row["card"]: row["card_control_hz"] for row in (record.parts.get("servers") or {}).get("rows", [])}
    need = RESERVE_BYTES
    largest = 0
    for trial in pending:
        size = expected_episode_bytes(trial.timer_s, float(rates.get(trial.alias, rates.get(trial.card, bench.fps))),
                                      bench.camera_shapes, episodes if episodes.is_dir() else None)
        need += size
        largest = max(largest, size)
    need += int((SAFETY_FACTOR - 1.0) * largest)   # the attempt being recorded, as `run` reserves it
    free = shutil.disk_usage(where).free
    system.update({"disk_free_gib": round(free / GIB, 2), "disk_needed_gib": round(need / GIB, 2),
                   "remaining_episodes": len(pending)})
    if free < need:
        record.add("system", "disk", False, f"disk: {free / GIB:.1f} GiB free at {where}, the campaign's "
                   f"{len(pending)} remaining episodes need about {need / GIB:.1f} GiB: free space or move the "
                   "campaign to a larger disk")
    else:
        record.add("system", "disk", True, f"{free / GIB:.1f} GiB free at {where}; the {len(pending)} remaining "
                   f"episodes need about {need / GIB:.1f} GiB")
