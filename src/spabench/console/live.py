"""Where a live session's console is: a small record in the campaign folder, so that a review-only
console of the same campaign (`spabench console`) can send the operator to the page whose E-STOP
reaches the arm, instead of showing a button that cannot stop anything.

The record holds the bench page's address (with its access token when the bind needs one, so the
file is the owner's only) and the session's process id; a record whose process is gone is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LIVE_FILE = "console.live.json"


def record(campaign_dir: Path, bench_url: str) -> Path:
    path = Path(campaign_dir) / LIVE_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"bench_url": bench_url, "pid": os.getpid()}, fh)
    os.replace(tmp, path)
    return path


def clear(campaign_dir: Path) -> None:
    """Remove this process's record (another live session's record stays)."""
    path = Path(campaign_dir) / LIVE_FILE
    data = _read(path)
    if data is not None and data.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def live_bench_url(campaign_dir: Path) -> str | None:
    """The bench page of the session running on this campaign in another process, or None."""
    data = _read(Path(campaign_dir) / LIVE_FILE)
    if data is None or data.get("pid") == os.getpid():
        return None
    try:
        os.kill(int(data["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError, TypeError):
        return None       # the session that wrote it has ended without clearing it (killed)
    except PermissionError:
        pass              # alive, another user's process
    url = data.get("bench_url")
    return url if isinstance(url, str) else None


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
