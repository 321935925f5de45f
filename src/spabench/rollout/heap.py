"""Keep the garbage collector's full passes out of the arm's motion.

CPython's cyclic collector stops every thread of the process while it runs, and a full (oldest
generation) pass walks every container object in the heap: with LeRobot, the policy clients and the
console loaded, hundreds of thousands. Measured in the test process on a loaded 2-core machine: one
full pass of 0.83 s in the middle of a rollout. The control loop had a 0.57 s gap, and the
console's dead-man heard no request for 0.91 s, 0.09 s short of its 1 s trip; a longer pass trips
it and ends the session with the arm held.

So from homing before a trial to the end of its rollout (the arm moving, the dead-man armed) the
heap as it was is frozen (`gc.freeze`, a list splice: no pause of its own). The collector's passes
then walk only the objects made since. Nothing is disabled: young cycles are still collected during
the motion. Unfreezing afterwards hands the frozen objects back to the oldest generation. Whatever
of them became garbage is collected during scoring or the next scene reset, when the arm is idle
and a pause costs nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def heap_frozen_for_motion() -> Iterator[int]:
    """Freeze the heap for the block and unfreeze it after; yields the number of objects frozen."""
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()


def thaw_heap() -> None:
    """Hand every frozen object back to the collector once the session's motion is over. A collection
    running in another thread across a freeze/unfreeze pair can leave a few objects in the permanent
    generation (seen: 375 of ~900,000 after a flooded session); they would never be collected."""
    gc.unfreeze()
