"""Robots and cameras through LeRobot, the safety envelope, connect/disconnect discipline.

Light at import (no LeRobot, no torch): config, safety and errors load eagerly; Bench, make_bench,
Observation and ActResult load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spabench.bench.config import BenchConfig, CameraSpec
from spabench.bench.errors import BenchFault, MotionStopped, NonFiniteTarget, SafetyError
from spabench.bench.safety import CLAMP_REASONS, Clamp, SafetyEnvelope

if TYPE_CHECKING:
    from spabench.bench.bench import ActResult, Bench, Observation, make_bench

__all__ = [
    "CLAMP_REASONS",
    "ActResult",
    "Bench",
    "BenchConfig",
    "BenchFault",
    "CameraSpec",
    "Clamp",
    "MotionStopped",
    "NonFiniteTarget",
    "Observation",
    "SafetyEnvelope",
    "SafetyError",
    "make_bench",
]

_LAZY = {"ActResult", "Bench", "Observation", "make_bench"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from spabench.bench import bench

        return getattr(bench, name)
    raise AttributeError(f"module 'spabench.bench' has no attribute {name!r}")
