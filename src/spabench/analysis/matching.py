"""Matched scenes: which rollouts share a matched OOD scene, as pairs and as subsets.

A matched group is one OOD scene specification of one task. Per policy it holds the original OOD
rollout, and on 20 of 50 scenes a direct-manipulation control, and on 10 of those a paraphrase of
each. Pairing is always within (policy, task, matched_group), and within a lab when the outcomes
name labs (`outcomes.lab_key`), on valid rollouts only.
"""

from __future__ import annotations

import pandas as pd

from spabench.analysis.outcomes import lab_key

GROUP_KEY: tuple[str, ...] = ("policy", "task", "matched_group")


def valid_rollouts(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Valid, scored rollouts: the only rows any rate or contrast counts."""
    valid = outcomes[outcomes["valid"] & outcomes["success"].notna()].copy()
    valid["success"] = valid["success"].astype(int)
    return valid


def groups_with(valid: pd.DataFrame, conditions: tuple[str, ...]) -> pd.MultiIndex:
    """(policy, task, matched_group) of the matched groups holding a rollout of any `conditions`."""
    rows = valid[valid["condition"].isin(conditions) & (valid["matched_group"] != "")]
    return pd.MultiIndex.from_frame(rows[lab_key(valid, GROUP_KEY)].drop_duplicates())


def in_groups(valid: pd.DataFrame, groups: pd.MultiIndex) -> pd.Series:
    """Boolean mask: the row's (policy, task, matched_group) is one of `groups`."""
    if len(groups) == 0:
        return pd.Series(False, index=valid.index)
    keys = pd.MultiIndex.from_frame(valid[lab_key(valid, GROUP_KEY)])
    return pd.Series(keys.isin(groups), index=valid.index)


def matched_subset(valid: pd.DataFrame, condition: str, partner_conditions: tuple[str, ...]) -> pd.DataFrame:
    """Rollouts of `condition` whose matched group also holds a rollout of a partner condition."""
    rows = valid[(valid["condition"] == condition) & (valid["matched_group"] != "")]
    return rows[in_groups(rows, groups_with(valid, partner_conditions))]


def matched_pairs(valid: pd.DataFrame, first: str, second: str) -> pd.DataFrame:
    """One row per matched group holding both conditions: policy, task, matched_group, first, second.

    `first` and `second` are the two rollouts' successes (0/1). Uniqueness per group and condition
    is guaranteed by the outcomes validation.
    """
    def side(condition: str, name: str) -> pd.DataFrame:
        rows = valid[(valid["condition"] == condition) & (valid["matched_group"] != "")]
        return rows[key + ["success"]].rename(columns={"success": name})

    key = lab_key(valid, GROUP_KEY)
    pairs = side(first, "first").merge(side(second, "second"), on=key, how="inner")
    return pairs.sort_values(key, kind="stable").reset_index(drop=True)
