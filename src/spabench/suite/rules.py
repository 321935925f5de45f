"""Protocol rules that several packages apply, written once: which failure modes a trial can have,
and the vocabulary of stop and invalid reasons an attempt is recorded with.

(Motion onset lives in spabench.suite.motion, the relational success bound in spabench.suite.success.)
"""

from __future__ import annotations

from spabench.suite.vocabulary import FAILURE_MODES

# Conditions whose success means "no arm or gripper motion".
NO_MOTION_CONDITIONS: tuple[str, ...] = ("no_intervention", "no_movement")

# Failure modes the protocol restricts (vocabulary.FAILURE_MODES): to some conditions, to some tasks.
FAILURE_MODE_CONDITIONS: dict[str, tuple[str, ...]] = {"unnecessary_intervention": NO_MOTION_CONDITIONS}
FAILURE_MODE_TASKS: dict[str, tuple[str, ...]] = {"wrong_instance": ("object_state", "referential_description")}


def failure_mode_applies(failure_mode: str, task: str, condition: str) -> str | None:
    """None when `failure_mode` can annotate a failed trial of `task` under `condition`; else why not."""
    if failure_mode in FAILURE_MODE_CONDITIONS and condition not in FAILURE_MODE_CONDITIONS[failure_mode]:
        return (f"failure_mode {failure_mode!r} is for conditions "
                f"{', '.join(FAILURE_MODE_CONDITIONS[failure_mode])} only (trial is {condition})")
    if failure_mode in FAILURE_MODE_TASKS and task not in FAILURE_MODE_TASKS[failure_mode]:
        return (f"failure_mode {failure_mode!r} is for tasks "
                f"{', '.join(FAILURE_MODE_TASKS[failure_mode])} only (trial is {task})")
    return None


def failure_modes_for(task: str, condition: str) -> list[str]:
    """The protocol's failure modes that apply to a trial (vocabulary order)."""
    return [m for m in FAILURE_MODES if failure_mode_applies(m, task, condition) is None]


# How an attempt ended. The rollout ends with one of the first six ("console_lost": the browser
# console's dead-man, no heartbeat from the bench page); "interrupted" is what the ledger records for
# an attempt a crash or kill left running.
STOP_REASONS: tuple[str, ...] = ("timer", "operator_stop", "abort", "estop", "console_lost", "fault",
                                 "interrupted")
VALID_STOPS: frozenset[str] = frozenset({"timer", "operator_stop"})

# Why an attempt is invalid (it is re-run; it is never a policy failure).
INVALID_REASONS: tuple[str, ...] = (
    "operator_abort",
    "estop",
    "console_lost",   # the bench page stopped sending heartbeats during homing or the rollout (the arm holds)
    "server_lost",
    "protocol_error",
    "bus_error",
    "camera_lost",
    "safety_error",
    "interrupted",
    "harness_error",
    "storage_error",
    "stall",          # a motor pressed against something (current and position error persisted)
    "overheat",       # a motor passed the hard temperature limit during the rollout
    "undervoltage",   # the servo supply sagged below the operating range (the session stops)
    "servo_error",    # a servo reported an error bit in Status
)
# The invalid reasons of the motor-health guards (spabench.bench.health): the arm holds, it does not go
# home by itself, and the campaign report counts them per policy.
HEALTH_INVALID_REASONS: tuple[str, ...] = ("stall", "overheat", "undervoltage", "servo_error")
