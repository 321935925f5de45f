"""The PostgreSQL ledger on a real server (the session's throwaway cluster): URLs and credentials,
TLS, the campaign pointer, claims with row locks and leases, one live session per bench id."""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest
from tests.ledger.conftest import HASH, make_ledger

from spabench.errors import ConfigError
from spabench.ledger import BenchSessionActive, ClaimLost, Ledger, LedgerError, SceneSetTaken


@pytest.fixture
def pg_ledger(request, tmp_path, plan_rows, pg_url):   # pg_url: the server make_ledger uses
    led = make_ledger(request, tmp_path, plan_rows, "postgresql")
    yield led
    led.close()


def test_plan_writes_a_pointer_without_credentials(pg_ledger, tmp_path, pg_cluster):
    pointer = json.loads((tmp_path / "camp" / Ledger.POINTER).read_text())
    assert pointer["backend"] == "postgresql" and pointer["schema"].startswith("spabench_unit_")
    assert pg_cluster.password not in (tmp_path / "camp" / Ledger.POINTER).read_text()
    assert not (tmp_path / "camp" / Ledger.FILENAME).exists()
    assert Ledger.exists(tmp_path / "camp")
    with Ledger.open(tmp_path / "camp", expect_hash=HASH, readonly=True) as again:
        assert again.backend == "postgresql" and len(again.trials()) == 8
        with pytest.raises(LedgerError, match="read-only"):
            again.begin_attempt("E0001-P2")
    with pytest.raises(ConfigError, match="already exists"):
        Ledger.create(tmp_path / "camp", pg_ledger.trials(), HASH, url=pointer["url"])


@pytest.mark.parametrize("url", ["postgresql://spabench_admin:secret@127.0.0.1:5432/postgres",
                                 "postgresql://127.0.0.1/postgres?password=secret"])
def test_a_password_in_the_url_is_refused(tmp_path, plan_rows, url):
    with pytest.raises(ConfigError, match="carries a password.*PGPASSWORD"):
        Ledger.create(tmp_path / "c", plan_rows, HASH, url=url)
    assert not tmp_path.joinpath("c", Ledger.POINTER).exists()


def test_a_wrong_password_is_one_clear_error(tmp_path, plan_rows, pg_url, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "not-the-password")
    with pytest.raises(ConfigError, match="cannot connect.*PGPASSWORD"):
        Ledger.create(tmp_path / "c", plan_rows, HASH, url=pg_url)


def test_password_file_and_tls(tmp_path, plan_rows, pg_cluster, monkeypatch):
    """libpq conventions: a password file (PGPASSFILE) instead of the environment; sslmode passthrough."""
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_cluster.port}:*:spabench_admin:{pg_cluster.password}\n")
    passfile.chmod(0o600)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    led = Ledger.create(tmp_path / "c", plan_rows, HASH, {"campaign": "tls"}, url=pg_cluster.url(sslmode="require"))
    try:
        assert json.loads((tmp_path / "c" / Ledger.POINTER).read_text())["url"].endswith("sslmode=require")
        ssl = led.storage.conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0]
        assert ssl is True
    finally:
        led.close()
    with pytest.raises(ConfigError, match="cannot connect"):   # verify-full needs a CA the server's cert chains to
        Ledger.open(tmp_path / "c", url=pg_cluster.url(sslmode="verify-full", sslrootcert=str(tmp_path / "none.crt")))


def _second(led: Ledger) -> Ledger:
    return Ledger.open(led.path)


def test_benches_claim_whole_scene_sets_in_order(pg_ledger):
    other = _second(pg_ledger)
    try:
        assert pg_ledger.claim_scene_set("a", 30) == "E0001"
        assert other.claim_scene_set("b", 30) == "E0002"
        assert pg_ledger.claim_scene_set("a", 30) == "E0001"          # resume: its own set first
        with pytest.raises(LedgerError, match="claimed by bench 'a'"):
            other.begin_attempt("E0001-P2", bench_id="b")
        a = pg_ledger.begin_attempt("E0001-P2", bench_id="a")
        pg_ledger.finish_attempt(a, "complete", "timer")
        a = pg_ledger.begin_attempt("E0001-P1", bench_id="a")
        pg_ledger.finish_attempt(a, "complete", "timer")
        pg_ledger.release_claim("a", "E0001")
        assert pg_ledger.claim_scene_set("a", 30) == "E0003"           # E0001 done, E0002 held by b
        held = {c["evaluation_id"]: c["bench_id"] for c in pg_ledger.claims()}
        assert held == {"E0001": None, "E0002": "b", "E0003": "a", "E0004": None}
    finally:
        other.close()


def test_a_lapsed_lease_passes_the_set_on_and_interrupts_the_dead_attempt(pg_ledger):
    other = _second(pg_ledger)
    try:
        # a long lease while b looks (a loaded machine may take any time between the calls), then a
        # short one that lapses: a sleep longer than the lease only makes sure it has lapsed
        assert pg_ledger.claim_scene_set("a", 30) == "E0001"
        dead = pg_ledger.begin_attempt("E0001-P2", bench_id="a")
        assert other.claim_scene_set("b", 30) == "E0002"                 # a's lease is still live
        assert other.claim_scene_set("b", 30) == "E0002"
        assert pg_ledger.renew_claim("a", "E0001", 0.1) is True
        time.sleep(0.3)
        assert pg_ledger.renew_claim("a", "E0001", 0.1) is True         # lapsed, still a's: nobody took it yet
        time.sleep(0.3)
        other.release_claim("b", "E0002")
        other.storage.conn.execute("UPDATE scene_sets SET bench_id = 'x', lease_expires = 1e12 "
                                   "WHERE evaluation_id = 'E0002'")     # E0002 busy elsewhere
        assert other.claim_scene_set("b", 30) == "E0001"                 # taken over
        row = other.attempt(dead)
        assert (row.status, row.invalid_reason) == ("invalid", "interrupted")
        ev = other.events(dead, "attempt_interrupted")[0]["payload"]
        assert ev == {"lease_lapsed": True, "from_bench": "a", "by_bench": "b"}
        assert pg_ledger.renew_claim("a", "E0001", 30) is False
        # the late finish is the lost claim the session handles (before: a plain "not running" error)
        with pytest.raises(ClaimLost, match="bench 'b' took the set over") as lost:
            pg_ledger.finish_attempt(dead, "complete", "timer")
        assert (lost.value.evaluation_id, lost.value.holder, lost.value.status) == ("E0001", "b", "invalid")
        with pytest.raises(SceneSetTaken, match="claimed by bench 'b'") as taken:   # nothing more begins there
            pg_ledger.begin_attempt("E0001-P1", bench_id="a")
        assert (taken.value.evaluation_id, taken.value.holder) == ("E0001", "b")
        again = other.begin_attempt("E0001-P2", bench_id="b")
        assert again == "E0001-P2-a2"
    finally:
        other.close()


def test_concurrent_claims_never_hand_out_a_set_twice(pg_ledger):
    """Eight connections claim at once (row locks, SKIP LOCKED): four sets, four winners, no duplicates."""
    opened = [_second(pg_ledger) for _ in range(8)]
    got: dict[str, str | None] = {}
    barrier = threading.Barrier(len(opened))

    def claim(i: int, led: Ledger) -> None:
        barrier.wait()
        got[f"b{i}"] = led.claim_scene_set(f"b{i}", 30)

    threads = [threading.Thread(target=claim, args=(i, led)) for i, led in enumerate(opened)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        for led in opened:
            led.close()
    won = [eid for eid in got.values() if eid is not None]
    assert sorted(won) == ["E0001", "E0002", "E0003", "E0004"]
    claimed = [e["payload"]["evaluation_id"] for e in pg_ledger.events(kind="scene_set_claimed")]
    assert sorted(claimed) == sorted(won)


def test_one_live_session_per_bench_id(pg_ledger):
    pg_ledger.lock_bench("bench-a")
    other = _second(pg_ledger)
    try:
        with pytest.raises(BenchSessionActive, match="bench 'bench-a' already has a live session.*pid"):
            other.lock_bench("bench-a")
        other.lock_bench("bench-b")
    finally:
        other.close()
    pg_ledger.close()                                  # the process ends: its lock goes with the connection
    third = _second(pg_ledger)
    try:
        third.lock_bench("bench-a")
    finally:
        third.close()


def test_storage_errors_name_the_ledger(pg_ledger, pg_cluster):
    with pytest.raises(psycopg.errors.UniqueViolation), pg_ledger._write() as tx:
        tx.execute("INSERT INTO attempts (attempt_id, trial_id, n, status) VALUES ('x', 'E0001-P2', 1, 'running')")
        tx.execute("INSERT INTO attempts (attempt_id, trial_id, n, status) VALUES ('y', 'E0001-P2', 1, 'running')")
    assert pg_ledger.attempts_for("E0001-P2") == []    # rolled back as a whole


def _readme_sql(part: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = text.index(f"-- spabench lab set-up, part {part}")
    block = text[start:text.index("```", start)]
    code = "\n".join(line.split("--")[0] for line in block.splitlines())
    return [s.strip() for s in code.split(";") if s.strip()]


def test_the_readme_lab_set_up_gives_each_role_what_it_needs_and_no_more(tmp_path, plan_rows, pg_cluster,
                                                                          monkeypatch):
    """The README's roles and GRANTs, run on the real server: a planner plans, a bench runs and scores
    as its own role, a reader reads; none of them can do more."""
    admin = psycopg.connect(pg_cluster.url(), password=pg_cluster.password, autocommit=True)
    for statement in _readme_sql("1"):       # one by one: CREATE DATABASE runs outside a transaction
        admin.execute(statement)
    secrets = {"spabench_planner": "planner-pw", "bench_a": "bench-a-pw", "spabench_reader": "reader-pw"}
    for role, password in secrets.items():
        admin.execute(f"ALTER ROLE {role} PASSWORD '{password}'")
    admin.close()
    with psycopg.connect(pg_cluster.url(db="spabench"), password=pg_cluster.password, autocommit=True) as db:
        for statement in _readme_sql("2"):
            db.execute(statement)
    passfile = tmp_path / "pgpass"
    passfile.write_text("".join(f"127.0.0.1:{pg_cluster.port}:spabench:{r}:{p}\n" for r, p in secrets.items()))
    passfile.chmod(0o600)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(passfile))

    def url(role):
        return pg_cluster.url(db="spabench", role=role)

    folder = tmp_path / "camp"
    Ledger.create(folder, plan_rows, HASH, {"campaign": "lab"}, url=url("spabench_planner"),
                  grant="spabench_bench").close()
    with Ledger.open(folder, url=url("bench_a")) as bench:
        bench.lock_bench("bench-a")
        eid = bench.claim_scene_set("bench-a", 30)
        a = bench.begin_attempt(f"{eid}-P2", "episodes/x", bench_id="bench-a", bench_kind="so101", operator="ana")
        bench.finish_attempt(a, "complete", "timer")
        bench.record_score(a, "ana", False, "grasp_failure")
        bench.record_score(a, "ana", True, reason="replayed the video")
        bench.log_event(a, "note", {"text": "ok"})
        assert bench.renew_claim("bench-a", eid, 30)
        b = bench.begin_attempt(f"{eid}-P1", bench_id="bench-a")
        assert bench.mark_interrupted(bench_id="bench-a") == [b]
        for forbidden in ("UPDATE trials SET instruction = 'x'", "DELETE FROM attempts",
                          "UPDATE scores SET success = 1", "UPDATE attempts SET trial_id = 'E0002-P2'",
                          "DELETE FROM events", "UPDATE meta SET value = '1'", "CREATE TABLE extra (x int)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), bench._write() as tx:
                tx.execute(forbidden)
    with Ledger.open(folder, url=url("spabench_reader"), readonly=True) as reader:
        assert len(reader.outcomes()) == 2 and reader.score_history(a)[0].success is False
    with (
        Ledger.open(folder, url=url("spabench_reader")) as reader,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        reader.begin_attempt("E0004-P1", bench_id="reader")


def test_a_shared_ledger_interrupts_one_bench_at_a_time(pg_ledger):
    a = pg_ledger.begin_attempt("E0001-P2", bench_id="a")
    b = pg_ledger.begin_attempt("E0002-P2", bench_id="b")
    with pytest.raises(LedgerError, match="names the bench"):
        pg_ledger.mark_interrupted()
    with pytest.raises(LedgerError, match="only under that bench's lock"):   # i10: the lock comes first
        pg_ledger.mark_interrupted(bench_id="a")
    pg_ledger.lock_bench("a")
    assert pg_ledger.mark_interrupted(bench_id="a") == [a]
    assert pg_ledger.attempt(b).status == "running"


def test_plan_refuses_a_password_in_the_url_before_writing_anything(tmp_path):
    from tests.support import multibench

    out = tmp_path / "camp"
    proc = multibench.cli("plan", "campaign=smoke", f"out={out}", "ledger=postgresql://lab:hunter2@127.0.0.1/spabench")
    assert proc.returncode == 2 and "carries a password" in proc.stderr and "hunter2" not in proc.stderr
    assert not out.exists()
