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

# Motion onset: first of five consecutive frames whose max joint displacement from the
# initial five-frame baseline exceeds 2.0 motor-position units.
MOTION_ONSET_FRAMES = 5
MOTION_ONSET_THRESHOLD = 2.0

DEFAULT_TIMER_S = 60.0
VLA0_TIMER_S = 90.0
