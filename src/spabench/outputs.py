"""Output folders the tool owns: never delete or overwrite what spabench did not write.

Every command that writes a folder (`report`, `plan`, `export lerobot`, `demo`, `suite generate
out=`, ...) goes through this module. A folder it writes carries a marker file (`MARKER`) naming the
command and the entries it wrote. An existing folder is replaced only when it holds exactly a
previous output of the same command (the marker plus the entries the marker lists, nothing else);
an empty folder is filled; anything else is refused with a message listing what is in the way.

    with replace_output(out, "report") as staging:   # build everything in `staging`
        write_files(staging)
    # `out` now holds staging's files + the marker; the previous report (if any) is gone

    claim_new_folder(out, "plan")   # a folder that must be new or empty (a campaign grows later)
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from spabench.errors import ConfigError, SpabenchError

MARKER = ".spabench-output.json"
_SHOW = 5  # foreign entries named in a refusal


def read_marker(folder: Path) -> dict | None:
    """The marker of a folder spabench wrote, or None (absent or unreadable)."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("tool") == "spabench" else None


def write_marker(folder: Path, command: str, entries: list[str] | None = None) -> Path:
    """Record that `command` wrote `folder` (entries default to everything in it now)."""
    folder = Path(folder)
    if entries is None:
        entries = sorted(p.name for p in folder.iterdir() if p.name != MARKER)
    from spabench import __version__

    data = {"tool": "spabench", "command": command, "version": __version__,
            "written_at": datetime.now(UTC).isoformat(timespec="seconds"), "entries": sorted(entries)}
    path = folder / MARKER
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOW])
    return shown + (f" and {len(names) - _SHOW} more" if len(names) > _SHOW else "")


def _foreign(folder: Path, command: str) -> list[str]:
    """Entries of an existing folder that a previous run of `command` did not write."""
    present = sorted(p.name for p in folder.iterdir() if p.name != MARKER)
    marker = read_marker(folder)
    if marker is None or marker.get("command") != command:
        return present
    owned = set(marker.get("entries") or ())
    return [name for name in present if name not in owned]


def _check_target(out: Path, command: str, key: str) -> None:
    """Raise ConfigError unless `out` is absent, empty, or exactly a previous `command` output."""
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise ConfigError(f"{key}={out} is a file, not a folder; {command} writes a folder (choose a new path)")
    if out.is_symlink():
        raise ConfigError(f"{key}={out} is a symbolic link; {command} writes into a real folder only")
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        cwd = None
    foreign = _foreign(out, command)
    if foreign:
        marker = read_marker(out)
        what = (f"a spabench '{marker.get('command')}' output" if marker and marker.get("command") != command
                else "files spabench did not write")
        raise ConfigError(f"{key}={out} holds {what} ({_listing(foreign)}); {command} never deletes or "
                          "overwrites them: choose a new or empty folder, or move those files away")
    if any(out.iterdir()) and cwd is not None and (out.resolve() == cwd or out.resolve() in cwd.parents):
        raise ConfigError(f"{key}={out} is the current folder (or holds it); {command} cannot replace it: "
                          "choose another folder")


def _tidy(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


class OutputNotWritten(SpabenchError):
    """A folder output could not be written (disk full, quota, I/O error): nothing of it was kept."""


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _staging_name(out: Path) -> str:
    return f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"


_ACTIVE: set[Path] = set()   # staging folders this process is writing now


def _remove_stale_staging(out: Path) -> list[Path]:
    """Staging folders of `out` left by a process that died (killed mid-write), and previous outputs
    retired but not yet deleted when it died (`.<out>.old-<staging>`): removed, and returned. One
    whose writer still runs (another live pid, or this process writing it now) is left alone; one
    named with this process's own pid but not being written is a dead run's whose pid came back
    (a container starts every command with the same pid)."""
    name = re.escape(out.name)
    staging = rf"\.{name}\.(?:(\d+)-)?[0-9a-f]{{8}}\.partial"
    pattern = re.compile(rf"^(?:\.{name}\.old-)?{staging}$")
    removed = []
    for entry in out.parent.iterdir() if out.parent.is_dir() else ():
        found = pattern.match(entry.name)
        if found is None or not entry.is_dir() or entry.is_symlink():
            continue
        pid = int(found.group(1)) if found.group(1) else None
        if pid == os.getpid():
            if any(entry.name.endswith(active.name) for active in _ACTIVE if active.parent == entry.parent):
                continue                      # this process is writing it (or retiring for it) now
        elif pid is not None:
            try:
                os.kill(pid, 0)
                continue                      # still being written by a live process
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        _tidy(entry)
        removed.append(entry)
    return removed


def _not_written(out: Path, command: str, exc: OSError) -> OutputNotWritten:
    where = exc.filename or out
    if exc.errno in _NO_SPACE:
        free = shutil.disk_usage(out.parent).free if out.parent.is_dir() else 0
        return OutputNotWritten(f"{command}: the disk holding {out.parent} is full ({free:,} bytes free) while "
                                f"writing {where}; nothing was written (the partial output was removed). Free "
                                "space or choose another out=, then run the same command again")
    return OutputNotWritten(f"{command}: cannot write {where} ({exc.strerror or exc}); nothing was written (the "
                            "partial output was removed)")


@contextmanager
def replace_output(out: str | os.PathLike, command: str, *, key: str = "out",
                   create: bool = True, cleaned: list[Path] | None = None) -> Iterator[Path]:
    """Build a folder output in a staging sibling, then put it in place of `out` with a marker.

    Refuses (before yielding, so nothing is computed in vain) an `out` that is a file or holds
    anything a previous `command` output did not. `create=False` yields a staging path that does
    not exist yet (for writers that insist on creating their root themselves). What a killed run
    left beside `out` is removed first and appended to `cleaned` (for the command to say so)."""
    out = Path(out).expanduser().absolute()
    _check_target(out, command, key)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{key}={out}: cannot create its parent folder ({exc.strerror or exc})") from None
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}={out}: the folder {out.parent} is not writable")
    removed = _remove_stale_staging(out)
    if cleaned is not None:
        cleaned.extend(removed)
    staging = out.parent / _staging_name(out)
    _ACTIVE.add(staging)
    try:
        if create:
            staging.mkdir()  # a plain mkdir keeps the caller's umask (mkdtemp would make it 0700)
    except OSError as exc:
        _ACTIVE.discard(staging)
        raise ConfigError(f"{key}={out}: cannot write in {out.parent} ({exc.strerror or exc})") from None
    try:
        yield staging
        write_marker(staging, command)
        _check_target(out, command, key)  # again: someone may have dropped a file in meanwhile
        if out.is_dir():
            if any(p.name != MARKER for p in out.iterdir()) or (out / MARKER).exists():
                retired = out.parent / f".{out.name}.old-{staging.name}"
                out.rename(retired)
                staging.rename(out)
                _tidy(retired)
            else:  # an empty folder (perhaps the cwd): move the entries in, keep the folder itself
                for child in staging.iterdir():
                    child.rename(out / child.name)
                staging.rmdir()
        else:
            staging.rename(out)
    except OSError as exc:  # a full disk, a quota, an I/O error: one clear error, nothing left behind
        _tidy(staging)
        raise _not_written(out, command, exc) from None
    except BaseException:
        _tidy(staging)
        raise
    finally:
        _ACTIVE.discard(staging)


def check_new_folder(out: str | os.PathLike, command: str, *, key: str = "out",
                     refusal: str | None = None) -> Path:
    """Raise ConfigError unless `out` is absent or an empty folder that could be created/written.

    Cheap and side-effect free: commands call it before any work, then `claim_new_folder`."""
    out = Path(out).expanduser().absolute()
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise ConfigError(f"{key}={out} is not a folder; {command} writes a new folder (choose a new path)")
        entries = sorted(p.name for p in out.iterdir())
        if entries:
            raise ConfigError(refusal or (
                f"{key}={out} is not empty ({_listing(entries)}); {command} writes only into a new or "
                "empty folder and never deletes or overwrites files: choose another folder"))
        if not os.access(out, os.W_OK | os.X_OK):
            raise ConfigError(f"{key}={out}: the folder is not writable")
        return out
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{key}={out}: {parent} is a file, so the folder cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}={out}: cannot create it, {parent} is not writable")
    return out


def claim_new_folder(out: str | os.PathLike, command: str, *, key: str = "out",
                     refusal: str | None = None) -> Path:
    """Create `out` (or take an empty folder) for a command whose output grows later (a campaign).

    A non-empty folder is refused (`refusal` replaces the default message); a marker is written."""
    out = check_new_folder(out, command, key=key, refusal=refusal)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_marker(out, command, [])
    except OSError as exc:
        raise ConfigError(f"{key}={out}: cannot create the folder ({exc.strerror or exc})") from None
    return out


def add_entries(folder: str | os.PathLike, *names: str) -> None:
    """Note further entries written into a claimed folder (kept in its marker)."""
    folder = Path(folder)
    marker = read_marker(folder)
    if marker is None:
        return
    entries = sorted(set(marker.get("entries") or ()) | set(names))
    write_marker(folder, str(marker.get("command")), entries)
