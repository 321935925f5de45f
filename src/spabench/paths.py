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
