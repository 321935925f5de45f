"""Fixtures: the emulated Feetech bus on a pty and bench configs pointing the real LeRobot stack at it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spabench.bench.config import BenchConfig
from spabench.suite.vocabulary import CAMERAS
from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE, EmulatedBus

ROBOT_ID = "spabench_follower"


@pytest.fixture
def calib_dir(tmp_path: Path) -> Path:
    """A private copy of the shipped calibration file (tests may corrupt or delete it)."""
    d = tmp_path / "calibration"
    d.mkdir()
    shutil.copy(DEFAULT_CALIBRATION_FILE, d / f"{ROBOT_ID}.json")
    return d


@pytest.fixture
def bus():
    with EmulatedBus() as emulated:
        yield emulated


def small_cameras(fps: int = 30) -> dict:
    return {name: {"type": "spabench_replay", "index_or_path": "pattern", "width": 48, "height": 32,
                   "fps": fps} for name in CAMERAS}


@pytest.fixture
def make_cfg(calib_dir: Path):
    """make_cfg(bus, **overrides) -> BenchConfig for the emulated arm with five small replay cameras."""

    def _make(emulated: EmulatedBus, **overrides) -> BenchConfig:
        data = {
            "type": "so101",
            "port": emulated.port,
            "robot_id": ROBOT_ID,
            "calibration_dir": str(calib_dir),
            "cameras": small_cameras(),
            "fps": 30,
            "max_relative_target": 10.0,
        }
        data.update(overrides)
        return BenchConfig.from_mapping(data)

    return _make
