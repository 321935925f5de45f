"""Operators without a person: unattended recording and the twin's automatic scorer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spabench.bench.bench import Bench
    from spabench.ledger.schema import TrialRow
    from spabench.operator.config import OperatorConfig
    from spabench.rollout.types import EpisodeResult
    from spabench.suite.model import SceneSpec

from spabench.operator.base import Operator, Score

log = logging.getLogger(__name__)


class UnattendedOperator(Operator):
    """Records without prompts; attempts stay unscored (score them later with `spabench score`)."""

    confirms_scene = False  # nobody looks at the table

    def __init__(self, config: OperatorConfig | None = None, out=None):
        super().__init__(config)
        self.rater = (config.rater if config else "") or "operator"
        self.out = out

    def show(self, text: str) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=True)


class AutoOperator(Operator):
    """The twin's scorer: the attempt is scored by the sim evaluator.

    The run session has the twin build each scene (`bench.load_scene`) for every operator; this one
    remembers the scene and calls `bench.evaluate(scene) -> (success, failure_mode)` (the twin's
    SimBench). A bench without an evaluator (`Bench.evaluate` returns None) leaves attempts
    unscored, except no-motion trials whose motion pre-fill is taken as the score.
    """

    confirms_scene = False  # the twin stages scenes; nobody checks one by eye

    def __init__(self, config: OperatorConfig | None = None, bench: Bench | None = None, out=None):
        super().__init__(config)
        self.rater = (config.rater if config else "") or "sim_evaluator"
        self.bench = bench
        self.out = out
        self._scene: SceneSpec | None = None

    def show(self, text: str) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=True)

    def wait_scene_ready(self, trial: TrialRow, scene: SceneSpec, checklist_text: str) -> bool:
        self._scene = scene
        return True

    def score(self, trial: TrialRow, result: EpisodeResult | None, prefill: Score | None = None) -> Score | None:
        outcome = None
        if self.bench is not None and self._scene is not None:
            outcome = self.bench.evaluate(self._scene)
        if outcome is not None:
            success, mode = outcome
            success = bool(success)
            if prefill is not None and prefill.source == "motion_prefill" and not prefill.success:
                success, mode = False, prefill.failure_mode  # no-motion trial: the arm moved
            if not success and prefill is not None and prefill.failure_mode and not mode:
                mode = prefill.failure_mode
            return Score(success, None if success else mode, "scored by the sim evaluator", self.rater,
                         "sim_evaluator")
        if prefill is not None:
            return Score(prefill.success, prefill.failure_mode, prefill.note, self.rater, prefill.source)
        log.warning("no sim evaluator on this bench: attempt left unscored")
        return None


# Operator types by name: each registers a factory (config, bench, stdin, stdout) -> Operator. The
# console registers "web" itself (spabench.console.operator), so this package needs nothing from it.
OPERATORS: dict[str, Callable[..., Operator]] = {}


def register_operator(name: str):
    def register(factory: Callable[..., Operator]) -> Callable[..., Operator]:
        OPERATORS[name] = factory
        return factory
    return register


@register_operator("terminal")
def _terminal(config: OperatorConfig | None, bench: Bench | None = None, stdin=None, stdout=None) -> Operator:
    from spabench.operator.terminal import TerminalOperator

    return TerminalOperator(config, stdin=stdin, stdout=stdout, bench=bench)


@register_operator("unattended")
def _unattended(config: OperatorConfig | None, bench: Bench | None = None, stdin=None, stdout=None) -> Operator:
    return UnattendedOperator(config, out=stdout)


@register_operator("auto")
def _auto(config: OperatorConfig | None, bench: Bench | None = None, stdin=None, stdout=None) -> Operator:
    return AutoOperator(config, bench=bench, out=stdout)


def make_operator(config: OperatorConfig | None, bench: Bench | None = None, stdin=None, stdout=None) -> Operator:
    kind = config.type if config else "terminal"
    factory = OPERATORS.get(kind)
    if factory is None:
        from spabench.config import field_error

        raise field_error("operator config", "type", f"{kind!r} (allowed: {' | '.join(sorted(OPERATORS))}; an "
                          "operator type registers itself when its module is imported)")
    return factory(config, bench=bench, stdin=stdin, stdout=stdout)
