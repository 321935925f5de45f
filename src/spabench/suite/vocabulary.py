"""The protocol's fixed words: task names, conditions, failure modes, joints, cameras.

Every other module spells these names through this file so that a typo is an import error,
not a silently empty table.
"""

from __future__ import annotations

TASKS: tuple[str, ...] = (
    "object_state",
    "relative_size",
    "relational_placement",
    "referential_description",
    "ordinal_position",
    "counting",
)

# Conditions a *trial* can have (the planner's vocabulary, also the outcomes CSV's).
CONDITIONS: tuple[str, ...] = (
    "id",                  # ID spatial: observed cells
    "ood",                 # OOD spatial: withheld cells
    "direct",              # direct-manipulation control on a matched OOD scene
    "paraphrase_ood",      # paraphrase of the OOD spatial instruction (matched scene)
    "paraphrase_direct",   # paraphrase of the direct instruction (matched scene)
    "cross_task",          # ID spatial grounding with familiar objects from other tasks
    "novel_object",        # Object State's novel black-cup pilot (replaces cross_task)
    "no_intervention",     # success = no arm or gripper motion
    "no_movement",         # Relational Placement: relation already holds
    "movement_required",   # Relational Placement: matched control that needs movement
)

# Conditions a *scene* can have. direct / paraphrase_* trials reuse "ood" scenes.
SCENE_CONDITIONS: tuple[str, ...] = (
    "id",
    "ood",
    "cross_task",
    "novel_object",
    "no_intervention",
    "no_movement",
    "movement_required",
    "direct",              # Object State: the matched OOD scene with the non-target twin removed
)

# Trials per policy, per task and condition (protocol: 900 per fully evaluated policy).
CONDITION_COUNTS: dict[str, dict[str, int]] = {
    task: {
        "id": 20,
        "ood": 50,
        "direct": 20,
        "paraphrase_ood": 10,
        "paraphrase_direct": 10,
        **({"novel_object": 20} if task == "object_state" else {"cross_task": 20}),
        **(
            {}
            if task == "relative_size"
            else {"no_movement": 20, "movement_required": 20}
            if task == "relational_placement"
            else {"no_intervention": 20}
        ),
    }
    for task in TASKS
}

INSTRUCTION_VARIANTS: tuple[str, ...] = ("original", "paraphrase")

FAILURE_MODES: tuple[str, ...] = (
    "wrong_target",
    "wrong_instance",            # same-category wrong target (Object State, Referential Description)
    "no_action",
    "correct_target_incorrect_spatial_outcome",
    "grasp_failure",
    "premature_release_or_drop",
    "release_retention_failure",
    "control_drift_or_instability",
    "timeout_or_incomplete",
    "unnecessary_intervention",  # no-intervention conditions only
    "other_execution_failure",   # the authors' earlier files: a failure none of the above describes
)

JOINTS: tuple[str, ...] = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_roll",
    "gripper",
)
GRIPPER = "gripper"

CAMERAS: tuple[str, ...] = ("wrist", "middle", "left", "right", "overhead")
POLICY_CAMERAS: tuple[str, ...] = ("middle", "wrist")

DIRECTIONS: tuple[str, ...] = ("left", "right", "front", "behind")

# Relational Placement success: within 3 inches of the reference, inside a +-45 degree sector.
RELATION_RADIUS_CM = 7.62
RELATION_HALF_ANGLE_DEG = 45.0

# Motion onset (the authors' trimming rule, spabench.suite.motion): baseline = per-joint median of
# the first five frames; a frame moves when its largest |joint - baseline| is at least 2.0; onset =
# the first frame of the first run of five moving frames. Defaults of conf/suite `motion_onset`.
MOTION_ONSET_BASELINE_FRAMES = 5
MOTION_ONSET_RUN_FRAMES = 5
MOTION_ONSET_FRAMES = MOTION_ONSET_RUN_FRAMES  # the older name
MOTION_ONSET_THRESHOLD = 2.0

DEFAULT_TIMER_S = 60.0
VLA0_TIMER_S = 90.0


# -- the protocol's published labels, and the authors' own words -------------------------------------
#
# `*_LABELS` map spabench's names to the labels the paper prints (report.md, figures, failure_modes.csv).
# `AUTHOR_*` list the words of the authors' released sheets, read by the outcomes CSV reader beside
# spabench's own names. Lookups go through `label_key`, so case, spacing and punctuation never matter:
# "GR00T Frozen LLM", "groot frozen-llm" and "GR00T_FROZEN_LLM" are the same word.

TASK_LABELS: dict[str, str] = {
    "object_state": "Object State",
    "relative_size": "Relative Size",
    "relational_placement": "Relational Placement",
    "referential_description": "Referential Description",
    "ordinal_position": "Ordinal Position",
    "counting": "Counting",
}

CONDITION_LABELS: dict[str, str] = {
    "id": "ID spatial",
    "ood": "OOD spatial",
    "direct": "Direct-manipulation control",
    "paraphrase_ood": "Paraphrase (OOD spatial)",
    "paraphrase_direct": "Paraphrase (direct)",
    "cross_task": "Cross-task objects",
    "novel_object": "Novel-object pilot",
    "no_intervention": "No-intervention",
    "no_movement": "No movement",
    "movement_required": "Movement required",
}

FAILURE_MODE_LABELS: dict[str, str] = {
    "wrong_target": "Wrong target",
    "wrong_instance": "Wrong target (wrong instance)",
    "no_action": "No action",
    "correct_target_incorrect_spatial_outcome": "Correct target, incorrect spatial outcome",
    "grasp_failure": "Grasp failure",
    "premature_release_or_drop": "Premature release or dropped object",
    "release_retention_failure": "Release/retention failure",
    "control_drift_or_instability": "Control drift or instability",
    "timeout_or_incomplete": "Timeout or incomplete execution",
    "unnecessary_intervention": "Unnecessary intervention",
    "other_execution_failure": "Other execution failure",
}

# Policy card names -> the names the paper prints.
POLICY_LABELS: dict[str, str] = {
    "molmoact2": "MolmoAct2",
    "pi05": "Pi0.5",
    "groot_fllm": "GR00T Frozen LLM",
    "groot_fft": "GR00T Full Fine-Tune",
    "vla0": "VLA-0",
}

AUTHOR_TASK_NAMES: dict[str, str] = {
    "State Recognition": "object_state", "Physical State": "object_state", "Physical States": "object_state",
    "Size Recognition": "relative_size", "Relative Sizes": "relative_size",
    "Referential Disambiguation": "referential_description",
    "Referential Descriptions": "referential_description",
    "Ordinal Reference Ordering": "ordinal_position",
}

AUTHOR_FAILURE_MODES: dict[str, str] = {
    "Incorrect spatial outcome": "correct_target_incorrect_spatial_outcome",
    "Wrong instance": "wrong_instance",
    "Wrong-instance": "wrong_instance",
}

# Condition strings that name one spabench condition whatever the task.
AUTHOR_CONDITIONS: dict[str, str] = {
    "In-distribution concept baseline": "id",
    "Concept/compositional transfer": "ood",
    "Matched manipulation control": "direct",
    "Direct Matched Controls": "direct",
    "Novel-object state reasoning": "novel_object",
    "Violated-relation correction control": "movement_required",
    "No valid target / no movement": "no_intervention",
    "Invalid ordinal / no-movement diagnostic": "no_intervention",
    "No valid candidate category / no movement": "no_intervention",
}
# "Goal already satisfied / no movement" is Relational Placement's no_movement and Counting's
# no_intervention; the reader decides by the row's task.
AUTHOR_GOAL_SATISFIED = "Goal already satisfied / no movement"
# "Language robustness" is the paraphrase of the OOD or the direct prompt: the row says which
# (a `paraphrase_of` column, or the words "OOD"/"direct"/"spatial"/"control" inside the string).
AUTHOR_PARAPHRASE = "Language robustness"
# Every cross-task condition string of the authors starts with this ("Cross-task ordinal transfer -
# red block target", "Cross-task airplane counterfactual", ...).
AUTHOR_CROSS_TASK_PREFIX = "Cross-task"

AUTHOR_POLICY_NAMES: dict[str, str] = {label: name for name, label in POLICY_LABELS.items()} | {
    "GR00T F-LLM": "groot_fllm", "GR00T-N1.7 F-LLM": "groot_fllm", "GR00T N1.7 Frozen LLM": "groot_fllm",
    "GR00T F-FT": "groot_fft", "GR00T-N1.7 F-FT": "groot_fft", "GR00T N1.7 Full Fine-Tune": "groot_fft",
    "pi0.5": "pi05", "openpi pi0.5": "pi05",
}


def label_key(text: str) -> str:
    """The case-, spacing- and punctuation-blind form of a label: 'Pi0.5' and 'pi 0 5' -> 'pi05'."""
    return "".join(ch for ch in str(text).casefold() if ch.isalnum())


def _keyed(names, *alias_tables: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, str]:
    table = {label_key(n): n for n in names}
    if labels:
        table.update({label_key(label): name for name, label in labels.items()})
    for aliases in alias_tables:
        table.update({label_key(alias): name for alias, name in aliases.items()})
    return table


_TASK_KEYS = _keyed(TASKS, AUTHOR_TASK_NAMES, labels=TASK_LABELS)
_FAILURE_KEYS = _keyed(FAILURE_MODES, AUTHOR_FAILURE_MODES, labels=FAILURE_MODE_LABELS)
_POLICY_KEYS = _keyed(POLICY_LABELS, AUTHOR_POLICY_NAMES, labels=POLICY_LABELS)
_CONDITION_KEYS = _keyed(CONDITIONS, AUTHOR_CONDITIONS, labels=CONDITION_LABELS)


def task_name(text: str) -> str | None:
    """spabench's task name for a spabench name, a published label or an authors' sheet name."""
    return _TASK_KEYS.get(label_key(text))


def failure_mode_name(text: str) -> str | None:
    """spabench's failure-mode name for its own name, the published label or an authors' word."""
    return _FAILURE_KEYS.get(label_key(text))


def policy_name(text: str) -> str:
    """The card name for a published / authors' policy name; any other text is kept as given."""
    return _POLICY_KEYS.get(label_key(text), text)


def condition_name(text: str, task: str | None = None, paraphrase_of: str | None = None) -> str | None:
    """spabench's condition for a spabench name, a published label or an authors' condition string.

    `task` decides "Goal already satisfied / no movement"; `paraphrase_of` ("ood"/"direct", in any
    accepted spelling) decides "Language robustness". None when the text names no condition or the
    row does not say enough to decide.
    """
    key = label_key(text)
    if key in _CONDITION_KEYS:
        return _CONDITION_KEYS[key]
    if key == label_key(AUTHOR_GOAL_SATISFIED):
        return "no_movement" if task == "relational_placement" else "no_intervention" if task else None
    if key.startswith(label_key(AUTHOR_CROSS_TASK_PREFIX)):
        return "cross_task"
    if key.startswith(label_key(AUTHOR_PARAPHRASE)):
        rest = key[len(label_key(AUTHOR_PARAPHRASE)):]
        which = condition_name(paraphrase_of) if paraphrase_of else None
        if which is None:
            which = "direct" if any(w in rest for w in ("direct", "control", "manipulation")) else \
                "ood" if any(w in rest for w in ("ood", "spatial", "transfer", "concept")) else None
        return {"ood": "paraphrase_ood", "direct": "paraphrase_direct",
                "paraphrase_ood": "paraphrase_ood", "paraphrase_direct": "paraphrase_direct"}.get(which or "")
    return None


def allowed_labels(kind: str) -> tuple[str, ...]:
    """What an outcomes file may write for `kind` (task, condition, failure_mode, policy): for errors."""
    if kind == "task":
        return TASKS + tuple(TASK_LABELS.values()) + tuple(AUTHOR_TASK_NAMES)
    if kind == "failure_mode":
        return FAILURE_MODES + tuple(FAILURE_MODE_LABELS.values()) + tuple(AUTHOR_FAILURE_MODES)
    if kind == "condition":
        return (CONDITIONS + tuple(CONDITION_LABELS.values()) + tuple(AUTHOR_CONDITIONS)
                + (AUTHOR_GOAL_SATISFIED, f"{AUTHOR_PARAPHRASE} (with paraphrase_of ood|direct)",
                   f"{AUTHOR_CROSS_TASK_PREFIX} ..."))
    if kind == "policy":
        return tuple(POLICY_LABELS) + tuple(POLICY_LABELS.values())
    raise KeyError(kind)
