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
    "server_changed",  # the policy server answered with another identity (checkpoint) after the attempt
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

# Why the operator e-stopped: asked at every e-stop, stored with the e-stopped attempt (the ledger's
# 'estop' event has it; an invalid attempt's invalid_reason reads "estop: <cause>[: <text>]").
# Unsafe policy behaviour ends the attempt as the policy's failure (failure mode UNSAFE: scored, not
# re-run, reported apart from the annotated failure modes); the other causes leave it invalid (re-run).
UNSAFE = "unsafe"
ESTOP_CAUSES: tuple[str, ...] = (UNSAFE, "operator", "other")
ESTOP_CAUSE_LABELS: dict[str, str] = {
    UNSAFE: "unsafe policy behaviour",
    "operator": "operator (a mistake, the scene disturbed)",
    "other": "other (say what)",
}
# What each cause does to the attempt the e-stop ended (said to the operator before the answer).
ESTOP_CAUSE_EFFECTS: dict[str, str] = {
    UNSAFE: "the policy's failure, not run again",
    "operator": "invalid, run again",
    "other": "invalid, run again",
}
ESTOP_CAUSE_NOT_RECORDED = "not_recorded"   # an e-stop from before the cause was asked, or left unanswered


def estop_causes_for(ended_rollout: bool) -> tuple[str, ...]:
    """The causes an operator may give: unsafe policy behaviour only when the e-stop ended a rollout
    (elsewhere no policy was moving the arm)."""
    return ESTOP_CAUSES if ended_rollout else tuple(c for c in ESTOP_CAUSES if c != UNSAFE)


def estop_cause_problem(cause: str, text: str, ended_rollout: bool) -> str | None:
    """None when (cause, text) is a complete answer; else what is wrong with it."""
    allowed = estop_causes_for(ended_rollout)
    if cause not in allowed:
        return f"e-stop cause {cause!r} (allowed here: {', '.join(allowed)})"
    if cause == "other" and not text.strip():
        return "e-stop cause 'other' needs a few words saying what happened"
    return None


def estop_is_failure(cause: str | None) -> bool:
    """The rule: an e-stop for unsafe policy behaviour is the policy's failure; any other is invalid."""
    return cause == UNSAFE


def estop_invalid_reason(cause: str | None, text: str = "") -> str:
    """The invalid_reason of an attempt e-stopped for a cause that is not the policy's failure."""
    if cause is None:
        return "estop"
    return f"estop: {cause}" + (f": {' '.join(text.split())}" if text.strip() else "")


def estop_cause_of(invalid_reason: str | None) -> str:
    """The cause in an invalid_reason written by `estop_invalid_reason` ('estop' alone: not recorded)."""
    parts = [p.strip() for p in str(invalid_reason or "").split(":")]
    if parts[0] != "estop":
        raise ValueError(f"not an e-stop's invalid_reason: {invalid_reason!r}")
    return parts[1] if len(parts) > 1 and parts[1] in ESTOP_CAUSES else ESTOP_CAUSE_NOT_RECORDED


def unsafe_applies(stop_reason: str | None) -> str | None:
    """None when failure mode UNSAFE may score an attempt that stopped for `stop_reason`; else why not."""
    if stop_reason != "estop":
        return (f"failure_mode {UNSAFE!r} is for an attempt e-stopped for unsafe policy behaviour only "
                f"(this one stopped by {stop_reason})")
    return None
