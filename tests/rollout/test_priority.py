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


def policy(tid: int = 0) -> tuple[int, int]:
    """(policy without the reset-on-fork flag, priority) of a thread."""
    return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK, os.sched_getparam(tid).sched_priority


@pytest.fixture(autouse=True)
def normal_start():
    """Each test starts from a thread at normal scheduling, whatever ran before it in this process."""
    if os.geteuid() == 0:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@needs_root
def test_the_loop_thread_and_the_threads_holding_its_gil_are_fifo_inside_and_as_before_after():
    """The process's other threads go just below the loop (left normal, a busy machine preempts them while
    they hold the GIL the loop waits for); a thread or process started meanwhile starts normal
    (SCHED_RESET_ON_FORK: a console process restarted during a rollout must not run at FIFO)."""
    done = threading.Event()
    other = threading.Thread(target=done.wait, daemon=True)
    other.start()
    try:
        with loop_priority(10) as scheduling:
            assert scheduling == "fifo:10"
            assert policy() == (os.SCHED_FIFO, 10)
            assert policy(other.native_id) == (os.SCHED_FIFO, 9)
            late = threading.Thread(target=done.wait, daemon=True)
            late.start()
            assert policy(late.native_id) == (os.SCHED_OTHER, 0)
            child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                                   capture_output=True, text=True, timeout=60)
            assert child.stdout.strip() == str(os.SCHED_OTHER)
        for t in (0, other.native_id, late.native_id):
            assert policy(t) == (os.SCHED_OTHER, 0)
    finally:
        done.set()


@needs_root
def test_overlapping_rollouts_of_one_process_restore_once():
    """Two sessions in one process (a test, a library caller): the first one's exit must not drop the
    second's loop to normal, and the last exit restores what was there before the first (the leak this
    guards against left a test process's main thread at FIFO)."""
    inside, leave = threading.Event(), threading.Event()
    seen: dict[str, tuple[int, int]] = {}

    def second() -> None:
        with loop_priority(10):
            inside.set()
            leave.wait(30)
            seen["second at its end"] = policy()

    with loop_priority(10):
        t = threading.Thread(target=second)
        t.start()
        assert inside.wait(30)
    seen["main after its own exit"] = policy()
    leave.set()
    t.join(30)
    assert seen["main after its own exit"] == (os.SCHED_FIFO, 9)   # the second rollout still runs
    assert seen["second at its end"] == (os.SCHED_FIFO, 10)
    assert policy() == (os.SCHED_OTHER, 0)


def test_zero_leaves_the_thread_alone():
    with loop_priority(0) as scheduling:
        assert scheduling == "normal" and policy() == (os.SCHED_OTHER, 0)


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
    assert policy() == (os.SCHED_OTHER, 0)   # the thread went back after the rollout
