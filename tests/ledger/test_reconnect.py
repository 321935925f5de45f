"""A shared ledger survives its server: a lost connection is retried with backoff for `reconnect_s`,
the operation then runs on the new connection, the bench's session lock comes back with it, and past
the deadline the error names the database, never the disk. On a real PostgreSQL server of its own
(restarted and stopped with pg_ctl), so the suite's shared server is never disturbed."""

from __future__ import annotations

import threading
import time

import pytest
from tests.ledger.conftest import HASH

from spabench.ledger import BenchSessionActive, Ledger, LedgerStorageError
from spabench.ledger.integrity import LedgerUnavailable


@pytest.fixture
def own_cluster(own_pg):
    return own_pg


@pytest.fixture
def bench(own_cluster, tmp_path, plan_rows):
    led = Ledger.create(tmp_path / "camp", plan_rows, HASH, {"campaign": "reconnect"}, url=own_cluster.url())
    led.lock_bench("a")
    yield led
    led.close()
    if not own_cluster.data.joinpath("postmaster.pid").exists():
        own_cluster.pg_ctl("start")


def test_a_server_restart_mid_attempt_is_survived(bench, own_cluster):
    assert bench.claim_scene_set("a", 60) == "E0001"
    att = bench.begin_attempt("E0001-P2", bench_id="a")
    before = bench.storage.conn
    own_cluster.pg_ctl("restart", "-m", "fast")
    bench.finish_attempt(att, "complete", "timer")          # the rollout that finished meanwhile is kept
    assert bench.storage.conn is not before
    assert bench.attempt(att).status == "complete"
    assert [e["payload"]["status"] for e in bench.events(att, "attempt_finished")] == ["complete"]
    assert bench.renew_claim("a", "E0001", 60) is True
    other = Ledger.open(bench.path)
    try:
        with pytest.raises(BenchSessionActive):               # the bench lock came back with the connection
            other.lock_bench("a")
    finally:
        other.close()


def test_a_stopped_server_is_waited_for_and_the_finish_committed_after(bench, own_cluster):
    assert bench.claim_scene_set("a", 60) == "E0001"
    att = bench.begin_attempt("E0001-P2", bench_id="a")
    own_cluster.pg_ctl("stop", "-m", "fast")
    outcome: dict[str, object] = {}

    def finish() -> None:
        try:
            bench.finish_attempt(att, "complete", "timer")
            outcome["done"] = True
        except Exception as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=finish)
    worker.start()
    try:
        worker.join(3.0)                                        # the server stays down for at least this long
        assert worker.is_alive() and not outcome, outcome      # still retrying, nothing given up
    finally:
        own_cluster.pg_ctl("start")
    worker.join(60)
    assert outcome == {"done": True}
    assert bench.attempt(att).status == "complete"
    assert bench.claim_scene_set("a", 60) == "E0001"            # still this bench's set


def test_past_reconnect_s_the_error_names_the_database(bench, own_cluster):
    bench.reconnect_s = 1.0
    att = bench.begin_attempt("E0001-P2", bench_id="a")
    own_cluster.pg_ctl("stop", "-m", "fast")
    try:
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable) as caught:
            bench.finish_attempt(att, "complete", "timer")
        assert time.monotonic() - started < 30
    finally:
        own_cluster.pg_ctl("start")
    text = str(caught.value)
    assert isinstance(caught.value, LedgerStorageError)        # the session stops as on any storage failure
    assert own_cluster.url() in text and "could not reconnect within 1 s" in text and "database server" in text
    assert "Free space" not in text and "disk" not in text
