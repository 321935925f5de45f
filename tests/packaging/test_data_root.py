"""Issue 40: where spabench's data is found is written once (spabench.paths.repo_root): $SPABENCH_ROOT
as an override, else the installed package's data (a wheel's spabench/_data/, or the checkout of the
editable installation). The working directory plays no part.

Measured before: repo_root() took the nearest folder around the working directory that looked like a
checkout, so a command run inside a lab's copy of conf/ and tasks/ (or any old checkout) silently read
that instead of the installed package's data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import spabench
from spabench.cli.commands import COMMANDS
from spabench.cli.main import compose
from spabench.commission.commands import BenchCheckConfig
from spabench.errors import ConfigError
from spabench.paths import DATA_FOLDERS, conf_dir, installed_roots, option_dirs, repo_root
from tests.packaging.conftest import REPO


def _decoy(folder: Path) -> Path:
    for marker in ("conf", "tasks", "hardware"):
        (folder / marker).mkdir(parents=True)
    (folder / "conf" / "config.yaml").write_text("defaults: []\n")
    return folder


def test_the_working_directory_does_not_choose_the_data(tmp_path, monkeypatch):
    monkeypatch.delenv("SPABENCH_ROOT", raising=False)
    monkeypatch.chdir(_decoy(tmp_path / "old_checkout"))
    assert repo_root() == Path(spabench.__file__).resolve().parents[2] == REPO   # this checkout: editable
    assert conf_dir() == REPO / "conf"
    monkeypatch.chdir(tmp_path)
    assert repo_root() == REPO


def test_the_installed_package_data_comes_first_then_the_checkout_around_the_source():
    package = Path(spabench.__file__).resolve().parent
    assert installed_roots() == (package / "_data", package.parents[1])
    assert set(DATA_FOLDERS) == {"conf", "tasks", "hardware", "policies"}
    setup = (REPO / "setup.py").read_text()
    assert "DATA_FOLDERS: tuple[str, ...] = _PATHS.DATA_FOLDERS" in setup   # the build copies what paths.py names


def test_spabench_root_overrides_and_a_bad_one_is_one_error(tmp_path, monkeypatch):
    decoy = _decoy(tmp_path / "root")
    monkeypatch.setenv("SPABENCH_ROOT", str(decoy))
    assert repo_root() == decoy
    monkeypatch.setenv("SPABENCH_ROOT", str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match="SPABENCH_ROOT=.*does not hold conf/config.yaml"):
        repo_root()


def test_a_labs_config_dir_comes_before_the_data_roots_conf(tmp_path):
    lab = tmp_path / "lab"
    (lab / "bench").mkdir(parents=True)
    (lab / "bench" / "so101.yaml").write_text("defaults: [so101_emulated, _self_]\nport: /dev/ttyLAB0\n")
    assert option_dirs(lab) == [lab, REPO / "conf"] and option_dirs(None) == [REPO / "conf"]
    cfg = BenchCheckConfig.from_mapping({"config_dir": str(lab)})
    assert cfg.group_dirs("bench") == [lab / "bench", REPO / "conf" / "bench"]
    built = compose(COMMANDS["bench check"], ["bench=so101", f"config_dir={lab}"])
    assert built.bench.port == "/dev/ttyLAB0"
