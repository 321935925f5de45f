"""Where a policy's rollouts ran under settings other than the protocol's defaults.

The protocol runs every policy for 60 s at 30 Hz with the policy's actions executed as sent. The
published campaign departed from that per policy (VLA-0: 90 s at 10 Hz for its slower inference;
GR00T F-FT: a ~10 mm lift before the timer; both GR00T policies: an EMA action filter), and a
comparison of rates across policies is read with those differences in mind. The settings come from
the campaign's plan (timer and control rate per planned trial) and the policy cards (EMA,
pre-rollout assist, action horizon); an outcomes CSV carries no plan, so then only a card named like
the policy can say, and a policy without one is reported as unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

PROTOCOL_TIMER_S = 60.0
PROTOCOL_CONTROL_HZ = 30.0
SETTINGS_COLUMNS: tuple[str, ...] = ("policy", "card", "timer_s", "control_hz", "ema_alpha", "pre_rollout_assist",
                                     "horizon", "execute_steps", "source")


def _values(frame: pd.DataFrame | None, policy: str, column: str) -> list:
    if frame is None or column not in frame.columns:
        return []
    return sorted(set(frame.loc[frame["policy"] == policy, column].dropna()))


def _assist_text(assist: Mapping[str, Any] | None) -> str:
    if not assist:
        return ""
    details = ", ".join(f"{k} {v}" for k, v in assist.items() if k != "type")
    return f"{assist.get('type', '?')} ({details})" if details else str(assist.get("type", "?"))


def protocol_settings(policies: list[str], plan: pd.DataFrame | None, cards: Mapping[str, Any]) -> pd.DataFrame:
    """One row per policy (SETTINGS_COLUMNS): timer and control rate from the plan where it has them,
    else from the card; EMA, assist and horizon from the card (`cards`: policy -> PolicyCard)."""
    rows = []
    for policy in policies:
        card = cards.get(policy)
        timers, rates = _values(plan, policy, "timer_s"), _values(plan, policy, "control_hz")
        names = _values(plan, policy, "card")
        source = "plan and card" if timers and card is not None else "plan" if timers else \
            "card" if card is not None else "unknown"
        if not timers and card is not None:
            timers, rates = [card.timer_s], [card.control_hz]
        rows.append((policy, ", ".join(names) or (card.name if card is not None else ""),
                     "/".join(f"{t:g}" for t in timers), "/".join(f"{r:g}" for r in rates),
                     card.ema_alpha if card is not None and card.ema_alpha is not None else math.nan,
                     _assist_text(card.pre_rollout_assist) if card is not None else "",
                     card.horizon if card is not None else math.nan,
                     (card.execute_steps or card.horizon) if card is not None else math.nan, source))
    return pd.DataFrame(rows, columns=list(SETTINGS_COLUMNS))


def differences(row) -> list[str]:
    """What in one policy's settings departs from the protocol's defaults, in words."""
    out = []
    if row.timer_s and row.timer_s != f"{PROTOCOL_TIMER_S:g}":
        out.append(f"{row.timer_s} s timer (protocol {PROTOCOL_TIMER_S:g} s)")
    if row.control_hz and row.control_hz != f"{PROTOCOL_CONTROL_HZ:g}":
        out.append(f"control at {row.control_hz} Hz (protocol {PROTOCOL_CONTROL_HZ:g} Hz)")
    if not math.isnan(row.ema_alpha):
        out.append(f"EMA action filter, alpha {row.ema_alpha:g}, on the non-gripper joints")
    if row.pre_rollout_assist:
        out.append(f"pre-rollout assist before the timer: {row.pre_rollout_assist}")
    return out
