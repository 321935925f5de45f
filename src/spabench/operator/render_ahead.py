"""The rendered scene references of a session, made ahead in a background process.

Drawing one scene's reference (spabench.operator.scene_reference: the twin's two views and the
placement diagram) takes seconds of CPU. Drawn when a person first places the scene, that is seconds
per new scene while the operator waits. So a session whose operator shows them starts one worker
process at session start that draws the references of the session's pending trials in the order the
trials will run, into the same cache (DIR/references/rendered/), where the on-demand path finds them
(it still draws any the worker has not reached: it is the fallback). A resumed session finds the
ones already drawn and goes on with the rest.

Why a process, not a thread: MuJoCo's rendering holds the CPU (and the GIL in parts), and the
control loop must not pay for it; the process runs at low priority (os.nice) so the rollout's
process wins the cores. Why at session start, not at `plan`: the drawing depends on the bench
(its home pose is part of the cache key), the planning machine may have no GL, and a campaign of
900 scenes would make `plan` take many minutes for scenes a session may never reach.

The worker stays at most LOOKAHEAD scenes ahead of the scene the operator is placing (`reached`):
enough that the next new scene is always drawn while the current one runs, without a session of 900
scenes spending a core for hours on scenes far ahead while the arm moves. Within that window it
draws every placement diagram (what a person places the objects by; a fraction of a second each)
before any twin view (seconds each), so a worker starved of CPU by a loaded machine still has the
diagrams ready. While it runs the operators never render the views themselves (`views=False`):
a scene whose views are not drawn yet shows its diagram, and the views once the worker has them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spabench.operator.checklist import REFERENCE_DIR
from spabench.operator.scene_reference import RENDERED_DIR

log = logging.getLogger(__name__)

NICENESS = 10          # added to the worker's nice value: the session's own process comes first
LOOKAHEAD = 3          # scenes drawn beyond the one being placed
STOP_WAIT_S = 0.5      # how long stop() waits for the worker between scenes before terminating it
KILL_WAIT_S = 10.0     # how long a terminated worker may take to exit


@dataclass(frozen=True)
class _SuiteParts:
    """What rendered_reference reads of a suite, small enough to send to the worker."""

    objects: Mapping[str, Any]
    geometry: Any


def _draw_all(campaign_dir: str, suite: _SuiteParts, scenes: list[Any], home: Mapping[str, float] | None,
              stop: Any, reached: Any, waiting: Any, lookahead: int) -> None:
    """The worker: each scene's reference in order, at most `lookahead` beyond `reached`, until done or
    `stop` is set; `waiting` holds the index it waits to draw (-1: drawing or done)."""
    from spabench.operator.scene_reference import rendered_reference

    with contextlib.suppress(OSError):   # a platform without nice: the worker still helps
        os.nice(NICENESS)
    # the work in order: within the window, every diagram before any view (see the module doc)
    todo = {False: 0, True: 0}   # views? -> index of the next scene to draw
    while todo[True] < len(scenes):
        views = todo[False] >= len(scenes) or todo[False] > reached.value + lookahead
        i = todo[views]
        if i > reached.value + lookahead:   # far enough ahead: wait for the session to move on
            waiting.value = i
            if stop.wait(0.5):
                return
            continue
        waiting.value = -1
        if stop.is_set():
            return
        try:
            rendered_reference(campaign_dir, suite, scenes[i], home=home, views=views)
        except Exception as exc:  # one scene the worker cannot draw: the on-demand path says why
            log.warning("rendering the reference of scene %s ahead failed: %s", scenes[i].scene_id, exc)
        todo[views] = i + 1


def scenes_in_order(trials: Iterable[Any], suite: Any) -> list[Any]:
    """The scene specifications of `trials` (in their run order), each once; unknown scenes left out."""
    seen: dict[str, Any] = {}
    for trial in trials:
        if trial.scene_id in seen:
            continue
        try:
            seen[trial.scene_id] = suite.scene(trial.scene_id)
        except Exception:
            continue
    return list(seen.values())


class RenderAhead:
    """One worker process drawing `scenes`' references into `campaign_dir`; `stop()` ends it."""

    def __init__(self, campaign_dir: str | os.PathLike, suite: Any, scenes: list[Any],
                 home: Mapping[str, float] | None = None, lookahead: int = LOOKAHEAD) -> None:
        self.campaign_dir = Path(campaign_dir)
        self.scenes = list(scenes)
        self._args = (str(self.campaign_dir), _SuiteParts(dict(suite.objects), suite.geometry), self.scenes,
                      dict(home) if home is not None else None)
        self._ctx = multiprocessing.get_context("spawn")   # no fork of a process with threads and GL state
        self._stop = self._ctx.Event()
        self._reached = self._ctx.Value("i", 0, lock=False)   # index in `scenes` of the scene being placed
        self.waiting = self._ctx.Value("i", -1, lock=False)   # the worker's: the index it waits to draw
        self.lookahead = lookahead
        self._index = {scene.scene_id: i for i, scene in enumerate(self.scenes)}
        self.process: Any = None

    def start(self) -> RenderAhead:
        if self.scenes:
            self.process = self._ctx.Process(target=_draw_all, args=(*self._args, self._stop, self._reached,
                                                                   self.waiting, self.lookahead),
                                             name="spabench-render-ahead", daemon=True)
            self.process.start()
        return self

    def reached(self, scene_id: str) -> None:
        """The operator is placing `scene_id`: the worker may draw up to LOOKAHEAD scenes beyond it."""
        i = self._index.get(scene_id)
        if i is not None and i > self._reached.value:
            self._reached.value = i

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def stop(self) -> None:
        """Stop the worker now: a worker waiting between scenes exits at once; one in the middle of a
        scene is terminated (the drawing is a cache: the on-demand path draws it again), and the
        temporary files it was writing (spabench.atomic names them by process) are removed. The
        session's end, an e-stop's "ended" page included, never waits for a rendering."""
        if self.process is None:
            return
        self._stop.set()
        self.process.join(STOP_WAIT_S)
        if self.process.is_alive():
            pid = self.process.pid
            self.process.terminate()
            self.process.join(KILL_WAIT_S)
            for leftover in (self.campaign_dir / REFERENCE_DIR / RENDERED_DIR).glob(f".*.{pid}-*.tmp"):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        self.process = None
