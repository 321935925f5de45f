"""The protocol's failure modes as the operator sees them: the authors' label and a one-line
definition each, shared by the terminal prompt and the browser's score form."""

from __future__ import annotations

from spabench.suite.vocabulary import FAILURE_MODES

# Labels exactly as the Spa-Bench authors' sheets spell them (wrong_instance is the harness's split
# of "Wrong target" for same-category errors in Object State and Referential Description).
FAILURE_MODE_LABELS: dict[str, str] = {
    "wrong_target": "Wrong target",
    "wrong_instance": "Wrong instance (same category)",
    "no_action": "No action",
    "correct_target_incorrect_spatial_outcome": "Correct target, incorrect spatial outcome",
    "grasp_failure": "Grasp failure",
    "premature_release_or_drop": "Premature release or dropped object",
    "release_retention_failure": "Release/retention failure",
    "control_drift_or_instability": "Control drift or instability",
    "timeout_or_incomplete": "Timeout or incomplete execution",
    "unnecessary_intervention": "Unnecessary intervention",
}

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
}

assert set(FAILURE_MODE_LABELS) == set(FAILURE_MODES) == set(FAILURE_MODE_DEFINITIONS), \
    "failure-mode labels/definitions out of step with suite.vocabulary.FAILURE_MODES"


def failure_mode_choices(modes: list[str]) -> list[dict[str, str]]:
    """[{name, label, definition}] for the applicable modes, in vocabulary order."""
    return [{"name": m, "label": FAILURE_MODE_LABELS[m], "definition": FAILURE_MODE_DEFINITIONS[m]} for m in modes]
