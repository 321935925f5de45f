"""One file written whole or not at all, also when several writers race for the same path.

Rendered scene references are drawn by the session (on demand) and by its render-ahead worker, and
by every bench of a shared campaign: two writers of one file must never share a temporary name (the
second `os.replace` would find the first writer's file already moved) nor leave a torn file behind.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call `write(tmp)` for a temporary file beside `path` that belongs to this process and thread
    only, then move it onto `path` in one step; the temporary file is removed when `write` fails."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def write_text_durably(path: str | os.PathLike, text: str) -> Path:
    """`text` (UTF-8) written atomically and fsynced before the rename: after a crash or on a full disk
    the file is either the old one or the whole new one, never empty or torn."""
    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return write_atomically(path, write)
