"""The report's camera section: frames dropped and gaps per camera and policy over the campaign.

Read from the ledger alone (no episode is opened): each attempt's `rollout_summary` event carries
the recorder's per-camera frame accounting (`record.frametimes`): distinct frames paired with a
control tick, repeated (stale) ticks, camera frames skipped (never reached a tick), gaps longer than
two frame periods, the longest gap, and frames the video encoder dropped. A camera that drops
frames for one policy only (a heavier server on the same machine) shows here beside its rates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from spabench.escaping import markdown_text

PERIODS = 10   # "over the campaign": the attempts in run order, in this many equal parts
CAMERA_COLUMNS = ("camera", "policy", "attempts", "frames", "repeated", "skipped", "encoder_dropped", "gaps",
                  "longest_gap_s", "attempts_with_gaps")


@dataclass
class CameraHealth:
    """Per camera x policy table (CAMERA_COLUMNS) and the frames lost per tenth of the campaign."""

    table: pd.DataFrame
    lost_by_period: list[int] = field(default_factory=list)   # skipped + encoder-dropped, all cameras

    def markdown(self, name: Callable[[str], str] = str) -> list[str]:
        """The report's section (empty when no attempt recorded frame accounting)."""
        if self.table.empty:
            return []
        lines = ["## Cameras (frames dropped, gaps)", "",
                 "Per camera and policy over all its recorded attempts (valid and invalid): distinct frames a "
                 "control tick used, ticks that got a stale frame again, camera frames that never reached a "
                 "tick (skipped), frames the video encoder dropped, gaps between frames longer than two "
                 "frame periods, and the longest gap (`cameras.csv`).", "",
                 "| camera | policy | attempts | frames | stale ticks | skipped | encoder dropped | gaps | "
                 "longest gap | attempts with gaps |", "|" + "---|" * 10]
        for r in self.table.itertuples(index=False):
            lines.append(f"| {markdown_text(r.camera)} | {markdown_text(name(r.policy))} | {r.attempts} | {r.frames} | "
                         f"{r.repeated} | {r.skipped} | {r.encoder_dropped} | {r.gaps} | "
                         f"{1000 * r.longest_gap_s:.0f} ms | {r.attempts_with_gaps} |")
        lines.append("")
        if self.lost_by_period and any(self.lost_by_period):
            lines += ["Frames lost (skipped + encoder dropped, all cameras) per tenth of the attempts in run "
                      f"order: {', '.join(map(str, self.lost_by_period))}.", ""]
        return lines


def campaign_cameras(campaign_dir: str | Path, url: str | None = None) -> CameraHealth:
    """Read the campaign's ledger (read-only) and build the camera table."""
    from spabench.analysis.health import finished_attempts
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        policy_of, attempts, rollouts = finished_attempts(ledger)
    return cameras_from_rows(attempts, policy_of, rollouts)


def cameras_from_rows(attempts, policy_of: dict[str, str], rollouts: dict[str, dict]) -> CameraHealth:
    """The table from ledger rows (attempts; rollout_summary payloads by attempt id)."""
    per: dict[tuple[str, str], dict] = {}
    lost: list[int] = []
    for a in sorted(attempts, key=lambda a: (a.started_at or "", a.attempt_id)):
        frames = (rollouts.get(a.attempt_id) or {}).get("camera_frames") or {}
        if not frames:
            continue
        lost.append(0)
        for camera, counts in frames.items():
            p = per.setdefault((camera, policy_of.get(a.trial_id, "?")), dict.fromkeys(CAMERA_COLUMNS[2:], 0))
            p["attempts"] += 1
            for key, source in (("frames", "frames"), ("repeated", "repeated"), ("skipped", "skipped"),
                                ("encoder_dropped", "dropped"), ("gaps", "gaps")):
                p[key] += int(counts.get(source) or 0)
            p["longest_gap_s"] = max(p["longest_gap_s"], float(counts.get("longest_gap_s") or 0.0))
            p["attempts_with_gaps"] += int(bool(counts.get("gaps")))
            lost[-1] += int(counts.get("skipped") or 0) + int(counts.get("dropped") or 0)
    rows = [{"camera": camera, "policy": policy, **counts} for (camera, policy), counts in per.items()]
    table = pd.DataFrame(rows, columns=list(CAMERA_COLUMNS))
    if not table.empty:
        table = table.sort_values(["camera"], kind="stable").reset_index(drop=True)
    periods = [int(part.sum()) for part in np.array_split(np.asarray(lost, dtype=int), min(PERIODS, len(lost)))] \
        if lost else []
    return CameraHealth(table, periods)
