"""Issue 40: spabench's extras install into an existing LeRobot 0.6.1 environment without conflicts.

What this proves, without the network: this environment was installed by pip resolving spabench's
`bench,sim,console,postgres` extras together with lerobot 0.6.1 (which the bench extra pins), so its
installed versions are one assignment that satisfies both requirement lists at once. The test reads
spabench's requirements from pyproject.toml (the ones a release publishes) and LeRobot's from its
installed metadata (with the extras spabench asks for), and checks that every package named by both is
installed at a version inside spabench's range AND LeRobot's, that every other spabench requirement
is met too, and that `pip check` finds no broken requirement in the whole environment. It does not
prove that a future resolve picks these versions, only that a consistent set exists; a spabench range
narrowed past LeRobot's pin fails here.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.packaging.conftest import REPO

LAB_EXTRAS = ("bench", "sim", "console", "postgres")   # what a lab installs (dev is the checkout's tools)


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**default_environment(), "extra": e}) for e in extras or {""})


def spabench_requirements() -> list[Requirement]:
    project = _project()
    texts = list(project["dependencies"])
    for extra in LAB_EXTRAS:
        texts += project["optional-dependencies"][extra]
    return [Requirement(t) for t in texts]


def lerobot_requirements(extras: set[str]) -> list[Requirement]:
    """LeRobot's requirements under `extras`, its extras that name further extras of its own expanded."""
    every = [Requirement(t) for t in metadata.requires("lerobot") or []]
    while True:
        more = {e for r in every if canonicalize_name(r.name) == "lerobot" and _applies(r, extras)
                for e in r.extras} - extras
        if not more:
            break
        extras = extras | more
    return [r for r in every if _applies(r, extras) and canonicalize_name(r.name) != "lerobot"]


def _installed(name: str) -> str:
    return metadata.version(name)


def test_the_bench_extra_pins_lerobot_0_6_1_and_that_is_installed():
    (lerobot,) = [r for r in spabench_requirements() if canonicalize_name(r.name) == "lerobot"]
    assert str(lerobot.specifier) == "==0.6.1" and _installed("lerobot") == "0.6.1"
    assert {"feetech", "dataset", "async"} <= lerobot.extras


def test_spabench_and_lerobot_requirements_are_met_together_by_this_environment():
    ours = spabench_requirements()
    (lerobot,) = [r for r in ours if canonicalize_name(r.name) == "lerobot"]
    theirs: dict[str, list[Requirement]] = {}
    for req in lerobot_requirements(set(lerobot.extras)):
        theirs.setdefault(canonicalize_name(req.name), []).append(req)
    shared, problems = [], []
    for req in ours:
        if not _applies(req, set()):
            continue
        name = canonicalize_name(req.name)
        version = _installed(req.name)
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} (spabench) but {name} {version} is installed")
        for other in theirs.get(name, []):
            shared.append(name)
            if not other.specifier.contains(version, prereleases=True):
                problems.append(f"{other} (lerobot 0.6.1) but {name} {version} is installed")
    assert not problems, problems
    # the check has teeth: packages both projects constrain
    assert {"numpy", "opencv-python-headless", "pandas", "pillow", "av", "pyserial"} <= set(shared), sorted(set(shared))


def test_pip_check_finds_no_broken_requirement():
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
