"""Where the project's data lives: conf/, tasks/, hardware/, episodes/.

Configs name paths relative to the repository root so that a campaign folder stays valid whatever
directory the operator starts `spabench` from.
"""

from __future__ import annotations

import os
from pathlib import Path

_MARKERS = ("conf/config.yaml", "tasks", "hardware")


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in _MARKERS)


def repo_root() -> Path:
    """The spabench root: $SPABENCH_ROOT, else the nearest parent of the cwd, else the source tree."""
    env = os.environ.get("SPABENCH_ROOT")
    if env:
        root = Path(env).expanduser().resolve()
        if not _is_root(root):
            from spabench.errors import ConfigError

            raise ConfigError(f"SPABENCH_ROOT={env} does not hold conf/config.yaml, tasks/ and hardware/")
        return root
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents):
        if _is_root(candidate):
            return candidate
    source_tree = Path(__file__).resolve().parents[2]
    if _is_root(source_tree):
        return source_tree
    from spabench.errors import ConfigError

    raise ConfigError(
        "cannot find the spabench root (a folder with conf/config.yaml, tasks/ and hardware/); "
        "run from the checkout or set SPABENCH_ROOT"
    )


def resolve(path: str | os.PathLike, root: Path | None = None) -> Path:
    """An absolute path: as given when absolute, else relative to the repository root."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    return (root or repo_root()) / p


def conf_dir() -> Path:
    return repo_root() / "conf"


def campaign_folder(folder: Path | None, command: str) -> Path:
    """The campaign folder a command was given (`campaign=DIR`), checked to be one `spabench plan` wrote."""
    from spabench.errors import ConfigError

    if folder is None:
        raise ConfigError(f"{command}: campaign=DIR is missing (allowed: a campaign folder written by "
                          "`spabench plan`, e.g. campaign=episodes/my_campaign)")
    if not folder.is_dir():
        raise ConfigError(f"campaign={folder}: no such folder (allowed: a campaign folder written by "
                          "`spabench plan`; plan one with `spabench plan campaign=<preset> out=DIR`)")
    if not any((folder / name).is_file() for name in LEDGER_FILES):
        raise ConfigError(f"campaign={folder}: not a campaign folder, it has no {' or '.join(LEDGER_FILES)} "
                          "(allowed: a folder written by `spabench plan`)")
    return folder


# What marks a campaign folder: its SQLite ledger, or the pointer to its PostgreSQL ledger.
LEDGER_FILES: tuple[str, ...] = ("ledger.sqlite", "ledger.pg.json")
