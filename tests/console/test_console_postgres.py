"""`spabench console` on a campaign whose ledger is in PostgreSQL (measured before: refused with "has no
ledger.sqlite"): a real `spabench run` of one twin trial into the shared ledger, then the console as
its own process lists that attempt and records a score through its API, from its own origin with its
CSRF header, into the PostgreSQL ledger."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from spabench.ledger import Ledger
from tests.console.conftest import REPO, SMALL_CAMPAIGN, env, free_port, spabench, wait_http
from tests.support.campaigns import by_alias, planned_timer

pytestmark = [pytest.mark.sim]


def test_console_serves_and_scores_a_postgresql_campaign(tmp_path, pg_url, policy_servers):
    campaign = tmp_path / "campaign"
    proc = spabench("plan", f"out={campaign}", *SMALL_CAMPAIGN, planned_timer(1.0), f"ledger={pg_url}", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (campaign / Ledger.POINTER).is_file() and not (campaign / Ledger.FILENAME).exists()
    proc = spabench("run", f"campaign={campaign}", "bench=sim_demo", "operator=auto",
                    "max_trials=1", "bench_id=bench-a", *by_alias(campaign, [f"cards.{n}.port={p}" for n, p in policy_servers.items()]),
                    timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with Ledger.open(campaign, readonly=True) as ledger:
        (done,) = [a.attempt_id for a in ledger.attempts() if a.status == "complete"]
    port = free_port()
    console = subprocess.Popen([sys.executable, "-m", "spabench.cli.main", "console", f"campaign={campaign}",
                                f"operator.console.port={port}", "operator.rater=rita"], cwd=REPO, env=env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/api/meta", 60, console)
        meta = httpx.get(base + "/api/meta").json()
        listed = httpx.get(base + "/api/attempts").json()["attempts"]
        assert [row["attempt_id"] for row in listed] == [done]
        version = httpx.get(f"{base}/api/attempts/{done}?rater=rita").json()["version"]
        assert version == 0
        reply = httpx.post(f"{base}/api/attempts/{done}/score", json={"rater": "rita", "success": True,
                                                                     "version": version},
                           headers={meta["csrf_header"]: meta["csrf_token"], "origin": base})
        assert reply.status_code == 200, reply.text
        again = httpx.post(f"{base}/api/attempts/{done}/score", json={"rater": "rita", "success": False,
                                                                     "reason": "stale tab", "version": version},
                           headers={meta["csrf_header"]: meta["csrf_token"], "origin": base})
        assert again.status_code == 409 and again.json()["conflict"]["score"]["success"] is True, again.text
    finally:
        console.terminate()
        out = console.communicate(timeout=30)[0]
    assert "has no" not in out
    with Ledger.open(campaign, readonly=True) as ledger:
        scores = [(s.rater, s.success) for s in ledger.scores_for(done)]
    assert [r for r, _ in scores] == ["sim_evaluator", "rita"] and scores[1] == ("rita", True)   # a second rater


def test_console_refuses_a_folder_without_a_ledger(tmp_path):
    proc = spabench("console", f"campaign={tmp_path}", timeout=60)
    assert proc.returncode == 2 and "has no ledger.sqlite or ledger.pg.json" in proc.stdout + proc.stderr
