"""Suite-wide fixtures: the throwaway PostgreSQL server (started once per session, on demand), and one
per module for tests that restart or stop their server; Ctrl-C handling as an operator's shell has it."""

from __future__ import annotations

import signal

import pytest


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
