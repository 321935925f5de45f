"""Three twin benches on one PostgreSQL ledger, each a real `spabench run` process with its own bench
id and campaign folder: claims of whole scene sets, leases, a bench killed with SIGKILL mid-trial,
the episodes gathered from the benches, the report from the ledger alone. Scripted stand-in policies
(not VLAs) over the openpi protocol; the real MuJoCo twin; a real PostgreSQL server."""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest

from spabench.ledger import Ledger
from tests.support import multibench

pytestmark = [pytest.mark.sim, pytest.mark.slow]


def _wait_all(procs, timeout=420):
    deadline = time.monotonic() + timeout
    for p in procs:
        p.wait(timeout=max(1.0, deadline - time.monotonic()))


def _logs(folders):
    return "\n".join(f"--- {f.name}\n" + (f / "run.log").read_text()[-2500:] for f in folders if (f / "run.log").exists())


def _check_events(ledger):
    """Every attempt started once and ended once, by the bench that holds the claim on its set."""
    events = ledger.events()
    by_attempt = collections.defaultdict(list)
    for e in events:
        if e["attempt_id"]:
            by_attempt[e["attempt_id"]].append(e["kind"])
    claims = collections.defaultdict(list)    # evaluation id -> benches that claimed it, in order
    holder_at = {}
    for e in events:
        if e["kind"] == "scene_set_claimed":
            claims[e["payload"]["evaluation_id"]].append(e["payload"]["bench_id"])
            holder_at[e["payload"]["evaluation_id"]] = e["payload"]["bench_id"]
        if e["kind"] == "attempt_started":
            eid = ledger.trial(e["payload"]["trial_id"]).evaluation_id
            assert holder_at.get(eid) == e["payload"]["bench_id"], (e, holder_at)
    for attempt in ledger.attempts():
        kinds = by_attempt[attempt.attempt_id]
        assert kinds.count("attempt_started") == 1, (attempt, kinds)
        assert kinds.count("attempt_finished") + kinds.count("attempt_interrupted") == 1, (attempt, kinds)
    ids = [e["event_id"] for e in events]
    assert ids == sorted(set(ids))
    return claims


def _one_complete_each(ledger):
    complete = collections.Counter(a.trial_id for a in ledger.attempts() if a.status == "complete")
    assert {t.trial_id for t in ledger.trials()} == set(complete) and set(complete.values()) == {1}


@pytest.fixture
def planned(tmp_path, pg_url):
    campaign = tmp_path / "campaign"
    multibench.plan(campaign, pg_url, multibench.campaign_overrides(id_=2, ood=2, direct=1))
    return campaign


def test_three_benches_share_one_campaign(planned, tmp_path):
    folders = multibench.bench_copies(planned, 3)
    with multibench.stand_ins() as ports:
        procs = [multibench.start_bench(f, f"bench{i}", ports) for i, f in enumerate(folders, 1)]
        _wait_all(procs)
    assert [p.returncode for p in procs] == [0, 0, 0], _logs(folders)
    with Ledger.open(planned, readonly=True) as ledger:
        _one_complete_each(ledger)
        assert all(a.status == "complete" for a in ledger.attempts())     # nothing interrupted
        claims = _check_events(ledger)
        by_set = collections.defaultdict(set)
        for a in ledger.attempts():
            by_set[ledger.trial(a.trial_id).evaluation_id].add(a.bench_id)
            assert a.bench_kind == "sim" and a.operator == "auto"
        assert all(len(benches) == 1 for benches in by_set.values()), by_set    # no scene set split
        assert all(len(set(c)) == 1 for c in claims.values()), claims
        assert len({b for s in by_set.values() for b in s}) >= 2, by_set        # the work was shared
        outcomes = ledger.outcomes()
    assert len(outcomes) == 10 and outcomes["valid"].all()
    # each episode is on the bench that recorded it, and only there
    for a in outcomes.itertuples():
        homes = [f for f in folders if (f / a.episode_path / "episode.h5").is_file()]
        assert [h.name for h in homes] == [a.bench_id], (a.attempt_id, homes)
    # gather them in one place from the benches' folders (local paths standing in for host:/path)
    gathered = tmp_path / "review"
    dirs = [f"+bench_dirs.bench{i}={f}" for i, f in enumerate(folders, 1)]
    proc = multibench.cli("ledger", "collect", f"campaign={folders[0]}", f"out={gathered}", *dirs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all((gathered / p / "episode.h5").is_file() for p in outcomes["episode_path"])
    again = multibench.cli("ledger", "collect", f"campaign={folders[0]}", f"out={gathered}", *dirs)
    assert again.returncode == 0 and "collected 0 episode(s)" in again.stdout and "10 already there" in again.stdout
    # the report needs the ledger only: a bench folder without any episodes reports the whole campaign
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.yaml", "plan.csv", Ledger.POINTER):
        (bare / name).write_bytes((planned / name).read_bytes())
    proc = multibench.cli("report", f"campaign={bare}", f"out={tmp_path / 'report'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "report" / "summary.csv").is_file()
    # the report names the benches that ran the campaign (issue 36: it said "One bench") and splits by them
    used = list(dict.fromkeys(outcomes["bench_id"]))
    text = (tmp_path / "report" / "report.md").read_text()
    assert "One bench" not in text and f"{len(used)} benches ({', '.join(used)})" in text, text[-3000:]
    assert "## Success per bench" in text and (tmp_path / "report" / "benches.csv").is_file()


def test_a_killed_bench_lease_lapses_and_another_bench_finishes_its_set(planned):
    folders = multibench.bench_copies(planned, 3)
    with Ledger.open(planned, readonly=True) as ledger, multibench.stand_ins() as ports:
        procs = [multibench.start_bench(f, f"bench{i}", ports) for i, f in enumerate(folders, 1)]
        victim, victim_attempt = procs[0], None
        deadline = time.monotonic() + 240
        while victim_attempt is None and time.monotonic() < deadline and victim.poll() is None:
            running = [a for a in ledger.attempts() if a.status == "running" and a.bench_id == "bench1"]
            if running:
                victim_attempt = running[0]
                time.sleep(0.3)                         # well inside the rollout
                os.kill(victim.pid, signal.SIGKILL)
            time.sleep(0.05)
        assert victim_attempt is not None, _logs(folders)
        _wait_all(procs[1:])
        victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    assert [p.returncode for p in procs[1:]] == [0, 0], _logs(folders)
    with Ledger.open(planned, readonly=True) as ledger:
        dead = ledger.attempt(victim_attempt.attempt_id)
        assert (dead.status, dead.invalid_reason, dead.stop_reason) == ("invalid", "interrupted", "interrupted")
        (ev,) = ledger.events(dead.attempt_id, "attempt_interrupted")
        assert ev["payload"]["lease_lapsed"] and ev["payload"]["from_bench"] == "bench1"
        taker = ev["payload"]["by_bench"]
        assert taker in ("bench2", "bench3")
        trial = ledger.attempt(victim_attempt.attempt_id).trial_id
        redo = [a for a in ledger.attempts_for(trial) if a.status == "complete"]
        assert len(redo) == 1 and redo[0].bench_id == taker
        eid = ledger.trial(trial).evaluation_id
        pending_after_kill = [a for a in ledger.attempts() if ledger.trial(a.trial_id).evaluation_id == eid
                              and a.attempt_id > victim_attempt.attempt_id]
        assert all(a.bench_id == taker for a in pending_after_kill)
        _one_complete_each(ledger)
        _check_events(ledger)
        assert ledger.progress()["running"] == 0
