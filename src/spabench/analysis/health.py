"""Campaign health for the report: what the motors went through, per policy.

Read from the ledger alone (no episode is opened): each attempt's `health_summary` event (maximum
temperature and current per motor, stall events), its `rollout_summary` clamp counts by reason
(joint_limit, max_relative_target, robot_clip, workspace), its invalid reason, and the session's
`cool_down` events. A policy that stalls the gripper or drives into the table often is a finding in
itself, beside its success rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spabench.bench.safety import CLAMP_REASONS
from spabench.escaping import markdown_text
from spabench.suite.rules import HEALTH_INVALID_REASONS

PERIODS = 10   # "over the campaign": the attempts in run order, in this many equal parts

HEALTH_COLUMNS = ("policy", "attempts", "with_telemetry", "max_temperature_c", "hottest_motor",
                  "median_attempt_max_c", "stall_events", "clamps_total",
                  *(f"clamps_{r}" for r in CLAMP_REASONS), *(f"invalid_{r}" for r in HEALTH_INVALID_REASONS))


@dataclass
class CampaignHealth:
    """Per-policy health table (`table`, HEALTH_COLUMNS) and the campaign-wide course of temperatures."""

    table: pd.DataFrame
    hottest_by_period: list[float] = field(default_factory=list)   # max over each tenth of the attempts
    cool_downs: int = 0
    cool_down_s: float = 0.0

    def markdown(self, name: Callable[[str], str] = str) -> list[str]:
        """The report's section (empty when the campaign has no attempts)."""
        t = self.table
        if t.empty:
            return []
        lines = ["## Campaign health (motors, clamps)", "",
                 "Per policy over all its attempts (valid and invalid): the hottest motor reading, the median "
                 "of each attempt's hottest reading, stall-guard trips, safety clamps by kind, and attempts "
                 "invalid for health reasons. Clamps are counted per tick and joint.", ""]
        header = ["policy", "attempts", "max temp (motor)", "median attempt max", "stalls",
                  *[f"clamps {r}" for r in CLAMP_REASONS], *[f"invalid {r}" for r in HEALTH_INVALID_REASONS]]
        rows = []
        for r in t.itertuples(index=False):
            hot = "—" if not np.isfinite(r.max_temperature_c) else f"{r.max_temperature_c:.0f} C ({r.hottest_motor})"
            med = "—" if not np.isfinite(r.median_attempt_max_c) else f"{r.median_attempt_max_c:.0f} C"
            rows.append([markdown_text(name(r.policy)), str(r.attempts), hot, med, str(r.stall_events),
                         *[str(getattr(r, f"clamps_{c}")) for c in CLAMP_REASONS],
                         *[str(getattr(r, f"invalid_{c}")) for c in HEALTH_INVALID_REASONS]])
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
        if self.hottest_by_period:
            course = ", ".join("—" if not np.isfinite(v) else f"{v:.0f}" for v in self.hottest_by_period)
            lines += [f"Hottest motor reading over the campaign, per tenth of the attempts in run order (C): "
                      f"{course}.", ""]
        if self.cool_downs:
            lines += [f"The session paused {self.cool_downs} time(s) for hot motors to cool, "
                      f"{self.cool_down_s:.0f} s in all.", ""]
        return lines


def campaign_health(campaign_dir: str | Path, url: str | None = None) -> CampaignHealth:
    """Read the campaign's ledger (read-only) and build the health table."""
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        policy_of, attempts, rollouts = finished_attempts(ledger)
        summaries = {e["attempt_id"]: e["payload"] for e in ledger.events(kind="health_summary")}
        cools = [e["payload"] for e in ledger.events(kind="cool_down")]
    return health_from_rows(attempts, policy_of, summaries, rollouts, cools)


def finished_attempts(ledger: Any) -> tuple[dict[str, str], list[Any], dict[str, dict]]:
    """What the report's per-attempt tables read: each trial's policy, the attempts that ran to an end
    (complete or invalid, dry runs left out) in run order, and their rollout summaries by attempt id."""
    policy_of = {t.trial_id: t.policy for t in ledger.trials()}
    attempts = [a for a in ledger.attempts() if a.status in ("complete", "invalid") and not a.dry_run]
    rollouts = {e["attempt_id"]: e["payload"] for e in ledger.events(kind="rollout_summary")}
    return policy_of, attempts, rollouts


def health_from_rows(attempts, policy_of: dict[str, str], summaries: dict[str, dict],
                     rollouts: dict[str, dict], cools: list[dict]) -> CampaignHealth:
    """The table from ledger rows (attempts in run order; events by attempt id)."""
    per: dict[str, dict] = {}
    hottest_seq: list[float] = []
    for a in sorted(attempts, key=lambda a: (a.started_at or "", a.attempt_id)):
        p = per.setdefault(policy_of.get(a.trial_id, "?"), {
            "attempts": 0, "with_telemetry": 0, "max": -np.inf, "motor": "", "attempt_max": [],
            "stall_events": 0, "clamps": {r: 0 for r in CLAMP_REASONS},
            "invalid": {r: 0 for r in HEALTH_INVALID_REASONS}})
        p["attempts"] += 1
        if a.invalid_reason in p["invalid"]:
            p["invalid"][a.invalid_reason] += 1
        for reason, n in ((rollouts.get(a.attempt_id) or {}).get("clamps") or {}).items():
            if reason in p["clamps"]:
                p["clamps"][reason] += int(n)
        health = summaries.get(a.attempt_id)
        temps = (health or {}).get("max_temperature_c") or {}
        if not temps:
            hottest_seq.append(float("nan"))
            continue
        p["with_telemetry"] += 1
        motor, top = max(temps.items(), key=lambda kv: kv[1])
        p["attempt_max"].append(float(top))
        hottest_seq.append(float(top))
        if top > p["max"]:
            p["max"], p["motor"] = float(top), motor
        p["stall_events"] += len((health or {}).get("stall_events") or [])
    rows = []
    for policy, p in per.items():
        rows.append({"policy": policy, "attempts": p["attempts"], "with_telemetry": p["with_telemetry"],
                     "max_temperature_c": p["max"] if np.isfinite(p["max"]) else float("nan"),
                     "hottest_motor": p["motor"],
                     "median_attempt_max_c": float(np.median(p["attempt_max"])) if p["attempt_max"] else float("nan"),
                     "stall_events": p["stall_events"], "clamps_total": sum(p["clamps"].values()),
                     **{f"clamps_{r}": n for r, n in p["clamps"].items()},
                     **{f"invalid_{r}": n for r, n in p["invalid"].items()}})
    table = pd.DataFrame(rows, columns=list(HEALTH_COLUMNS))
    periods = []
    if any(np.isfinite(hottest_seq)):
        for part in np.array_split(np.asarray(hottest_seq, dtype=float), min(PERIODS, len(hottest_seq))):
            finite = part[np.isfinite(part)]
            periods.append(float(finite.max()) if len(finite) else float("nan"))
    return CampaignHealth(table, periods, len(cools), float(sum(c.get("waited_s", 0.0) for c in cools)))
