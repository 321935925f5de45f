"""The control process at real-time priority while a rollout runs, when the OS allows it.

On a two-core bench PC the loop shares the CPU with the MP4 encoders, the console process and the
operator's browser. Under the default scheduler a loop thread whose tick is due waits behind them
(benchmarks/console_loop.py measures it). SCHED_FIFO for the loop's thread alone is not enough: the
process's other threads (camera readers, recorder, policy broker, the console's link and frame
copier) hold the GIL the loop needs, and a busy machine preempts them while they hold it (priority
inversion). So during a rollout the loop's thread runs at `priority` and the process's other threads
just below it; afterwards every thread gets its own scheduling back. The console process, the
encoders and the browser keep normal scheduling, and the kernel's RT throttling (95% of each second)
still leaves them their share if the process ever ran away.

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


@contextmanager
def loop_priority(priority: int) -> Iterator[str]:
    """Run the block with the calling thread at SCHED_FIFO `priority` and the process's other threads at
    `priority - 1` (0: leave them alone); yields what the loop runs under ("fifo:10", or "normal" with the
    reason) and gives every thread its scheduling back after."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        yield "normal" if priority <= 0 else "normal (no SCHED_FIFO on this platform)"
        return
    me = threading.get_native_id()
    before = _scheduling_of_threads()
    try:
        os.sched_setscheduler(me, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as exc:
        _say_once(exc)
        yield f"normal ({exc.strerror or exc}: see bench.realtime_priority)"
        return
    try:
        for tid in before:
            if tid != me:
                with contextlib.suppress(OSError):   # a thread that ended meanwhile
                    os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(max(1, priority - 1)))
        yield f"fifo:{priority}"
    finally:
        for tid in _scheduling_of_threads():   # threads started meanwhile inherited FIFO: normal again
            policy, prio = before.get(tid, (os.SCHED_OTHER, 0))
            with contextlib.suppress(OSError):
                os.sched_setscheduler(tid, policy, os.sched_param(prio))


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
