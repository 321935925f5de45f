"""The protocol's failure modes as the operator sees them: the published label (suite.vocabulary) and
a one-line definition each, shared by the terminal prompt and the browser's score form."""

from __future__ import annotations

from spabench.suite.rules import failure_mode_applies
from spabench.suite.vocabulary import FAILURE_MODE_LABELS, FAILURE_MODES

FAILURE_MODE_DEFINITIONS: dict[str, str] = {
    "wrong_target": "The arm went for, grasped or moved an object other than the one the instruction names.",
    "wrong_instance": "It picked another object of the target's own category (e.g. the other cup), not the named one.",
    "no_action": "The arm never made a purposeful move toward any object before the timer ran out.",
    "correct_target_incorrect_spatial_outcome":
        "The right object was moved, but it ended up in the wrong place or relation (side, bowl, order).",
    "grasp_failure": "It reached the right object but could not close on it or lift it.",
    "premature_release_or_drop": "It held the right object, then let go or dropped it before reaching the goal.",
    "release_retention_failure": "It reached the goal but did not release the object, or knocked it out after releasing.",
    "control_drift_or_instability": "Oscillation, jerky or drifting motion, or collisions that derailed the attempt.",
    "timeout_or_incomplete": "A sensible start, still unfinished when the timer stopped the rollout.",
    "unnecessary_intervention": "Nothing needed doing (no valid target / goal already met), yet the arm moved.",
    "other_execution_failure": "A failure none of the modes above describes (say what happened in the note).",
}

assert set(FAILURE_MODES) <= set(FAILURE_MODE_DEFINITIONS) and set(FAILURE_MODES) <= set(FAILURE_MODE_LABELS), \
    "failure-mode definitions out of step with suite.vocabulary.FAILURE_MODES"


# One number per failure mode for the whole suite, in vocabulary order: "9" means the same mode for
# every task in the terminal and the browser alike (measured before: the list was renumbered per task,
# so "9" was Timeout for object_state and Other for relative_size).
FAILURE_MODE_NUMBERS: dict[str, int] = {m: i for i, m in enumerate(FAILURE_MODES, 1)}


def failure_mode_choices(task: str, condition: str) -> list[dict]:
    """Every failure mode with its suite-wide number, label, definition and whether it applies to a
    trial of `task` under `condition` (`why_not` says why not); the pages grey out the others."""
    out = []
    for m in FAILURE_MODES:
        why_not = failure_mode_applies(m, task, condition)
        out.append({"name": m, "number": FAILURE_MODE_NUMBERS[m], "label": FAILURE_MODE_LABELS[m],
                    "definition": FAILURE_MODE_DEFINITIONS[m], "applicable": why_not is None,
                    "why_not": why_not or ""})
    return out
