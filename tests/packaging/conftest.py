"""The sdist and the wheel, built once per session by `python -m build` from the checkout's tracked files.

The build runs on a copy of what `git ls-files` lists (so nothing untracked, and no build/ or egg-info
left in the checkout) and without build isolation: setuptools comes from this environment, so the
build needs no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA_FOLDERS = ("conf", "tasks", "hardware", "policies")


def tracked(*folders: str) -> list[str]:
    """The checkout's tracked files (under `folders`, or all), as git lists them."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are what the artifacts are compared with")
    out = subprocess.run(["git", "ls-files", "-z", "--", *folders], cwd=REPO, capture_output=True, check=True)
    return sorted(name for name in out.stdout.decode().split("\0") if name)


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path
    source: Path   # the copy of the tracked files it was built from


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("build")
    source = root / "source"
    for name in tracked():
        if (REPO / name).is_file():   # a tracked file deleted in the working tree is not built
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    dist = root / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return Built(wheel, sdist, source)
