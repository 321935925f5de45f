"""The control process at real-time priority while a rollout runs, when the OS allows it.

On a two-core bench PC the loop shares the CPU with the MP4 encoders, the console process and the
operator's browser. Under the default scheduler a loop thread whose tick is due waits behind them
(benchmarks/console_loop.py measures it). SCHED_FIFO for the loop's thread alone is not enough: the
process's other threads (camera readers, recorder, policy broker, the console's link and frame
copier) hold the GIL the loop needs, and a busy machine preempts them while they hold it (priority
inversion). So during a rollout the loop's thread runs at `priority` and the process's other threads
just below it; afterwards every thread gets its own scheduling back. The threads and processes started
meanwhile start at normal scheduling (SCHED_RESET_ON_FORK): an encoder or a console process restarted
during a rollout must not run at FIFO. The console process, the encoders and the browser keep normal
scheduling, and the kernel's RT throttling (95% of each second) still leaves them their share if the
process ever ran away.

SCHED_FIFO needs root, CAP_SYS_NICE or an rtprio limit (`ulimit -r`, /etc/security/limits.conf:
`@<group> - rtprio 99`). Where it is refused the loop runs as before; the episode's `timer_started`
event records what the loop ran under, and the log says once per process why.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)
_warned = False


_lock = threading.Lock()
_active = 0                                  # rollouts inside loop_priority in this process
_saved: dict[int, tuple[int, int]] = {}      # every thread's scheduling before the first of them


@contextmanager
def loop_priority(priority: int) -> Iterator[str]:
    """Run the block with the calling thread at SCHED_FIFO `priority` and the process's other threads at
    `priority - 1` (0: leave them alone); yields what the loop runs under ("fifo:10", or "normal" with the
    reason). When the last such block of the process ends, every thread gets back the scheduling it had
    before the first began (overlapping blocks, e.g. two sessions of one process, restore once).
    SCHED_RESET_ON_FORK: a thread or process started meanwhile starts at normal scheduling."""
    global _active, _saved
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        yield "normal" if priority <= 0 else "normal (no SCHED_FIFO on this platform)"
        return
    me = threading.get_native_id()
    fifo = os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0)
    with _lock:
        before = _scheduling_of_threads() if _active == 0 else {}   # taken before anything is raised
        try:
            os.sched_setscheduler(me, fifo, os.sched_param(priority))
        except OSError as exc:
            refused: OSError | None = exc
        else:
            refused = None
            if _active == 0:
                _saved = before
                for tid in before:
                    if tid != me:
                        with contextlib.suppress(OSError):   # a thread that ended meanwhile
                            os.sched_setscheduler(tid, fifo, os.sched_param(max(1, priority - 1)))
            _active += 1
    if refused is not None:
        _say_once(refused)
        yield f"normal ({refused.strerror or refused}: see bench.realtime_priority)"
        return
    try:
        yield f"fifo:{priority}"
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                for tid in _scheduling_of_threads():
                    policy, prio = _saved.get(tid, (os.SCHED_OTHER, 0))
                    with contextlib.suppress(OSError):
                        os.sched_setscheduler(tid, policy, os.sched_param(prio))
                _saved = {}
            else:   # another rollout still runs: this thread is one of its process's other threads
                with contextlib.suppress(OSError):
                    os.sched_setscheduler(me, fifo, os.sched_param(max(1, priority - 1)))


def _scheduling_of_threads() -> dict[int, tuple[int, int]]:
    """Each thread of this process (Linux: /proc/self/task): its policy and priority."""
    out: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):   # ended between listing and asking
                tid = int(name)
                out[tid] = (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority)
    return out


def _say_once(exc: OSError) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("the control loop runs at normal priority (SCHED_FIFO refused: %s). On a real bench "
                    "give the operator's account an rtprio limit (ulimit -r) or set bench.realtime_priority=0 "
                    "to silence this", exc.strerror or exc)
