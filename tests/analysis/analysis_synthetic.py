"""Synthetic outcomes tables built from known per-cell counts, for the analysis tests.

The generator keeps its own books (which rollouts succeed, which scenes are matched) so the tests
compare the report against counts that were never computed by the code under test.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spabench.suite.vocabulary import CONDITION_COUNTS, TASKS

COLUMNS = ("policy", "task", "condition", "evaluation_id", "success", "matched_group",
           "instruction_variant", "failure_mode", "valid")
FULL_POLICIES = ("pi05", "molmoact2", "gr00t_frozen")
ID_ONLY_POLICY = "vla0"
GENERAL_MODES = ("wrong_target", "grasp_failure", "no_action", "timeout_or_incomplete", "")
QUIET_CONDITIONS = ("no_intervention", "no_movement")


def write_csv(path: Path, rows: list[dict], columns=COLUMNS) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in columns})
    return path


@dataclass
class Synthetic:
    rows: list[dict] = field(default_factory=list)
    # (policy, task, condition) -> [successes, trials]; derived conditions included
    cells: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    # (policy, task, condition, failure_mode) -> count
    failures: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    invalid: list[dict] = field(default_factory=list)
    # (policy, task) -> {condition: {group index: success}}
    by_group: dict[tuple[str, str], dict[str, dict[int, int]]] = field(default_factory=dict)

    def add_cell(self, key, success: int) -> None:
        cell = self.cells.setdefault(key, [0, 0])
        cell[0] += success
        cell[1] += 1


def synthetic_campaign(seed: int = 7) -> Synthetic:
    """3 policies x 900 protocol rollouts + a 120-rollout ID-only baseline + 72 invalid attempts
    (2,892 rows, the size of the published outcomes CSV)."""
    rng = np.random.default_rng(seed)
    data = Synthetic()
    for policy in FULL_POLICIES + (ID_ONLY_POLICY,):
        evaluation = 0
        policy_rows = []
        for task in TASKS:
            counts = CONDITION_COUNTS[task] if policy != ID_ONLY_POLICY else {"id": 20}
            groups: dict[str, dict[int, int]] = {}
            for condition, n in counts.items():
                k = int(rng.integers(0, n + 1))
                successes = np.zeros(n, dtype=int)
                successes[rng.choice(n, size=k, replace=False)] = 1
                matched = condition in ("ood", "direct", "paraphrase_ood", "paraphrase_direct")
                if matched:
                    groups[condition] = {j: int(s) for j, s in enumerate(successes)}
                for j, success in enumerate(successes):
                    evaluation += 1
                    mode = ""
                    if not success:
                        mode = ("unnecessary_intervention" if condition in QUIET_CONDITIONS
                                else GENERAL_MODES[(j + evaluation) % len(GENERAL_MODES)])
                        key = (policy, task, condition, mode or "unannotated")
                        data.failures[key] = data.failures.get(key, 0) + 1
                    row = {
                        "policy": policy, "task": task, "condition": condition,
                        "evaluation_id": f"E{evaluation:04d}", "success": str(success),
                        "matched_group": f"{task}/scene{j:02d}" if matched else "",
                        "instruction_variant": "paraphrase" if condition.startswith("paraphrase") else "original",
                        "failure_mode": mode, "valid": "true",
                    }
                    policy_rows.append(row)
                    data.add_cell((policy, task, condition), int(success))
            if groups:
                data.by_group[(policy, task)] = groups
                direct = set(groups["direct"])
                paraphrased = set(groups["paraphrase_ood"]) | set(groups["paraphrase_direct"])
                for j, success in groups["ood"].items():
                    if j in direct:
                        data.add_cell((policy, task, "ood_matched"), success)
                    if j in paraphrased:
                        data.add_cell((policy, task, "ood_paraphrase_subset"), success)
                for j, success in groups["direct"].items():
                    if j in paraphrased:
                        data.add_cell((policy, task, "direct_paraphrase_subset"), success)
        if policy != ID_ONLY_POLICY:
            # 24 invalid attempts per full policy: earlier attempts of trials that were re-run
            for row in [policy_rows[i] for i in rng.choice(len(policy_rows), size=24, replace=False)]:
                bad = dict(row, valid="false", failure_mode="",
                           success="" if int(row["evaluation_id"][1:]) % 2 else "0")
                data.invalid.append(bad)
                policy_rows.append(bad)
        order = rng.permutation(len(policy_rows))
        data.rows.extend(policy_rows[i] for i in order)
    return data

