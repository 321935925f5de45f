"""Suite-wide fixtures: the throwaway PostgreSQL server (started once per session, on demand), and one
per module for tests that restart or stop their server; Ctrl-C handling as an operator's shell has it;
and the markers that follow from where a test lives and the fixtures it uses."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# Headless rendering, as the package and the Makefile set it: a test module that imports MuJoCo itself
# (importorskip) before any spabench.sim import would otherwise pick GLFW and fail without a display when
# pytest is run directly rather than through `make test`.
os.environ.setdefault("MUJOCO_GL", "egl")

# Markers (declared in pyproject.toml) that follow from where a test lives or from a fixture it uses
# (directly or through another fixture), so a new test is marked without anyone remembering to. A test
# marks itself for what neither shows (`@pytest.mark.slow` on a report or server in a subprocess).
PATH_MARKERS: dict[str, tuple[str, ...]] = {
    "integration/": ("slow", "bench"),               # sessions on the emulated Feetech bus
    "docs/test_docs_commands.py": ("slow", "sim"),   # every documented command, on a twin campaign
    "reliability/test_disk_full.py": ("slow",),      # twin runs on a filling tmpfs
    "analysis/test_analysis_figures.py": ("slow",),  # every figure drawn as PNG, PDF and SVG
    "analysis/test_analysis_report.py": ("slow",),   # whole reports of the example campaigns
    "record/test_frame_truth.py": ("slow", "bench"),  # recordings with injected camera stalls (LeRobot cameras)
    "commission/": ("bench",),                      # `bench check` on the emulated bus (LeRobot)
    "sim/": ("sim",),
    "standins/": ("sim",),
    "bench/test_bench_cameras.py": ("bench",),      # the replay cameras are LeRobot cameras
    "bench/test_bench_so101.py": ("bench",),        # LeRobot's SO101Follower on the emulated bus
    "console/test_camera_check.py": ("bench",),     # LeRobot cameras (replay) under the camera check
    "policy/test_lerobot_grpc.py": ("bench",),      # LeRobot's own gRPC PolicyServer
    "policy/test_serve_lerobot.py": ("bench",),     # a tiny ACT loaded through LeRobot
    "record/test_export.py": ("bench",),            # LeRobotDataset reads the export
}
FIXTURE_MARKERS: dict[str, str] = {
    "pg_cluster": "postgres", "own_pg_cluster": "postgres",
    "browser": "browser",
    "bus": "bench",
}
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.resolve().relative_to(TESTS).as_posix()
        names = {m for prefix, marks in PATH_MARKERS.items() if where.startswith(prefix) for m in marks}
        names |= {FIXTURE_MARKERS[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURE_MARKERS}
        if "sim" in names or item.get_closest_marker("sim"):
            names.add("bench")   # the twin is a LeRobot Robot (SimRobot): no twin without LeRobot
        for name in sorted(names - {m.name for m in item.iter_markers()}):
            item.add_marker(name)


def _lerobot_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("lerobot") is not None
    except (ImportError, ValueError):
        return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without LeRobot, `-m "not bench"` leaves out the modules whose every test is bench (they import
    LeRobot when collected, before any marker deselects them); they are collected whenever LeRobot is
    there or the marker expression keeps bench tests, so a broken install still fails them."""
    from _pytest.mark.expression import Expression

    markexpr = config.getoption("markexpr", "")
    if not markexpr or Expression.compile(markexpr).evaluate(lambda name, **_: name == "bench"):
        return None
    try:
        where = collection_path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None
    all_bench = any(where.startswith(prefix) and ("bench" in marks or "sim" in marks)
                    for prefix, marks in PATH_MARKERS.items())
    return True if all_bench and not _lerobot_installed() else None


def pytest_configure(config):
    """A suite started in the background (`make test &`, nohup) inherits SIGINT ignored, and then the
    Ctrl-C tests would measure the launcher, not the harness: give the process Python's own handler."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _cluster():
    """A started server, stopped and removed when the fixture ends. No binaries = a failure, never a skip."""
    from tests.support.pg_cluster import start_cluster

    try:
        cluster = start_cluster()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pg_cluster():
    """A real PostgreSQL server for this test session."""
    yield from _cluster()


@pytest.fixture(scope="module")
def own_pg_cluster():
    """A PostgreSQL server for one test module alone, for tests that restart or stop it (the session's
    shared one is never disturbed)."""
    yield from _cluster()


def _with_password(cluster, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", cluster.password)
    monkeypatch.delenv("PGPASSFILE", raising=False)
    return cluster


@pytest.fixture
def pg_url(pg_cluster, monkeypatch):
    """The admin URL (no password in it); the password reaches libpq through PGPASSWORD."""
    return _with_password(pg_cluster, monkeypatch).url()


@pytest.fixture
def own_pg(own_pg_cluster, monkeypatch):
    """`own_pg_cluster`, its password given to libpq through PGPASSWORD."""
    return _with_password(own_pg_cluster, monkeypatch)
