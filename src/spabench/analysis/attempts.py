"""Invalid attempts by policy and reason: what kept an attempt out of the rates.

An attempt is invalid when it did not run as planned, and it is re-run. The reasons are of
different kinds and the report keeps them apart: the operator stopped it (an e-stop, an abort, or
invalidated it afterwards), the policy server or the bench and harness failed, or the session was
interrupted. None is scored as a policy failure. The ledger does not record why an operator
e-stopped, so an e-stop for unsafe policy behaviour is among them: the report says so, and a
policy's e-stops are shown on their own rows.
"""

from __future__ import annotations

import pandas as pd

from spabench.analysis.matching import valid_rollouts
from spabench.analysis.outcomes import policies_in_order

INVALID_COLUMNS: tuple[str, ...] = ("policy", "reason", "kind", "attempts", "trials_rerun", "trials_without_valid")
NOT_RECORDED = "not_recorded"
# reason (the ledger's invalid_reason, rollout.types.INVALID_REASONS) -> what kind of event it was
REASON_KINDS: dict[str, str] = {
    "estop": "operator: e-stop",
    "operator_abort": "operator: abort",
    "operator_invalidated": "operator: declared invalid after the rollout",
    "console_lost": "operator's console lost (dead-man hold)",
    "server_lost": "policy server fault",
    "protocol_error": "policy server fault",
    "bus_error": "bench fault",
    "camera_lost": "bench fault",
    "safety_error": "bench safety guard",
    "storage_error": "harness fault",
    "harness_error": "harness fault",
    "interrupted": "session interrupted",
    NOT_RECORDED: "reason not recorded (the outcomes carry no invalid_reason)",
}


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
    reasons = (invalid["invalid_reason"] if "invalid_reason" in invalid.columns
               else pd.Series("", index=invalid.index)).fillna("").map(reason_of)
    trial = ["policy", "task", "condition", "evaluation_id", "instruction_variant"]
    done = pd.MultiIndex.from_frame(valid_rollouts(outcomes)[trial])
    frame = invalid[trial].assign(reason=reasons.to_numpy(),
                                  rerun=pd.MultiIndex.from_frame(invalid[trial]).isin(done))
    rows = []
    for (policy, reason), group in frame.groupby(["policy", "reason"], sort=False):
        trials = group.drop_duplicates(trial)
        rows.append((policy, reason, REASON_KINDS.get(reason, reason), len(group), int(trials["rerun"].sum()),
                     int((~trials["rerun"]).sum())))
    table = pd.DataFrame(rows, columns=list(INVALID_COLUMNS))
    rank = {p: i for i, p in enumerate(policies_in_order(outcomes))}
    kinds = {r: i for i, r in enumerate(REASON_KINDS)}
    table = table.sort_values(["policy", "reason"], kind="stable",
                              key=lambda c: c.map(rank if c.name == "policy" else lambda r: kinds.get(r, len(kinds))))
    return table.reset_index(drop=True)
