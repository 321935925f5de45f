"""What every operator does for the `run` command, and the score record.

An operator is asked, once: `begin_session(session)` after the bench connects (the browser's camera
check; False = end before the first trial); per trial: `wait_scene_ready(trial, scene, checklist_text)`
(False = end the campaign here), `attempt_events()` (what it measured at "scene ready", logged with
the attempt), `during_homing(controls)` (a context around going home before the trial, in which
its keys may request an e-stop), `during_rollout(controls)` (a context in which its keys may request
stops; the rollout goes home inside it), `observers()` (e.g. a status line), and
`score(trial, result, prefill)` (a Score, or None to leave the attempt unscored for `spabench score`).
Between trials `show_health(text)` tells it about a motor cool-down the session waits for. After an
e-stop, `estop_cause(ended_rollout, estop)` asks why (suite.rules.ESTOP_CAUSES): (cause, text), or None.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from spabench.bench.bench import Bench
    from spabench.ledger import Ledger
    from spabench.ledger.schema import TrialRow
    from spabench.operator.config import OperatorConfig
    from spabench.operator.render_ahead import RenderAhead
    from spabench.rollout.controls import StopControl
    from spabench.rollout.stopping import ComparisonStop
    from spabench.rollout.types import EpisodeResult
    from spabench.suite.loader import Suite
    from spabench.suite.model import SceneSpec

from spabench.suite.rules import NO_MOTION_CONDITIONS, failure_modes_for

__all__ = ["Operator", "SessionView", "Score", "failure_modes_for", "motion_prefill", "NO_MOTION_CONDITIONS", "person_rater"]

# Rater labels that name no person: the old anonymous default and the machine scorers. A person's
# score always carries the name they gave (asked once per interactive session, or operator.rater=).
MACHINE_RATERS = ("operator", "sim_evaluator", "motion_prefill", "auto")
RATER_CHARS = (2, 64)


def person_rater(name: Any) -> str | None:
    """`name` as stored (whitespace collapsed) when it can name a person, else None."""
    if not isinstance(name, str):
        return None
    name = " ".join(name.split())
    low, high = RATER_CHARS
    if not low <= len(name) <= high or not any(c.isalpha() for c in name) or name.lower() in MACHINE_RATERS:
        return None
    return name


RATER_RULE = (f"your name or initials ({RATER_CHARS[0]}-{RATER_CHARS[1]} characters; not "
              f"{', '.join(MACHINE_RATERS)}, which name no person)")


@dataclass
class Score:
    success: bool
    failure_mode: str | None = None
    note: str = ""
    rater: str = "operator"
    source: str = "operator"     # operator | motion_prefill | sim_evaluator


def motion_prefill(condition: str, moved: bool | None, rater: str) -> Score | None:
    """No-intervention / no-movement trials: success means no arm or gripper motion."""
    if moved is None or condition not in NO_MOTION_CONDITIONS:
        return None
    if moved:
        return Score(False, "unnecessary_intervention", "pre-filled: motion detected", rater, "motion_prefill")
    return Score(True, None, "pre-filled: no motion detected", rater, "motion_prefill")


class SessionView(Protocol):
    """What an operator reads of the run's session (rollout.session.Session is one): the campaign it
    runs, its ledger and suite, the connected bench, the stop controls and what the session said.
    Operators type against this, not the Session class, so the operator package never imports rollout.
    Read-only members: what the session holds may be narrower (a session always has its controls)."""

    @property
    def campaign_dir(self) -> Path: ...
    @property
    def ledger(self) -> Ledger | None: ...
    @property
    def suite(self) -> Suite | None: ...
    @property
    def bench(self) -> Bench | None: ...
    @property
    def controls(self) -> StopControl | None: ...
    @property
    def said(self) -> list[str]: ...
    @property
    def resume_note(self) -> str | None: ...
    @property
    def stopping(self) -> ComparisonStop | None: ...
    @property
    def render_ahead(self) -> RenderAhead | None: ...


class Operator:
    """Base operator: no gate, no keys, no score. Subclasses override what they do.

    `confirms_scene`: a True answer from `wait_scene_ready` means a person set up the scene (only
    then, or when the twin built it, may the attempt's first frame become the reference image)."""

    rater = "operator"
    confirms_scene = True

    def __init__(self, config: OperatorConfig | None = None):
        self.config = config

    def show(self, text: str) -> None:
        pass

    def begin_session(self, session: SessionView) -> bool:
        """Called once after the bench connects (`session`: the run's Session: ledger, bench, suite)."""
        return True

    def wait_scene_ready(self, trial: TrialRow, scene: SceneSpec, checklist_text: str) -> bool:
        return True

    def attempt_events(self) -> list[tuple[str, dict]]:
        """(kind, payload) pairs to log with the attempt that starts after "scene ready"."""
        return []

    @contextmanager
    def during_homing(self, controls: StopControl) -> Iterator[None]:
        yield

    @contextmanager
    def during_rollout(self, controls: StopControl) -> Iterator[None]:
        yield

    def observers(self) -> list[Any]:
        return []

    def show_health(self, text: str, cooling: dict | None = None) -> None:
        """Motor health news for the operator (the session waits for hot motors to cool); the session
        already printed it to the terminal. `cooling` while it waits: hottest motor, temperature_c,
        resume_c, eta_s (None: estimating), waited_s and arm (where the arm is and what to do)."""

    def score(self, trial: TrialRow, result: EpisodeResult | None, prefill: Score | None = None) -> Score | None:
        return None

    def estop_cause(self, ended_rollout: bool, estop: dict) -> tuple[str, str] | None:
        """Why the operator e-stopped: (cause, text) with a cause from
        suite.rules.estop_causes_for(ended_rollout); None: no answer (no person to ask)."""
        return None

    def close(self) -> None:
        pass
