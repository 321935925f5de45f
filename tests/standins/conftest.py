"""Fixtures for the scripted stand-in's tests: the twin's own (the suite's data, connected twin robots),
since the stand-in is exercised driving the twin. MuJoCo missing skips them, as it skips tests/sim;
broken suite data fails them."""

from __future__ import annotations

from tests.sim.conftest import make_robot, suite, world_data  # noqa: F401  (fixtures)
