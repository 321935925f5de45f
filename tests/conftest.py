"""Suite-wide fixtures: the throwaway PostgreSQL server (started once per session, on demand)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pg_cluster():
    """A real PostgreSQL server for this test session. No binaries = a failure, never a skip."""
    from tests.support.pg_cluster import start_cluster

    try:
        cluster = start_cluster()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster, monkeypatch):
    """The admin URL (no password in it); the password reaches libpq through PGPASSWORD."""
    monkeypatch.setenv("PGPASSWORD", pg_cluster.password)
    monkeypatch.delenv("PGPASSFILE", raising=False)
    return pg_cluster.url()
