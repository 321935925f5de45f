"""Invalid attempts by policy and reason, and e-stops by cause: what kept an attempt out of the rates.

An attempt is invalid when it did not run as planned, and it is re-run. The reasons are of
different kinds and the report keeps them apart: the operator stopped it (an e-stop, an abort, or
invalidated it afterwards), the policy server or the bench and harness failed, or the session was
interrupted. None is scored as a policy failure. At an e-stop the operator says why
(spabench.suite.rules): one for unsafe policy behaviour is the policy's failure (failure mode
`unsafe`, counted in the rates, never re-run), one for the operator or another cause stays invalid;
the e-stop table counts both per policy.
"""

from __future__ import annotations

import pandas as pd

from spabench.analysis.matching import valid_rollouts
from spabench.analysis.outcomes import lab_key, policies_in_order
from spabench.suite.rules import (
    ESTOP_CAUSE_LABELS,
    ESTOP_CAUSE_NOT_RECORDED,
    ESTOP_CAUSES,
    UNSAFE,
    estop_cause_of,
)

INVALID_COLUMNS: tuple[str, ...] = ("policy", "reason", "kind", "attempts", "trials_rerun", "trials_without_valid")
NOT_RECORDED = "not_recorded"
# reason (the ledger's invalid_reason, rollout.types.INVALID_REASONS) -> what kind of event it was
REASON_KINDS: dict[str, str] = {
    "estop": "operator: e-stop",
    "operator_abort": "operator: abort",
    "operator_invalidated": "operator: declared invalid after the rollout",
    "console_lost": "operator's console lost (dead-man hold)",
    "server_lost": "policy server fault",
    "server_changed": "policy server fault",
    "protocol_error": "policy server fault",
    "bus_error": "bench fault",
    "camera_lost": "bench fault",
    "safety_error": "bench safety guard",
    "storage_error": "harness fault",
    "harness_error": "harness fault",
    "interrupted": "session interrupted",
    NOT_RECORDED: "reason not recorded (the outcomes carry no invalid_reason)",
}


ESTOP_COLUMNS: tuple[str, ...] = ("policy", "cause", "label", "counted_as", "attempts")
CAUSE_ORDER: tuple[str, ...] = ESTOP_CAUSES + (ESTOP_CAUSE_NOT_RECORDED,)
CAUSE_LABELS: dict[str, str] = {**ESTOP_CAUSE_LABELS, "other": "other",
                                ESTOP_CAUSE_NOT_RECORDED: "cause not recorded"}


def estop_kind(invalid_reason: str) -> str:
    """The kind of an e-stopped attempt's row in the invalid table, with the cause the operator gave."""
    cause = estop_cause_of(invalid_reason)
    return f"{REASON_KINDS['estop']}, cause: " + ("not recorded" if cause == ESTOP_CAUSE_NOT_RECORDED else cause)


def reason_of(text: str) -> str:
    """The reason word of an invalid_reason ('operator_invalidated: ...' -> 'operator_invalidated')."""
    word = str(text or "").strip().split(":")[0].split(" ")[0]
    return word or NOT_RECORDED


def invalid_attempt_table(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Invalid attempts per policy and reason, with how many of their trials were re-run to a valid
    rollout and how many have none (INVALID_COLUMNS)."""
    invalid = outcomes[~outcomes["valid"]]
    if invalid.empty:
        return pd.DataFrame(columns=list(INVALID_COLUMNS))
    raw = (invalid["invalid_reason"] if "invalid_reason" in invalid.columns
           else pd.Series("", index=invalid.index)).fillna("").astype(str)
    reasons = raw.map(reason_of)
    trial = lab_key(outcomes, ["policy", "task", "condition", "evaluation_id", "instruction_variant"])
    done = pd.MultiIndex.from_frame(valid_rollouts(outcomes)[trial])
    described = [estop_kind(text) if reason == "estop" else REASON_KINDS.get(reason, reason)
                 for reason, text in zip(reasons, raw, strict=True)]
    frame = invalid[trial].assign(reason=reasons.to_numpy(), kind=described,
                                  rerun=pd.MultiIndex.from_frame(invalid[trial]).isin(done))
    rows = []
    for (policy, reason, kind), group in frame.groupby(["policy", "reason", "kind"], sort=False):
        trials = group.drop_duplicates(trial)
        rows.append((policy, reason, kind, len(group), int(trials["rerun"].sum()), int((~trials["rerun"]).sum())))
    table = pd.DataFrame(rows, columns=list(INVALID_COLUMNS))
    rank = {p: i for i, p in enumerate(policies_in_order(outcomes))}
    kinds = {r: i for i, r in enumerate(REASON_KINDS)}
    table = table.sort_values(["policy", "reason"], kind="stable",
                              key=lambda c: c.map(rank if c.name == "policy" else lambda r: kinds.get(r, len(kinds))))
    return table.reset_index(drop=True)


def estop_table(outcomes: pd.DataFrame) -> pd.DataFrame:
    """E-stopped attempts per policy and cause (ESTOP_COLUMNS): unsafe policy behaviour counted as
    the policy's failure, the other causes as invalid attempts that are re-run."""
    rows: dict[tuple[str, str], int] = {}
    valid = outcomes[outcomes["valid"]]
    if "failure_mode" in valid.columns:
        for policy in valid.loc[valid["failure_mode"].fillna("") == UNSAFE, "policy"]:
            rows[policy, UNSAFE] = rows.get((policy, UNSAFE), 0) + 1
    invalid = outcomes[~outcomes["valid"]]
    if "invalid_reason" in invalid.columns:
        for policy, text in zip(invalid["policy"], invalid["invalid_reason"].fillna("").astype(str), strict=True):
            if reason_of(text) == "estop":
                cause = estop_cause_of(text)
                rows[policy, cause] = rows.get((policy, cause), 0) + 1
    rank = {p: i for i, p in enumerate(policies_in_order(outcomes))}
    order = {c: i for i, c in enumerate(CAUSE_ORDER)}
    table = [(policy, cause, CAUSE_LABELS[cause], "failure (unsafe)" if cause == UNSAFE else "invalid, re-run", n)
             for (policy, cause), n in sorted(rows.items(), key=lambda kv: (rank[kv[0][0]], order[kv[0][1]]))]
    return pd.DataFrame(table, columns=list(ESTOP_COLUMNS))
