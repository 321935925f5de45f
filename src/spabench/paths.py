"""Where spabench's data lives: conf/, tasks/, hardware/, policies/ (the data root), and where a
command looks for a config group's option files.

Configs name paths relative to the data root so that a campaign folder stays valid whatever
directory the operator starts `spabench` from. The data root is found in one place, `repo_root()`:

1. `$SPABENCH_ROOT`, an override (a folder laid out like the repository);
2. the installed package's own data: `spabench/_data/` in a wheel (packaging maps the repository's
   top-level conf/, tasks/, hardware/ and policies/ into it, see setup.py), or, for the editable
   installation, the checkout whose src/ the package is imported from.

The working directory plays no part. A lab's own group files (`config_dir=DIR`) come before the
data root's conf/ for every group option (`option_dirs`).
"""

from __future__ import annotations

import os
from pathlib import Path

_MARKERS = ("conf/config.yaml", "tasks", "hardware")
# The data folders of the repository's top level that the wheel carries (as spabench/_data/<name>/).
DATA_FOLDERS: tuple[str, ...] = ("conf", "tasks", "hardware", "policies")
PACKAGE_DATA = "_data"   # their folder inside the installed package


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in _MARKERS)


def installed_roots() -> tuple[Path, ...]:
    """Where an installation keeps the data, in order: inside the package (a wheel), then the
    checkout the package's source sits in (the editable installation, or src/ on PYTHONPATH)."""
    package = Path(__file__).resolve().parent
    return package / PACKAGE_DATA, package.parents[1]


def repo_root() -> Path:
    """The data root: $SPABENCH_ROOT, else the installed package's data (module docstring)."""
    from spabench.errors import ConfigError

    env = os.environ.get("SPABENCH_ROOT")
    if env:
        root = Path(env).expanduser().resolve()
        if not _is_root(root):
            raise ConfigError(f"SPABENCH_ROOT={env} does not hold conf/config.yaml, tasks/ and hardware/")
        return root
    for candidate in installed_roots():
        if _is_root(candidate):
            return candidate
    raise ConfigError(
        "cannot find spabench's data (conf/config.yaml, tasks/ and hardware/) in the installed package "
        f"({installed_roots()[0]}) or a checkout around it; reinstall spabench or set SPABENCH_ROOT"
    )


def resolve(path: str | os.PathLike, root: Path | None = None) -> Path:
    """An absolute path: as given when absolute, else relative to the data root."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    return (root or repo_root()) / p


def conf_dir() -> Path:
    return repo_root() / "conf"


def option_dirs(config_dir: Path | None) -> list[Path]:
    """Where group options are looked up, first match wins: the lab's folder, then the data root's conf/."""
    return ([config_dir] if config_dir is not None else []) + [conf_dir()]


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
