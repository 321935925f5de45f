"""Fixtures for the MuJoCo twin's tests: the suite's data, a connected twin robot.

MUJOCO_GL=egl (headless rendering) is set by tests/conftest.py before any test module loads MuJoCo.
"""

from __future__ import annotations

import pytest

from tests.sim.inventory import load_checkout_suite, load_objects_and_geometry

pytest.importorskip("mujoco")


@pytest.fixture(scope="session")
def suite():
    return load_checkout_suite()


@pytest.fixture(scope="session")
def world_data():
    """(objects by id, bench geometry) from tasks/objects.yaml and hardware/bench.yaml."""
    return load_objects_and_geometry()


@pytest.fixture
def make_robot(world_data, tmp_path):
    """Factory for connected SimRobots; disconnects them at teardown."""
    from spabench.sim.config_sim_robot import SimRobotConfig
    from spabench.sim.sim_robot import SimRobot

    made = []

    def _make(**config):
        config.setdefault("id", "twin_test")
        config.setdefault("calibration_dir", tmp_path / "calibration")
        objects, geometry = world_data
        robot = SimRobot(SimRobotConfig(**config), objects=objects, geometry=geometry)
        robot.connect()
        made.append(robot)
        return robot

    yield _make
    for robot in made:
        if robot.is_connected:
            robot.disconnect()
