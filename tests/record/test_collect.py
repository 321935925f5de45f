"""`spabench ledger collect` (episodes from the benches that recorded them into one folder), on small
hand-made campaigns; the three-bench run in tests/e2e collects real twin episodes."""

from __future__ import annotations

import io

import pytest

from spabench.errors import ConfigError
from spabench.ledger import Ledger
from spabench.record.collect import collect_episodes, is_remote
from spabench.record.commands import CollectArgs, run_collect
from tests.ledger.conftest import make_ledger


def _episode(folder, rel, text):
    (folder / rel).mkdir(parents=True)
    (folder / rel / "episode.h5").write_text(text)


@pytest.mark.parametrize("location, remote", [
    ("lab@bench-b:/data/spring", True), ("bench-c:spring", True), ("/mnt/bench-a/spring", False),
    ("relative/folder", False), ("postgresql://host/db", False)])
def test_remote_locations_are_rsync_style_only(location, remote):
    assert is_remote(location) is remote


def test_collect_gathers_each_benchs_episodes_and_resumes(request, tmp_path, plan_rows):
    ledger = make_ledger(request, tmp_path, plan_rows, "sqlite", folder="a")
    bench_b = tmp_path / "bench-b"
    attempts = {}
    for trial, bench in (("E0001-P2", "bench-a"), ("E0001-P1", "bench-a"), ("E0002-P2", "bench-b")):
        a = ledger.begin_attempt(trial, f"episodes/{trial}-a1", bench_id=bench)
        ledger.finish_attempt(a, "complete", "timer")
        attempts[a] = bench
    bad = ledger.begin_attempt("E0002-P1", "episodes/E0002-P1-a1", bench_id="bench-b")
    ledger.finish_attempt(bad, "invalid", "fault", invalid_reason="camera_lost")
    ledger.close()
    campaign = tmp_path / "a"
    for a, bench in attempts.items():
        _episode(campaign if bench == "bench-a" else bench_b, f"episodes/{a}", a)
    out = tmp_path / "review"
    res = collect_episodes(campaign, out, {"bench-b": str(bench_b)})
    assert sorted(res.copied) == sorted(attempts) and res.missing == [(bad, res.missing[0][1])]
    assert "not on bench 'bench-b'" in res.missing[0][1]
    for a in attempts:
        assert (out / "episodes" / a / "episode.h5").read_text() == a
    assert Ledger.exists(out) and not list(out.glob("episodes/*.partial"))
    _episode(bench_b, f"episodes/{bad}", "partial recording")
    buf = io.StringIO()
    assert run_collect(CollectArgs(campaign, out, {"bench-b": str(bench_b)}), out=buf) == 0
    assert "collected 1 episode(s)" in buf.getvalue() and "3 already there" in buf.getvalue()


def test_collect_refuses_a_missing_bench_folder_and_a_foreign_out(request, tmp_path, plan_rows):
    make_ledger(request, tmp_path, plan_rows, "sqlite", folder="a").close()
    with pytest.raises(ConfigError, match="bench_dirs.bench-b=.*no such folder"):
        collect_episodes(tmp_path / "a", tmp_path / "out", {"bench-b": str(tmp_path / "nope")})
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError):
        collect_episodes(tmp_path / "a", foreign, {})
    assert (foreign / "notes.txt").read_text() == "keep me"
