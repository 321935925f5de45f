"""Unscored attempts are counted at every session end (max_trials, campaign complete, Ctrl-C) and on
resume: real SO101Follower on the emulated bus, an openpi server on loopback, the unattended
operator (which leaves every attempt unscored), the SQLite ledger."""

from __future__ import annotations

import io
import os
import signal

from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK, EXIT_SIGINT
from tests.integration.harness import WaveServer, cfg_data, make_campaign, make_cfg
from tests.integration.test_faults import _output, _start_runner, _wait_for_steps
from tests.support.feetech_bus import EmulatedBus


def _note(when: str, campaign, *attempts: str) -> str:
    return (f"{when}: {len(attempts)} complete attempt(s) unscored ({', '.join(attempts)}); score them with "
            f"`spabench score campaign={campaign}` or on the console's review page (/review, 'Unscored only')")


def _lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_unscored_attempts_are_counted_at_each_end_and_on_resume(tmp_path):
    campaign = make_campaign(tmp_path, n=3)
    with EmulatedBus() as bus, WaveServer() as server:
        first, second, third = io.StringIO(), io.StringIO(), io.StringIO()
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0, max_trials=1), out=first) == EXIT_OK
        assert _lines(first)[-1] == _note("session end", campaign, "E0000-P1-a1")
        assert not [line for line in _lines(first) if line.startswith("resuming")]   # nothing to say at start
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0, max_trials=1), out=second) == EXIT_OK
        assert _note("resuming", campaign, "E0000-P1-a1") in _lines(second)
        assert _lines(second)[-1] == _note("session end", campaign, "E0000-P1-a1", "E0001-P1-a1")
        with Ledger.open(campaign / "ledger.sqlite") as ledger:
            ledger.record_score("E0000-P1-a1", "rita", True)
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0), out=third) == EXIT_OK
        lines = _lines(third)
        assert _note("resuming", campaign, "E0001-P1-a1") in lines
        assert lines[-2:] == ["campaign complete: every trial has a complete attempt",
                              _note("session end", campaign, "E0001-P1-a1", "E0002-P1-a1")]
        again = io.StringIO()   # nothing left to run: still counted
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0), out=again) == EXIT_OK
        assert _lines(again)[-1] == _note("session end", campaign, "E0001-P1-a1", "E0002-P1-a1")


def test_ctrl_c_counts_the_unscored_attempts(tmp_path):
    campaign = make_campaign(tmp_path, n=2)
    with EmulatedBus() as bus, WaveServer() as server:
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=1.0, max_trials=1), out=io.StringIO()) == EXIT_OK
        proc = _start_runner(tmp_path, cfg_data(campaign, bus.port, server.port, timer_s=30.0), new_group=True)
        _wait_for_steps(campaign / "episodes" / "E0001-P1-a1.partial", 20, proc)
        os.killpg(proc.pid, signal.SIGINT)   # as a terminal's Ctrl-C
        proc.wait(60)
    out = _output(proc)
    assert proc.returncode == EXIT_SIGINT, out
    assert _note("resuming", campaign, "E0000-P1-a1") in out
    tail = out[out.index("Ctrl-C: attempt aborted"):]
    assert _note("session end", campaign, "E0000-P1-a1") in tail, out
