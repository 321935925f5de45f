"""The outcomes table: one row per rollout attempt, read from a CSV or the campaign ledger, validated.

Every check runs before any statistic is computed, so a malformed file stops the report with one
error that names the file, the row, the field and the allowed values, and nothing is written.

Row numbers are line numbers in the file: the header is row 1, the first data row is row 2 (as a
spreadsheet shows them). For a ledger, rows are numbered the same way over its outcomes view.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import pandas as pd

from spabench.errors import DataError
from spabench.suite.rules import UNSAFE, failure_mode_applies, failure_modes_for
from spabench.suite.vocabulary import (
    INSTRUCTION_VARIANTS,
    allowed_labels,
    condition_name,
    failure_mode_name,
    policy_name,
    task_name,
)

REQUIRED_COLUMNS: tuple[str, ...] = ("policy", "task", "condition", "evaluation_id", "success")
OPTIONAL_COLUMNS: tuple[str, ...] = ("matched_group", "instruction_variant", "failure_mode", "valid",
                                     "paraphrase_of", "lab")
# The lab that ran a row: evaluation ids (and matched groups) are unique within a lab, so every
# pairing and uniqueness key starts with it when the outcomes have the column (`lab_key`).
LAB = "lab"

# Conditions played on a matched OOD scene; their rollouts are paired by matched_group.
MATCHED_CONDITIONS: tuple[str, ...] = ("ood", "direct", "paraphrase_ood", "paraphrase_direct")
# Which condition an original-instruction condition becomes when its instruction is paraphrased.
PARAPHRASE_OF: dict[str, str] = {"ood": "paraphrase_ood", "direct": "paraphrase_direct"}


TRUE_WORDS = ("1", "true")
FALSE_WORDS = ("0", "false")
BOOLEAN_WORDS = ("0", "1", "true", "false")

# Columns of the validated frame, in order; any extra input columns follow unchanged.
FRAME_COLUMNS: tuple[str, ...] = (
    "row", "policy", "task", "condition", "evaluation_id", "matched_group",
    "instruction_variant", "success", "valid", "failure_mode",
)

# The uniqueness rule for valid rows: one valid rollout per trial.
DUPLICATE_KEY: tuple[str, ...] = ("policy", "task", "condition", "evaluation_id", "instruction_variant")


def lab_key(frame: pd.DataFrame, key: Sequence[str]) -> list[str]:
    """`key` preceded by `lab` when the outcomes name their labs: two labs' evaluation N are
    different scenes, so rows pair (and duplicate) only within a lab."""
    return ([LAB] if LAB in frame.columns else []) + list(key)


def load_outcomes(path: str | Path, unpaired: str = "error") -> pd.DataFrame:
    """Read and validate an outcomes CSV; see `validate_outcomes` for the returned frame."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "outcomes file not found")
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise DataError(path, "the file is empty; expected a header row", row=1,
                                allowed=REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
            records, rows = [], []
            for values in reader:
                if not values or all(not v.strip() for v in values):
                    continue  # blank line
                if len(values) != len(header):
                    raise DataError(path, f"the row has {len(values)} fields but the header has "
                                    f"{len(header)}", row=reader.line_num)
                records.append(values)
                rows.append(reader.line_num)
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not a UTF-8 text file ({exc.reason})") from None
    except csv.Error as exc:
        raise DataError(path, f"not a readable CSV file ({exc})") from None
    columns = [name.strip().lower() for name in header]
    return validate_outcomes(columns, records, rows, source=str(path), unpaired=unpaired)


def outcomes_from_frame(frame: pd.DataFrame, source: str, unpaired: str = "exclude") -> pd.DataFrame:
    """Validate an outcomes frame produced in memory (the ledger's `outcomes()` view). A live
    campaign's partner rows may still be pending, so unpaired rows are left out and listed."""
    columns = [str(c).strip().lower() for c in frame.columns]
    records = [[_as_text(v) for v in values] for values in frame.itertuples(index=False, name=None)]
    rows = list(range(2, len(records) + 2))
    return validate_outcomes(columns, records, rows, source=source, unpaired=unpaired)


def _as_text(value: object) -> str:
    """A ledger cell as the text a CSV would hold (None/NaN empty, bools and whole floats as words)."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer():
            return str(int(value))
    return str(value)


def validate_outcomes(columns: Sequence[str], records: Sequence[Sequence[str]], rows: Sequence[int],
                      source: str, unpaired: str = "error") -> pd.DataFrame:
    """`_validate_outcomes` plus the pairing rule (`unpaired`: error | exclude | ignore)."""
    if unpaired not in UNPAIRED_CHOICES:
        raise DataError("unpaired", f"unknown choice {unpaired!r}", allowed=UNPAIRED_CHOICES)
    return _validate_outcomes(columns, records, rows, source, unpaired=unpaired)


def _validate_outcomes(columns: Sequence[str], records: Sequence[Sequence[str]], rows: Sequence[int],
                       source: str, unpaired: str = "error") -> pd.DataFrame:
    """Check every row and return the normalised frame.

    The frame has FRAME_COLUMNS plus any extra input columns. `success` is a nullable Int64 (an
    invalid attempt may be unscored), `valid` a bool, `failure_mode` and `matched_group` strings
    ("" when absent), `instruction_variant` "original" or "paraphrase". A row whose condition is
    `ood`/`direct` and whose instruction_variant is `paraphrase` is read as `paraphrase_ood` /
    `paraphrase_direct`. The frame's `attrs` hold `source` and `has_matched_group`.
    """
    seen: dict[str, int] = {}
    for name in columns:
        if name in seen:
            raise DataError(source, f"column '{name}' appears twice in the header", row=1, field=name)
        seen[name] = 1
    for name in REQUIRED_COLUMNS:
        if name not in seen:
            raise DataError(source, f"missing required column '{name}'", row=1, field=name,
                            allowed=f"required columns {', '.join(REQUIRED_COLUMNS)}; optional "
                                    f"{', '.join(OPTIONAL_COLUMNS)}")
    has_matched_group = "matched_group" in seen
    labs = [LAB] if LAB in seen else []
    extras = [c for c in columns if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS and c != "row"]

    parsed = []
    for values, row in zip(records, rows, strict=True):
        record = {name: (value or "").strip() for name, value in zip(columns, values, strict=True)}
        parsed.append(_validate_row(record, row, source, has_matched_group, labs + extras))

    frame = pd.DataFrame(parsed, columns=list(FRAME_COLUMNS) + labs + extras)
    frame["row"] = frame["row"].astype(int)
    frame["success"] = frame["success"].astype("Int64")
    frame["valid"] = frame["valid"].astype(bool)
    _check_unique(frame, source)
    frame.attrs["unpaired_rows"] = []
    if has_matched_group and unpaired != "ignore":
        frame = _check_pairing(frame, source, unpaired)
    frame.attrs["source"] = source
    frame.attrs["has_matched_group"] = has_matched_group
    return frame


def _fail(source: str, row: int, field: str, message: str, allowed=None) -> NoReturn:
    raise DataError(source, message, row=row, field=field, allowed=allowed)


def _parse_flag(text: str, source: str, row: int, field: str) -> bool:
    word = text.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    _fail(source, row, field, f"'{text}' is not a yes/no value (case-insensitive)", BOOLEAN_WORDS)


def _validate_row(record: Mapping[str, str], row: int, source: str, has_matched_group: bool,
                  extras: Sequence[str]) -> dict:
    for field in ("policy", "evaluation_id"):
        if not record[field]:
            _fail(source, row, field, f"'{field}' is empty", "any non-empty text")
    # names in spabench's, the paper's or the authors' words (spabench.suite.vocabulary), any case/punctuation
    task = task_name(record["task"])
    if task is None:
        _fail(source, row, "task", f"unknown task '{record['task']}'", allowed_labels("task"))
    condition = condition_name(record["condition"], task, record.get("paraphrase_of") or None)
    if condition is None:
        _fail(source, row, "condition", f"unknown condition '{record['condition']}' (for 'Language "
              "robustness' the row must say which prompt it paraphrases: a paraphrase_of column "
              "'ood' or 'direct')", allowed_labels("condition"))

    valid_text = record.get("valid", "")
    valid = True if not valid_text else _parse_flag(valid_text, source, row, "valid")
    success_text = record["success"]
    if success_text:
        success = int(_parse_flag(success_text, source, row, "success"))
    elif valid:
        _fail(source, row, "success", "a valid rollout needs a score (an unscored attempt must "
              "have valid=false)", BOOLEAN_WORDS)
    else:
        success = None

    variant = record.get("instruction_variant", "").lower()
    if variant and variant not in INSTRUCTION_VARIANTS:
        _fail(source, row, "instruction_variant", f"unknown instruction variant '{variant}'",
              INSTRUCTION_VARIANTS)
    is_paraphrase_condition = condition in PARAPHRASE_OF.values()
    if variant == "paraphrase" and not is_paraphrase_condition:
        if condition not in PARAPHRASE_OF:
            _fail(source, row, "instruction_variant", f"condition '{condition}' has no paraphrase "
                  "variant", "original (paraphrases exist only for ood and direct)")
        condition = PARAPHRASE_OF[condition]
    elif variant == "original" and is_paraphrase_condition:
        _fail(source, row, "instruction_variant", f"condition '{condition}' is a paraphrase "
              "condition", "paraphrase (or empty)")
    variant = "paraphrase" if condition in PARAPHRASE_OF.values() else "original"

    matched_group = record.get("matched_group", "")
    if has_matched_group and not matched_group and condition in MATCHED_CONDITIONS[1:]:
        _fail(source, row, "matched_group", f"a '{condition}' rollout must name the matched OOD "
              "scene group it is paired with", "the matched_group of an ood rollout of the same task")

    failure_text = record.get("failure_mode", "")
    failure_mode = failure_mode_name(failure_text) if failure_text else ""
    if failure_text.strip().lower() == UNSAFE:   # e-stopped for unsafe policy behaviour (suite.rules)
        failure_mode = UNSAFE
    if failure_text:
        if failure_mode is None:
            _fail(source, row, "failure_mode", f"unknown failure mode '{failure_text}'",
                  ("(empty)",) + allowed_labels("failure_mode") + (UNSAFE,))
        problem = None if failure_mode == UNSAFE else failure_mode_applies(failure_mode, task, condition)
        if problem:
            _fail(source, row, "failure_mode", problem, ("(empty)",) + tuple(failure_modes_for(task, condition)))
        if success == 1 and valid:  # the ledger refuses the same (i10)
            _fail(source, row, "failure_mode", f"a successful rollout has no failure mode (got "
                  f"'{failure_text}')", "(empty) when success is 1")

    out = {
        "row": row, "policy": policy_name(record["policy"]), "task": task, "condition": condition,
        "evaluation_id": record["evaluation_id"], "matched_group": matched_group,
        "instruction_variant": variant, "success": success, "valid": valid,
        "failure_mode": failure_mode,
    }
    out.update({name: record[name] for name in extras})
    return out


def _check_unique(frame: pd.DataFrame, source: str) -> None:
    """One valid row per trial, and one valid rollout per condition in each matched group."""
    valid = frame[frame["valid"]]
    trial = lab_key(frame, DUPLICATE_KEY)
    duplicated = valid.duplicated(trial, keep="first")
    if duplicated.any():
        later = valid[duplicated].iloc[0]
        first = valid[(valid[trial] == later[trial]).all(axis=1)].iloc[0]
        same = ", ".join(trial[:-1]) + " and " + trial[-1]
        _fail(source, int(later["row"]), "evaluation_id",
              f"duplicate valid rollout: same {same} as row {int(first['row'])}",
              f"one valid row per ({', '.join(trial)}); mark superseded attempts valid=false")
    paired = valid[valid["condition"].isin(MATCHED_CONDITIONS) & (valid["matched_group"] != "")]
    key = lab_key(frame, ["policy", "task", "matched_group", "condition"])
    duplicated = paired.duplicated(key, keep="first")
    if duplicated.any():
        later = paired[duplicated].iloc[0]
        first = paired[(paired[key] == later[key]).all(axis=1)].iloc[0]
        _fail(source, int(later["row"]), "matched_group",
              f"matched group '{later['matched_group']}' already has a valid '{later['condition']}' "
              f"rollout for policy '{later['policy']}' (row {int(first['row'])})",
              "one valid rollout per condition in a matched group")


# The row a matched-scene condition must be paired with (same policy, task and matched_group).
PAIRED_WITH: dict[str, str] = {"direct": "ood", "paraphrase_ood": "ood", "paraphrase_direct": "direct"}


UNPAIRED_CHOICES = ("error", "exclude", "ignore")


def _check_pairing(frame: pd.DataFrame, source: str, unpaired: str) -> pd.DataFrame:
    """A direct or paraphrase rollout counts only beside its partner on the same matched OOD scene:
    an unpaired row (its matched_group belongs to another task or policy, or has no original) is one
    clear error naming the row (`unpaired=error`), or dropped and listed in attrs['unpaired_rows']
    (`unpaired=exclude`); never silently counted in the rates."""
    lab = (lambda r: r.lab) if LAB in frame.columns else (lambda r: "")   # partners come from one lab
    present = {(lab(r), r.policy, r.task, r.matched_group, r.condition) for r in frame.itertuples()}
    dropped = []
    for r in frame.itertuples():
        partner = PAIRED_WITH.get(r.condition)
        if partner is None or not r.matched_group:
            continue
        if (lab(r), r.policy, r.task, r.matched_group, partner) not in present:
            if unpaired == "exclude":
                dropped.append(int(r.row))
                continue
            _fail(source, int(r.row), "matched_group",
                  f"this '{r.condition}' rollout of policy '{r.policy}' on task '{r.task}' is unpaired: no "
                  f"'{partner}' row of the same policy and task has matched_group '{r.matched_group}'",
                  f"the matched_group of a '{partner}' row of the same policy and task (or report with "
                  "unpaired=exclude to leave such rows out, listed)")
    if not dropped:
        return frame
    kept = frame[~frame["row"].isin(dropped)].reset_index(drop=True)
    kept.attrs.update(frame.attrs)
    kept.attrs["unpaired_rows"] = dropped
    return kept


def invalid_rollouts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """The invalid attempts (infrastructure faults, aborts): excluded from every rate, listed."""
    invalid = outcomes[~outcomes["valid"]]
    return invalid.drop(columns=["valid"]).reset_index(drop=True)


def policies_in_order(outcomes: pd.DataFrame) -> list[str]:
    """Policies in order of first appearance, so tables follow the input's order."""
    return list(dict.fromkeys(outcomes["policy"]))
