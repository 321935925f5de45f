"""The report's "Bench" section: the `spabench bench check` records made for the campaign.

Read from the ledger's `bench_check` events (a check made with campaign=DIR writes one): when each
check finished, its result and its failed items, and where its record is kept.
"""

from __future__ import annotations

from pathlib import Path

from spabench.escaping import markdown_text

__all__ = ["campaign_bench_checks", "bench_check_lines"]


def campaign_bench_checks(campaign_dir: Path, url: str | None = None) -> list:
    """The campaign's checks (spabench.bench_record.CheckSummary), oldest first."""
    from spabench.bench_record import campaign_checks
    from spabench.ledger import Ledger

    with Ledger.open(campaign_dir, readonly=True, url=url) as ledger:
        return campaign_checks(ledger)


def bench_check_lines(checks: list | None) -> list[str]:
    """The section (nothing for a CSV input, whose bench is not known here)."""
    if checks is None:
        return []
    lines = ["## Bench", ""]
    if not checks:
        return lines + ["No bench check was recorded for this campaign (`spabench bench check bench=<preset> "
                        "campaign=DIR` records one: bus, motors, cameras, policy servers, disk).", ""]
    lines += ["Bench checks made for this campaign (`spabench bench check ... campaign=DIR`), oldest first; each "
              "record (report.html, report.json, the camera pictures) is kept in its folder.", "",
              "| finished (UTC) | bench | result | failed items | record |", "|---|---|---|---|---|"]
    for c in checks:
        failed = "; ".join(markdown_text(f) for f in c.failures) or "none"
        lines.append(f"| {markdown_text(c.finished)} | {markdown_text(c.robot_id or '')} ({markdown_text(c.bench_type or '')})"
                     f" | {'pass' if c.result == 'pass' else '**fail**'} | {failed} | {markdown_text(c.folder)} |")
    return lines + [""]
