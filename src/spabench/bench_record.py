"""Where `spabench bench check` keeps its records, and the last one a session or a report refers to.

A check writes bench-checks/<date-time>/report.json (in the lab folder, the current one, or out=DIR);
one made with campaign=DIR is also a `bench_check` event in the campaign's ledger. `run` names the
last check of its bench in its pre-flight (how old, passed or not); the report lists the campaign's.
Kept apart from spabench.commission (which imports the rollout's space and card code) so that the
session and the report read the records without importing the check itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CHECKS_DIR = "bench-checks"
REPORT_JSON = "report.json"
EVENT = "bench_check"


@dataclass
class CheckSummary:
    """One check as a session or a report shows it."""

    folder: str
    finished: str                 # ISO 8601, UTC
    result: str                   # pass | fail
    failures: list[str] = field(default_factory=list)
    robot_id: str | None = None
    bench_type: str | None = None
    only: list[str] = field(default_factory=list)   # the parts checked, when not all

    @classmethod
    def from_report(cls, report: dict[str, Any], folder: str) -> CheckSummary:
        bench = report.get("bench") or {}
        return cls(folder=folder, finished=str(report.get("finished") or report.get("started") or ""),
                   result=str(report.get("result") or "fail"), failures=list(report.get("failures") or []),
                   robot_id=bench.get("robot_id"), bench_type=bench.get("type"), only=list(report.get("only") or []))

    def as_event(self) -> dict[str, Any]:
        return asdict(self)

    def when(self) -> datetime | None:
        try:
            stamp = datetime.fromisoformat(self.finished)
        except ValueError:
            return None
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)

    def age_text(self, now: datetime | None = None) -> str:
        """'3 h 12 min ago', '2 d 4 h ago', 'just now'."""
        stamp = self.when()
        if stamp is None:
            return "at an unknown time"
        seconds = max(0, int(((now or datetime.now(UTC)) - stamp).total_seconds()))
        days, rest = divmod(seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes = rest // 60
        if days:
            return f"{days} d {hours} h ago"
        if hours:
            return f"{hours} h {minutes} min ago"
        return f"{minutes} min ago" if minutes else "just now"

    def line(self, now: datetime | None = None) -> str:
        """The pre-flight's line about this check."""
        verdict = "passed" if self.result == "pass" else f"FAILED ({len(self.failures)} item(s); first: {self.failures[0]})" \
            if self.failures else "FAILED"
        only = f" (only {', '.join(self.only)})" if self.only else ""
        return f"last bench check{only} {self.age_text(now)} ({self.finished}): {verdict}; {self.folder}"


def checks_in(lab: Path) -> list[CheckSummary]:
    """Every check recorded under lab/bench-checks/ (unreadable ones left out)."""
    out = []
    for report in sorted((lab / CHECKS_DIR).glob(f"*/{REPORT_JSON}")):
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == "spabench bench check":
            out.append(CheckSummary.from_report(data, str(report.parent)))
    return out


def campaign_checks(ledger: Any) -> list[CheckSummary]:
    """The checks made with campaign=DIR, from the ledger's events, oldest first."""
    out = []
    for event in ledger.events(kind=EVENT):
        payload = event["payload"] if isinstance(event.get("payload"), dict) else {}
        known = {k: payload[k] for k in ("folder", "finished", "result", "failures", "robot_id", "bench_type")
                 if k in payload}
        if {"folder", "finished", "result"} <= set(known):
            out.append(CheckSummary(**known))
    return out


def last_check(lab: Path, ledger: Any = None, robot_id: str | None = None,
               bench_type: str | None = None) -> CheckSummary | None:
    """The newest check of this bench (same robot id and bench type) in the lab folder or the
    campaign's ledger; None when there is none."""
    found = checks_in(lab) + (campaign_checks(ledger) if ledger is not None else [])
    mine = [c for c in found if (robot_id is None or c.robot_id in (None, robot_id))
            and (bench_type is None or c.bench_type in (None, bench_type)) and c.when() is not None]
    return max(mine, key=lambda c: c.when() or datetime.min.replace(tzinfo=UTC), default=None)
