"""What the pages may show about a trial, attempt or score: blind by construction (the alias, never
the policy or its card), plus the redaction guard every JSON answer passes through."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from spabench.operator.failure_modes import failure_mode_choices

TRIAL_FIELDS = ("trial_id", "evaluation_id", "alias", "task", "condition", "scene_id", "instruction",
                "instruction_variant", "cell", "order", "timer_s", "matched_group")
REDACTED = "[policy]"


def public_trial(trial: Any) -> dict[str, Any]:
    data = dataclasses.asdict(trial) if dataclasses.is_dataclass(trial) and not isinstance(trial, type) else dict(trial)
    out = {k: data.get(k) for k in TRIAL_FIELDS if k in data}
    out["failure_modes"] = failure_mode_choices(out.get("task") or "", out.get("condition") or "")
    return out


def policy_names(trials: Iterable[Any]) -> set[str]:
    """Every policy and card name of a campaign (the words the pages must never show)."""
    names = set()
    for t in trials:
        for key in ("policy", "card"):
            value = getattr(t, key, None) if not isinstance(t, dict) else t.get(key)
            if value and len(str(value)) >= 3:
                names.add(str(value))
    return names


class Redactor:
    """Replaces any policy or card name inside strings (keys included) with REDACTED."""

    def __init__(self, names: Iterable[str]):
        names = sorted({n for n in names if n}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(n) for n in names), re.IGNORECASE) if names else None

    def __call__(self, value: Any) -> Any:
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self._pattern.sub(REDACTED, value)
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value
