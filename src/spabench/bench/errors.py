"""Bench faults: the hardware stopped doing its job. An attempt ended by one is invalid, not failed."""

from __future__ import annotations

from spabench.errors import SafetyError, SpabenchError

__all__ = ["BenchFault", "SafetyError", "NonFiniteTarget", "MotionStopped"]


class BenchFault(SpabenchError):
    """The servo bus or a camera failed (silent bus, missing motor, lost camera).

    component: "bus" or "camera:<name>"; the message says what happened and what to check.
    """

    def __init__(self, message: str, *, component: str = "bus"):
        super().__init__(message)
        self.component = component


class NonFiniteTarget(SafetyError):
    """A commanded target held NaN or inf; the bench held its measured position instead."""

    def __init__(self, message: str, *, joints: list[str]):
        super().__init__(message)
        self.joints = joints


class MotionStopped(SpabenchError):
    """A blocking motion (going home) stopped because its caller said so (an e-stop); the arm holds
    where it is. Not a fault: the bench works. `steps`: the steps sent before the stop."""

    def __init__(self, message: str, *, steps: list | None = None):
        super().__init__(message)
        self.steps = list(steps or [])
