"""The heap is frozen while the arm moves (rollout.heap): a full collection inside the block does
not walk what existed before it, young cycles are still collected, and nothing stays frozen."""

from __future__ import annotations

import gc
import weakref

from spabench.rollout.heap import heap_frozen_for_motion


class Node:
    def __init__(self) -> None:
        self.me = self   # a reference cycle: only the cyclic collector frees it


def _garbage_cycle() -> weakref.ref:
    return weakref.ref(Node())


def test_the_heap_before_the_motion_is_not_walked_young_cycles_are_and_nothing_stays_frozen():
    was_enabled = gc.isenabled()
    gc.disable()   # no automatic pass between making the garbage and the freeze
    try:
        gc.collect()
        old = _garbage_cycle()
        assert old() is not None
        with heap_frozen_for_motion() as frozen:
            assert frozen > 0 and gc.get_freeze_count() > 0
            young = _garbage_cycle()
            gc.collect()   # a full pass during the motion
            assert young() is None, "a cycle made during the motion must still be collected"
            assert old() is not None, "a full pass during the motion walked the frozen heap"
        assert gc.get_freeze_count() == 0
        gc.collect()   # the arm idle again: the old garbage goes now
        assert old() is None
    finally:
        if was_enabled:
            gc.enable()


def test_the_heap_is_unfrozen_when_the_motion_ends_by_an_exception():
    try:
        with heap_frozen_for_motion():
            raise RuntimeError("e-stop")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
