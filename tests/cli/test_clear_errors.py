"""Issue 35: values that were accepted silently, or ended in a traceback, are one clear error before
anything is written.

Measured on main before: `ledger status ledger=mysql://x` (and `postgresql:/bad`) on a SQLite campaign
printed the SQLite ledger's status (as report, power, compare, export outcomes and ledger collect read the
SQLite file); `ledger collect bench_dirs.<typo>=...` collected as if it were not
given; `report display_names.<absent>=X` wrote the report; `export lerobot codec=libx265` without
reencode=true exported by copying; `suite validate suite.seed=-1` said "suite OK";
`export lerobot reencode=true codec=h264_bogus` and `serve lerobot device=cuda` (no GPU) raised
tracebacks.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.campaigns import ledger_count, plan_smoke
from tests.support.tiny_act import tiny_act_checkpoint  # noqa: F401 (fixture)

from spabench.cli.main import main


def _error(capsys) -> str:
    captured = capsys.readouterr()
    return captured.out + captured.err


# every command that takes ledger= and reads a campaign's ledger (run's own test is at the end)
ON_A_CAMPAIGN = {
    "ledger status": [],
    "ledger collect": ["out={tmp}/r"],
    "report": ["out={tmp}/r"],
    "power": ["half_width=0.2"],
    "compare": ["a=scripted_compositional", "b=scripted_memorising", "out={tmp}/r"],
    "export outcomes": ["out={tmp}/r"],
}


@pytest.mark.parametrize("url", ["mysql://x", "postgresql:/bad", "postgresql://db.lab/spabench"])
@pytest.mark.parametrize("command", sorted(ON_A_CAMPAIGN))
def test_a_ledger_url_on_a_sqlite_campaign_is_refused(tmp_path, capsys, url, command):
    campaign = plan_smoke(tmp_path)
    capsys.readouterr()
    extra = [a.format(tmp=tmp_path) for a in ON_A_CAMPAIGN[command]]
    assert main([*command.split(), f"campaign={campaign}", f"ledger={url}", *extra]) == 2
    err = _error(capsys)
    assert f"ledger={url}: this campaign's ledger is the SQLite file" in err, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("url", ["mysql://x", "postgresql:/bad"])
def test_a_ledger_url_that_is_not_postgresql_is_refused_where_a_ledger_is_made(tmp_path, capsys, url):
    """`plan` and `ledger copy` make a ledger at ledger=: anything but a postgresql:// URL is refused before
    a folder is written."""
    campaign = plan_smoke(tmp_path)
    for argv in (["plan", "campaign=smoke", f"out={tmp_path / 'new'}"],
                 ["ledger", "copy", str(campaign), str(tmp_path / "new")]):
        capsys.readouterr()
        assert main([*argv, f"ledger={url}"]) == 2, argv
        assert "ledger: a ledger URL starts with postgresql://" in _error(capsys), argv
        assert not (tmp_path / "new").exists()


def _recorded_campaign(tmp_path, bench_id: str = "bench-a"):
    """A campaign folder with one complete, recorded, scored attempt (real Recorder: HDF5 + MP4)."""
    from spabench.ledger import Ledger, TrialRow
    from spabench.record.recorder import Recorder
    from spabench.rollout.types import EpisodeMeta, EpisodeResult, StepRecord

    cams, shape = ("wrist", "middle"), (24, 32, 3)
    campaign = tmp_path / "c"
    campaign.mkdir()
    row = TrialRow(trial_id="E1-P1", evaluation_id="E1", policy="p", card="p", alias="P1", task="counting",
                   condition="id", scene_id="s1", scene_condition="id", matched_group=None, cell="c|a",
                   withheld=False, instruction="Leave exactly 1 object in the bowl.",
                   instruction_variant="original", timer_s=60.0, order=1)
    ledger = Ledger.create(campaign / "ledger.sqlite", [row], "h")
    with Recorder(campaign) as rec:
        a = ledger.begin_attempt("E1-P1", bench_id=bench_id)
        rec.on_episode_start(EpisodeMeta(attempt_id=a, cameras=cams, camera_shapes={c: shape for c in cams}))
        for t in range(6):
            state = np.full(6, float(t))
            rec.on_step(StepRecord(t, t / 30, state, {c: np.full(shape, 40 * t % 256, np.uint8) for c in cams},
                                   state, state))
        rec.on_episode_end(EpisodeResult("timer", True, None, 6, 6 / 30))
        ledger.finish_attempt(a, "complete", "timer", episode_path=f"episodes/{a}")
        assert rec.wait_idle(60)
    ledger.close()
    return campaign


@pytest.mark.slow
@pytest.mark.bench
def test_export_codec_and_crf_only_with_reencode_and_a_codec_ffmpeg_has(tmp_path, capsys):
    campaign = _recorded_campaign(tmp_path)
    for args, said in ((["codec=libx265"], "codec=libx265 applies only with reencode=true"),
                       (["crf=30"], "crf=30 applies only with reencode=true"),
                       (["reencode=true", "codec=h264_bogus"], "codec=h264_bogus: not a video encoder")):
        out = tmp_path / "ds"
        capsys.readouterr()
        assert main(["export", "lerobot", f"campaign={campaign}", f"out={out}", *args]) == 2, args
        assert said in _error(capsys)
        assert not out.exists()
    assert main(["export", "lerobot", f"campaign={campaign}", f"out={tmp_path / 'ok'}", "reencode=true",
                 "crf=30"]) == 0, _error(capsys)


@pytest.mark.slow
def test_ledger_collect_refuses_a_bench_the_ledger_does_not_know(tmp_path, capsys):
    campaign = _recorded_campaign(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    capsys.readouterr()
    assert main(["ledger", "collect", f"campaign={campaign}", f"out={tmp_path / 'all'}",
                 f"bench_dirs.bench-b={other}"]) == 2
    err = _error(capsys)
    assert "bench_dirs.bench-b: no attempt of this campaign was run on bench 'bench-b'" in err, err
    assert "bench-a" in err and not (tmp_path / "all").exists()
    assert main(["ledger", "collect", f"campaign={campaign}", f"out={tmp_path / 'all'}",
                 f"bench_dirs.bench-a={campaign}"]) == 0, _error(capsys)


def test_display_names_for_a_policy_not_in_the_report_are_refused(tmp_path, capsys):
    csv = tmp_path / "o.csv"
    csv.write_text("policy,task,condition,evaluation_id,success,matched_group,instruction_variant,failure_mode,"
                   "valid\n" + "".join(f"pi05,counting,id,E{i:04d},{i % 2},,original,"
                                        f"{'' if i % 2 else 'grasp_failure'},true\n" for i in range(1, 5)))
    capsys.readouterr()
    assert main(["report", f"outcomes={csv}", f"out={tmp_path / 'r'}", "bootstrap=200",
                 "display_names.no_such_policy=Nobody"]) == 2
    err = _error(capsys)
    assert "display_names.no_such_policy: no policy 'no_such_policy' in these outcomes" in err, err
    assert not (tmp_path / "r").exists()


def test_suite_seed_must_be_a_non_negative_integer(capsys):
    assert main(["suite", "validate", "suite.seed=-1"]) == 2
    assert "conf/suite: field 'seed': -1 (allowed: an integer >= 0" in _error(capsys)


@pytest.mark.bench
def test_serve_lerobot_on_a_missing_gpu_is_one_error(tiny_act_checkpoint, capsys):  # noqa: F811
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    for device, said in (("cuda", "device=cuda: torch sees 0 CUDA GPU(s)"),
                         ("cuda:1", "device=cuda:1: torch sees 0 CUDA GPU(s)"),
                         ("gpu0", "device='gpu0' is not a torch device")):
        capsys.readouterr()
        assert main(["serve", "lerobot", f"checkpoint={tiny_act_checkpoint}", f"device={device}"]) == 2
        assert said in _error(capsys)


def test_nothing_was_written_by_a_refused_run(tmp_path, capsys):
    """`run ledger=...` on a SQLite campaign: refused before an attempt or event is written."""
    campaign = plan_smoke(tmp_path)
    events = ledger_count(campaign, "events")
    capsys.readouterr()
    assert main(["run", f"campaign={campaign}", "ledger=mysql://x"]) == 2
    assert "this campaign's ledger is the SQLite file" in _error(capsys)
    assert ledger_count(campaign, "attempts") == 0 and ledger_count(campaign, "events") == events
