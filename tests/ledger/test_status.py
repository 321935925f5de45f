"""`spabench ledger status` on a shared PostgreSQL ledger: each bench's scene-set claim and its lease."""

from __future__ import annotations

import io

from tests.ledger.conftest import make_ledger

from spabench.ledger.commands import run_status


def test_status_shows_each_benchs_claim(request, tmp_path, plan_rows, pg_url):  # pg_url: make_ledger's server
    ledger = make_ledger(request, tmp_path, plan_rows, "postgresql")
    ledger.claim_scene_set("bench-a", 60)
    ledger.claim_scene_set("bench-b", 0.001)
    ledger.close()
    buf = io.StringIO()
    assert run_status(tmp_path / "camp", out=buf) == 0
    text = buf.getvalue()
    assert "postgresql://" in text and "0/8 trials complete" in text
    assert "scene set E0001: bench bench-a (lease 60 s left)" in text or "lease 59 s left" in text
    assert "scene set E0002: bench bench-b (lease lapsed" in text
