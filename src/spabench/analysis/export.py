"""`spabench export outcomes`: a campaign's outcomes as the CSV `spabench report outcomes=` reads.

The rows are the ones `report campaign=DIR` counts, read by the same code (`load_campaign`): every
complete, scored attempt (valid) and every invalid attempt (valid=false, so the invalid-attempt
and e-stop tables come along), dry runs and direct/paraphrase rows whose partner is not scored yet
left out. Every column of the ledger's outcomes view goes with them (bench_id, bench_kind, rater,
invalid_reason, ...), plus `lab` (`lab=NAME`): CSVs of several labs' campaigns concatenate into one
file whose report has the per-lab tables. The file is written beside `out` and renamed into place,
so a failure leaves nothing half-written.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from spabench.atomic import write_text_durably
from spabench.config import CampaignInput, LedgerKeys, opt
from spabench.errors import ConfigError, DataError
from spabench.escaping import csv_cell
from spabench.paths import campaign_folder

if TYPE_CHECKING:   # pandas loads when an export runs, not when the CLI lists its commands
    import pandas as pd


@dataclass
class ExportOutcomesConfig(CampaignInput, LedgerKeys):
    """`spabench export outcomes`."""

    command: ClassVar[str] = "export outcomes"

    out: Path | None = opt(None, "the outcomes CSV file to write")
    lab: str | None = opt(None, "the lab's name written in every row's lab column (to combine several labs' exports into one report; null: left empty)")


def outcome_rows(outcomes: pd.DataFrame, lab: str | None) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a validated outcomes frame as CSV text: its columns without the source's row
    numbers, `lab` after the protocol's columns, cells as the reader takes them (a cell that would
    start a spreadsheet formula gets a leading apostrophe, as in every CSV spabench writes)."""
    import pandas as pd

    from spabench.analysis.outcomes import LAB, _as_text

    columns = [c for c in outcomes.columns if c not in ("row", LAB)]
    at = columns.index("failure_mode") + 1 if "failure_mode" in columns else len(columns)
    header = columns[:at] + [LAB] + columns[at:]
    labs = outcomes[LAB] if LAB in outcomes.columns else pd.Series(lab or "", index=outcomes.index)
    rows = []
    for values, lab_value in zip(outcomes[columns].itertuples(index=False, name=None), labs, strict=True):
        cells = [csv_cell(_as_text(v)) for v in values]
        rows.append(cells[:at] + [csv_cell(_as_text(lab if lab is not None else lab_value))] + cells[at:])
    return header, rows


def _check_out(out: Path | None) -> Path:
    """`out=FILE.csv`: a new file in an existing folder, or a previous export (same header) to replace."""
    if out is None:
        raise ConfigError("export outcomes needs out=FILE.csv (the outcomes file to write)")
    if out.is_dir():
        raise ConfigError(f"out={out} is a folder; export outcomes writes one CSV file (e.g. out={out}/outcomes.csv)")
    if not out.parent.is_dir():
        raise ConfigError(f"out={out}: its folder {out.parent} does not exist (create it, or choose another path)")
    return out


def _previous_export(out: Path, header: list[str]) -> bool:
    try:
        with out.open(newline="", encoding="utf-8") as handle:
            return next(csv.reader(handle), None) == header
    except (OSError, UnicodeDecodeError, csv.Error):
        return False


def write_csv_atomic(out: Path, header: list[str], rows: list[list[str]]) -> None:
    """The CSV written to a hidden sibling, flushed, then renamed over `out` (all or nothing)."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    write_text_durably(out, buf.getvalue())


def export_outcomes(cfg: ExportOutcomesConfig) -> int:
    """Write `out` (one CSV) from the campaign's ledger: the rows and columns `report campaign=DIR`
    reads, which `report outcomes=FILE.csv` reads back to the same tables. Keys: campaign, out, lab, ledger."""
    from spabench.analysis.commands import load_campaign

    out = _check_out(cfg.out)
    if cfg.lab is not None and not cfg.lab.strip():
        raise ConfigError("lab= is empty (allowed: the lab's name, e.g. lab=lab_north, or leave it out)")
    campaign = campaign_folder(cfg.campaign_dir, "export outcomes")
    outcomes, _, _ = load_campaign(campaign, "exclude", url=cfg.ledger_url,
                                   say=lambda line: print(line.replace("report:", "export outcomes:", 1)))
    if not outcomes["valid"].any():
        dry_runs = len(outcomes.attrs.get("dry_runs") or [])
        raise DataError(f"campaign={campaign}", f"no scored rollout to export ({len(outcomes)} invalid attempt(s)"
                        + (f"; {dry_runs} dry-run rollout(s) left out: dry_run=true counts nowhere" if dry_runs else "")
                        + "); score the complete attempts first (`spabench score campaign=DIR`)")
    header, rows = outcome_rows(outcomes, cfg.lab.strip() if cfg.lab else None)
    if out.exists() and not _previous_export(out, header):
        raise ConfigError(f"out={out} exists and is not an earlier export of these columns; export outcomes "
                          "never overwrites another file: choose a new path, or move that file away")
    left_out = outcomes.attrs.get("unpaired_rows") or []
    dry = outcomes.attrs.get("dry_runs") or []
    write_csv_atomic(out, header, rows)
    valid = int(outcomes["valid"].sum())
    print(f"export outcomes: {valid} scored rollout(s) and {len(rows) - valid} invalid attempt(s) -> {out}"
          + (f"; left out: {len(left_out)} direct/paraphrase row(s) whose partner is not scored yet" if left_out else "")
          + (f"; {len(dry)} dry run(s) left out (they count nowhere)" if dry else ""))
    return 0
