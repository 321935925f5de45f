"""`spabench ledger copy` round-trips a campaign SQLite -> PostgreSQL -> SQLite without loss, checked
by comparing both ledgers, and the report is identical; a copy that would differ leaves nothing."""

from __future__ import annotations

import pytest
from tests.support import multibench

from spabench.errors import ConfigError, DataError
from spabench.ledger import Ledger
from spabench.ledger.copy import TABLES, copy_ledger, differences, dump


def _play(ledger: Ledger) -> None:
    """A campaign's life: attempts on two benches, invalid and interrupted ones, scores, a correction,
    a second rater, an operator invalidation, claims and custom events."""
    trials = ledger.trials()
    for i, trial in enumerate(trials):
        bench = "bench-a" if i % 2 == 0 else None
        if i % 3 == 0:
            bad = ledger.begin_attempt(trial.trial_id, bench_id=bench, bench_kind="sim", operator="auto")
            ledger.finish_attempt(bad, "invalid", "fault", invalid_reason="server_lost")
        a = ledger.begin_attempt(trial.trial_id, f"episodes/{trial.trial_id}-x", bench_id=bench, bench_kind="sim",
                                 operator="auto", dry_run=i == 1)
        ledger.log_event(a, "rollout_summary", {"steps": 30 + i, "motion_onset": 0.25 * i})
        ledger.finish_attempt(a, "complete", "timer")
        ledger.record_score(a, "sim_evaluator", i % 2 == 0, None if i % 2 == 0 else "grasp_failure", f"note {i}")
        if i == 2:
            ledger.record_score(a, "sim_evaluator", False, "wrong_target", reason="replayed: wrong cup")
            ledger.record_score(a, "second", True)
        if i == 3:
            ledger.invalidate_attempt(a, "scene staged wrong", "lead")
    # the first pending set: trial 1's (its only complete attempt was a dry run, which consumes nothing)
    assert ledger.claim_scene_set("bench-b", 60) == trials[1].evaluation_id
    ledger.begin_attempt(trials[3].trial_id, bench_id="bench-b")
    ledger.mark_interrupted()


@pytest.fixture
def campaign(tmp_path):
    out = tmp_path / "a"
    multibench.plan(out, None, multibench.campaign_overrides(id_=2, ood=2, direct=1))
    with Ledger.open(out, lock=True) as ledger:   # mark_interrupted needs the campaign lock
        _play(ledger)
    return out


def test_copy_round_trip_sqlite_postgres_sqlite_and_the_report_is_identical(campaign, tmp_path, pg_url):
    b, c = tmp_path / "b", tmp_path / "c"
    proc = multibench.cli("ledger", "copy", str(campaign), str(b), f"ledger={pg_url}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compared equal" in proc.stdout and (b / Ledger.POINTER).is_file() and (b / "config.yaml").is_file()
    proc = multibench.cli("ledger", "copy", str(b), str(c))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Ledger.open(campaign, readonly=True) as la, Ledger.open(b, readonly=True) as lb, \
            Ledger.open(c, readonly=True) as lc:
        assert lb.backend == "postgresql" and lc.backend == "sqlite"
        assert differences(la, lb) == [] and differences(la, lc) == []
        tables = dump(la)
        assert all(tables[t][1] for t, _ in TABLES), "every table holds rows"
        attempt = [a for a in la.attempts() if len(la.score_history(a.attempt_id)) == 3][0].attempt_id
        assert lc.score_history(attempt) == la.score_history(attempt) == lb.score_history(attempt)
        assert lc.outcomes().equals(la.outcomes())
        last_event = max(e["event_id"] for e in la.events())
    reports = []
    for folder in (campaign, b, c):
        out = tmp_path / f"report-{folder.name}"
        proc = multibench.cli("report", f"campaign={folder}", f"out={out}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        reports.append({p.name: p.read_text().replace(str(folder / Ledger.FILENAME), "<ledger>")
                        .replace(str(folder / Ledger.POINTER), "<ledger>")
                        .replace(Ledger.FILENAME, "<ledger>").replace(Ledger.POINTER, "<ledger>")  # names alone
                        for p in out.iterdir() if p.suffix in (".csv", ".md", ".html")})
    assert "report.md" in reports[0] and "summary.csv" in reports[0]
    assert reports[0] == reports[1] == reports[2]      # identical but for where the ledger is
    for folder in (b, c):      # the copies carry on: new ids follow the copied ones on both back ends
        with Ledger.open(folder) as led:
            assert led.log_event(None, "after_copy", {}) == last_event + 1


def test_copy_refuses_an_existing_destination_and_a_non_campaign(campaign, tmp_path):
    with pytest.raises(ConfigError, match="already exists"):
        copy_ledger(campaign, campaign)
    with pytest.raises(ConfigError, match="not a campaign folder"):
        copy_ledger(tmp_path / "nothing", tmp_path / "d")


def test_a_copy_that_differs_is_removed(campaign, tmp_path, monkeypatch):
    import spabench.ledger.copy as copy_mod

    real = copy_mod.dump
    calls = {"n": 0}

    def lossy(ledger):
        calls["n"] += 1
        tables = real(ledger)
        if calls["n"] == 3:                     # the destination's dump in the check: drop one score
            cols, rows = tables["scores"]
            tables["scores"] = (cols, rows[:-1])
        return tables

    monkeypatch.setattr(copy_mod, "dump", lossy)
    with pytest.raises(DataError, match="differs from its source.*scores: 1 row"):
        copy_ledger(campaign, tmp_path / "d")
    assert not Ledger.exists(tmp_path / "d")
