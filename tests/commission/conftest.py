"""The lab folder every `bench check` test runs in: the current folder (where bench-checks/ goes) with the
emulated arm's calibration file in calibration/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE


@pytest.fixture
def lab(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    calib = tmp_path / "calibration"
    calib.mkdir()
    shutil.copy(DEFAULT_CALIBRATION_FILE, calib / "spabench_follower.json")
    return tmp_path


@pytest.fixture
def calib(tmp_path: Path) -> Path:
    """The emulated arm's calibration file alone in a folder (bench.calibration_dir=...)."""
    d = tmp_path / "calibration"
    d.mkdir()
    shutil.copy(DEFAULT_CALIBRATION_FILE, d / "spabench_follower.json")
    return d
