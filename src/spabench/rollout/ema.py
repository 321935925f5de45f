"""The protocol's EMA action filter (used for both GR00T-N1.7 policies), applied by the control loop
between the policy's chunk and the robot (the card only says alpha: `ema_alpha`).

    a~[t, j] = alpha * a[t, j] + (1 - alpha) * a~[t-1, j]   for every non-gripper joint j
    a~[t, gripper] = a[t, gripper]                          (never filtered)

The state starts at the robot's measured joints at rollout start (`reset(measured)`), runs on
across action-chunk boundaries (the filter sees a stream of actions, not chunks) and is reset
between rollouts. The filtered action is what is executed and recorded. `alpha=None` is the
identity, so the rollout can always call the filter.
"""

from __future__ import annotations

import numpy as np

from spabench.errors import ConfigError
from spabench.suite.vocabulary import GRIPPER, JOINTS

__all__ = ["EmaFilter"]


class EmaFilter:
    def __init__(self, alpha: float | None, gripper_index: int = JOINTS.index(GRIPPER)) -> None:
        if alpha is not None and not (isinstance(alpha, (int, float)) and 0.0 < float(alpha) <= 1.0):
            raise ConfigError(f"EMA filter: alpha is {alpha!r} (allowed: null or 0 < alpha <= 1)")
        self.alpha = None if alpha is None else float(alpha)
        self.gripper_index = gripper_index
        self._state: np.ndarray | None = None

    @property
    def enabled(self) -> bool:
        return self.alpha is not None

    @property
    def state(self) -> np.ndarray | None:
        """The last filtered action (a copy), or the measured joints right after `reset`."""
        return None if self._state is None else self._state.copy()

    def reset(self, measured_state: np.ndarray) -> None:
        """Start a rollout: the filter state is the robot's measured joint positions."""
        measured = np.asarray(measured_state, dtype=np.float64)
        if measured.ndim != 1 or not np.all(np.isfinite(measured)):
            raise ValueError(f"EMA filter: measured state must be a finite vector, got {measured!r}")
        self._state = measured.copy()

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        action = np.asarray(raw, dtype=np.float64)
        if self.alpha is None:
            return action.copy()
        if self._state is None:
            raise RuntimeError("EMA filter used before reset(measured_state) at rollout start")
        if action.shape != self._state.shape:
            raise ValueError(f"EMA filter: action shape {action.shape} differs from the state shape "
                             f"{self._state.shape}")
        filtered = self.alpha * action + (1.0 - self.alpha) * self._state
        filtered[self.gripper_index] = action[self.gripper_index]
        self._state = filtered
        return filtered.copy()
