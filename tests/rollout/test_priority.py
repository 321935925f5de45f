"""The control loop's thread at SCHED_FIFO during a rollout, where the OS allows it (rollout.priority)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from spabench.rollout.controls import StopControl
from spabench.rollout.priority import loop_priority
from tests.rollout.test_loop import _run

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO and dropping to another user need root")


@needs_root
def test_the_loop_thread_and_the_threads_holding_its_gil_are_fifo_inside_and_as_before_after():
    """The process's other threads go just below the loop (left normal, a busy machine preempts them while
    they hold the GIL the loop waits for); a thread started meanwhile is normal again after."""
    done = threading.Event()
    other = threading.Thread(target=done.wait, daemon=True)
    other.start()
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    try:
        with loop_priority(10) as scheduling:
            assert scheduling == "fifo:10"
            assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == (os.SCHED_FIFO, 10)
            tid = other.native_id
            assert (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority) == (os.SCHED_FIFO, 9)
            late = threading.Thread(target=done.wait, daemon=True)
            late.start()
            assert os.sched_getscheduler(late.native_id) == os.SCHED_FIFO   # inherited from its creator
        for t in (0, other.native_id, late.native_id):
            assert (os.sched_getscheduler(t), os.sched_getparam(t).sched_priority) == (os.SCHED_OTHER, 0)
    finally:
        done.set()


def test_zero_leaves_the_thread_alone():
    with loop_priority(0) as scheduling:
        assert scheduling == "normal" and os.sched_getscheduler(0) == os.SCHED_OTHER


@needs_root
def test_refused_the_loop_runs_normally_and_the_log_says_why():
    """An operator account without an rtprio limit (here: root dropped to `nobody`)."""
    code = textwrap.dedent("""
        import logging, os
        from spabench.rollout.priority import loop_priority   # imported first: nobody cannot read /root
        logging.basicConfig(level=logging.WARNING)
        os.setgid(65534); os.setuid(65534)
        with loop_priority(10) as s:
            print(s, os.sched_getscheduler(0) == os.SCHED_OTHER)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("normal (") and out.stdout.strip().endswith("True")
    assert "SCHED_FIFO refused" in out.stderr and "ulimit -r" in out.stderr


@needs_root
def test_the_rollout_records_what_its_loop_ran_under(card):
    from dataclasses import replace

    from spabench.policy.broker import ActionBroker
    from spabench.rollout.loop import Rollout
    from spabench.rollout.types import EpisodeMeta
    from tests.rollout.stubs import ScriptedClient, StubBench

    result, col, *_ = _run(card)   # the default: normal scheduling
    assert next(e for e in col.events if e.kind == "timer_started").detail["scheduling"] == "normal"

    bench, client = StubBench(), ScriptedClient(card)
    broker = ActionBroker(client, card)
    try:
        rollout = Rollout(bench, broker, replace(card, timer_s=0.2), controls=StopControl(), realtime_priority=10)
        rollout.run(EpisodeMeta(attempt_id="rt"), "do it")
    finally:
        broker.stop()
    assert rollout.scheduling == "fifo:10"
    assert os.sched_getscheduler(0) == os.SCHED_OTHER   # the thread went back after the rollout
