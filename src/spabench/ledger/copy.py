"""`spabench ledger copy SRC DST`: move a campaign between SQLite and PostgreSQL without loss.

Every table is copied row for row with its ids (trials, scene sets, attempts, scores with their
history, events, meta), and the copy is checked by comparing a full dump of both ledgers before it is
put in place; a mismatch leaves nothing behind.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError, DataError
from spabench.ledger.ledger import Ledger
from spabench.ledger.postgres import PostgresStorage
from spabench.ledger.schema import DDL, LATER_COLUMNS
from spabench.ledger.storage import Storage

# Every table and the key that orders its rows, in foreign-key order.
TABLES: tuple[tuple[str, str], ...] = (
    ("meta", "key"), ("trials", "trial_id"), ("scene_sets", "evaluation_id"),
    ("attempts", "attempt_id"), ("scores", "score_id"), ("events", "event_id"),
)
# Campaign files beside the ledger that make DST a campaign folder of its own.
CAMPAIGN_FILES = ("config.yaml", "plan.csv")


def _table_rows(storage: Storage, table: str, key: str) -> tuple[list[str], list[tuple]]:
    rows = storage.query(f'SELECT * FROM {table} ORDER BY "{key}"')
    if not rows:
        cols = [r["name"] for r in _columns(storage, table)]
        return cols, []
    cols = list(rows[0])
    return cols, [tuple(r[c] for c in cols) for r in rows]


def _columns(storage: Storage, table: str) -> list[dict[str, Any]]:
    return [{"name": c} for c in storage.columns(table)]


def dump(ledger: Ledger) -> dict[str, tuple[list[str], list[tuple]]]:
    """Every table of a ledger as (columns, rows in key order): equal dumps = the same campaign."""
    return {table: _table_rows(ledger.storage, table, key) for table, key in TABLES}


def differences(a: Ledger, b: Ledger) -> list[str]:
    """What differs between two ledgers (empty: identical), one line per table."""
    da, db = dump(a), dump(b)
    out = []
    for table, _ in TABLES:
        (ca, ra), (cb, rb) = da[table], db[table]
        later = {c for t, c, _ in LATER_COLUMNS if t == table}
        if ca != cb and not (set(ca) ^ set(cb)) - later:
            # a source planned before a later column: compare what both hold (the copy's is NULL)
            common = [c for c in ca if c in cb]
            ra = [tuple(r[ca.index(c)] for c in common) for r in ra]
            rb = [tuple(r[cb.index(c)] for c in common) for r in rb]
            ca = cb = common
        if ca != cb:
            out.append(f"{table}: columns {ca} vs {cb}")
        elif ra != rb:
            n = sum(1 for x, y in zip(ra, rb, strict=False) if x != y) + abs(len(ra) - len(rb))
            out.append(f"{table}: {n} row(s) differ ({len(ra)} vs {len(rb)} rows)")
    return out


@dataclass(frozen=True)
class CopyResult:
    source: str
    destination: str
    rows: dict[str, int]


def copy_ledger(src: Path, dst: Path, url: str | None = None, grant: str | None = None, *,
                command: str = "ledger copy", key: str = "dst") -> CopyResult:
    """Copy the campaign folder SRC's ledger (either back end) into the new campaign folder DST: a SQLite
    file there, or (with `url`) a new PostgreSQL schema that DST points to. Checked by comparing both.
    DST must be new or empty (it is marked as `command`'s output)."""
    from spabench.outputs import add_entries, claim_new_folder

    src, dst = Path(src), Path(dst)
    if not Ledger.exists(src):
        raise ConfigError(f"ledger copy: {src} is not a campaign folder (no {Ledger.FILENAME} or {Ledger.POINTER})")
    if Ledger.exists(dst):
        raise ConfigError(Ledger._exists_message(dst / Ledger.FILENAME))
    with Ledger.open(src, readonly=True) as source:
        claim_new_folder(dst, command, key=key)
        tables = dump(source)

        def fill(storage: Storage) -> None:
            storage.create_schema(DDL)
            with storage.write() as tx:
                for table, _ in TABLES:
                    cols, rows = tables[table]
                    if rows:
                        names = ", ".join(f'"{c}"' for c in cols)
                        marks = ", ".join("?" for _ in cols)
                        tx.many(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
            storage.reset_sequences()

        created = Ledger._build(dst / Ledger.FILENAME, url, source.campaign, fill, grant=grant)
        with created:
            diff = differences(source, created)
            if diff:
                where = created.location
                if isinstance(created.storage, PostgresStorage):
                    created.storage.drop_schema()
                    (dst / Ledger.POINTER).unlink(missing_ok=True)
                else:
                    created.close()
                    (dst / Ledger.FILENAME).unlink(missing_ok=True)
                raise DataError(where, "the copy differs from its source and was removed: " + "; ".join(diff))
            result = CopyResult(source.location, created.location, {t: len(tables[t][1]) for t, _ in TABLES})
    written = [Ledger.POINTER if url not in (None, "", "sqlite") else Ledger.FILENAME]
    for name in CAMPAIGN_FILES:
        if (src / name).is_file() and not (dst / name).exists():
            shutil.copy2(src / name, dst / name)
            written.append(name)
    add_entries(dst, *written)
    return result
