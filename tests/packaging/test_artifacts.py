"""Issue 40: the wheel and the sdist carry everything a command reads at run time.

Measured before: the wheel of `pip wheel .` held only src/spabench (no conf/, tasks/, hardware/,
policies/), so every command of an installed spabench stopped with "cannot find the spabench root".
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile

import pytest

import spabench
from tests.packaging.conftest import DATA_FOLDERS, REPO, tracked

pytestmark = pytest.mark.slow   # `python -m build` in a subprocess

LAB_TEMPLATE = ("spabench/lab/template/README.md", "spabench/lab/template/campaign/pilot.yaml")


def test_the_wheel_holds_the_same_data_files_as_the_checkout(built):
    expected = tracked(*DATA_FOLDERS)
    assert len(expected) > 50 and {"conf/config.yaml", "hardware/sim/so101.xml", "tasks/suite.yaml",
                                    "policies/README.md"} <= set(expected)
    with zipfile.ZipFile(built.wheel) as whl:
        data = {n.removeprefix("spabench/_data/"): n for n in whl.namelist() if n.startswith("spabench/_data/")}
        assert sorted(data) == expected
        for name in expected:   # byte for byte
            assert whl.read(data[name]) == (REPO / name).read_bytes(), name
        assert set(LAB_TEMPLATE) <= set(whl.namelist())


def test_the_sdist_holds_the_data_folders_and_builds_the_same_wheel(built):
    """The sdist carries the folders at its top level (the repository's layout), so a wheel built from
    it (as `python -m build` just did) is the wheel above."""
    with tarfile.open(built.sdist) as sdist:
        top = f"{built.sdist.name.removesuffix('.tar.gz')}/"
        names = {m.name.removeprefix(top) for m in sdist.getmembers() if m.isfile()}
    assert set(tracked(*DATA_FOLDERS)) <= names
    assert {f"src/{n}" for n in LAB_TEMPLATE} <= names


def test_the_version_is_spabenchs_and_twine_accepts_both(built):
    assert built.wheel.name == f"spabench-{spabench.__version__}-py3-none-any.whl"
    assert built.sdist.name == f"spabench-{spabench.__version__}.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(built.wheel), str(built.sdist)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.count("PASSED") == 2, proc.stdout + proc.stderr


def test_the_readmes_install_line_names_this_versions_wheel():
    text = (REPO / "README.md").read_text()
    assert f'pip install "dist/spabench-{spabench.__version__}-py3-none-any.whl[bench,sim,console]"' in text
