"""Two twin benches on one PostgreSQL campaign while the database server restarts, or stops for 20 s,
mid-campaign: both benches wait for it (the arm holds between trials), reconnect, commit the rollouts
that finished meanwhile and carry on; nothing is interrupted or run twice. Measured before: both
benches ended with exit 5 and "Free space or fix the disk", and a valid rollout was marked
'interrupted' and run again. Real `spabench run` processes, the MuJoCo twin, scripted stand-in
policies (not VLAs), and a PostgreSQL server of the test's own (so the suite's shared one is never
stopped)."""

from __future__ import annotations

import collections
import time

import pytest

from spabench.ledger import Ledger
from tests.support import multibench

pytestmark = [pytest.mark.sim, pytest.mark.slow]

LEASE_S = 15.0    # the benches renew every 5 s; only the server's outage may make a lease run out


@pytest.fixture
def own_cluster(own_pg):
    return own_pg


@pytest.fixture
def planned(tmp_path, own_cluster):
    campaign = tmp_path / "campaign"
    multibench.plan(campaign, own_cluster.url(), multibench.campaign_overrides(id_=2, ood=1, direct=0))
    return campaign


def _logs(folders):
    return "\n".join(f"--- {f.name}\n" + (f / "run.log").read_text()[-3000:] for f in folders
                     if (f / "run.log").exists())


def _until(condition, what, timeout=300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _run_through(planned, own_cluster, fault) -> tuple[list, list]:
    folders = multibench.bench_copies(planned, 2)
    with Ledger.open(planned, readonly=True) as watch, multibench.stand_ins() as ports:
        procs = [multibench.start_bench(f, f"bench{i}", ports, lease_s=LEASE_S) for i, f in enumerate(folders, 1)]
        try:
            # mid-campaign: some trial complete, and an attempt running on a bench right now
            _until(lambda: any(p.poll() is not None for p in procs) or (
                any(a.status == "complete" for a in watch.attempts())
                and any(a.status == "running" for a in watch.attempts())), "a running attempt after a complete one")
            assert all(p.poll() is None for p in procs), _logs(folders)
            running = [a.attempt_id for a in watch.attempts() if a.status == "running"]
            fault()
            for p in procs:
                p.wait(timeout=420)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    return folders, [p.returncode for p in procs], running


def _check(planned, folders, codes, running):
    assert codes == [0, 0], _logs(folders)
    logs = _logs(folders)
    assert "lost the connection to the ledger's database" in logs and "reconnected" in logs, logs
    assert "Free space" not in logs
    with Ledger.open(planned, readonly=True) as ledger:
        attempts = ledger.attempts()
        assert [a.attempt_id for a in attempts if a.status != "complete"] == [], attempts   # nothing re-run
        per_trial = collections.Counter(a.trial_id for a in attempts)
        assert set(per_trial) == {t.trial_id for t in ledger.trials()} and set(per_trial.values()) == {1}
        assert all(ledger.attempt(a).status == "complete" for a in running)     # the rollouts in flight count
        kinds = collections.defaultdict(list)
        for e in ledger.events():
            if e["attempt_id"]:
                kinds[e["attempt_id"]].append(e["kind"])
        for a in attempts:
            assert kinds[a.attempt_id].count("attempt_started") == 1, kinds[a.attempt_id]
            assert kinds[a.attempt_id].count("attempt_finished") == 1, kinds[a.attempt_id]
            assert "attempt_interrupted" not in kinds[a.attempt_id]
        assert ledger.duplicate_complete() == [] and ledger.split_sets() == []


def test_a_server_restart_mid_campaign(planned, own_cluster):
    folders, codes, running = _run_through(planned, own_cluster,
                                           lambda: own_cluster.pg_ctl("restart", "-m", "fast"))
    _check(planned, folders, codes, running)


def test_a_20_s_server_stop_mid_campaign(planned, own_cluster):
    def stop_20_s():
        own_cluster.pg_ctl("stop", "-m", "fast")
        try:
            time.sleep(20.0)          # the fault itself: the server is away for 20 s
        finally:
            own_cluster.pg_ctl("start")

    folders, codes, running = _run_through(planned, own_cluster, stop_20_s)
    _check(planned, folders, codes, running)
