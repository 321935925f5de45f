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
FULL_POLICIES = ("molmoact2", "pi05", "groot_fllm")
# The campaign facts: GR00T-N1.7 F-FT ran the 120 ID trials, VLA-0 72 (12 per task): 2,892 rollouts.
ID_ONLY_TRIALS = {"groot_fft": 20, "vla0": 12}
ID_ONLY_POLICIES = tuple(ID_ONLY_TRIALS)
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


def _evaluation_numbers() -> dict[tuple[str, str], int]:
    """(task, condition) -> the number of its first evaluation: evaluation N is the same scene for
    every policy, so an ID-only policy's trials share ids with the full policies' ID trials."""
    first, n = {}, 0
    for task in TASKS:
        for condition, count in CONDITION_COUNTS[task].items():
            first[(task, condition)] = n
            n += count
    return first


def synthetic_campaign(seed: int = 7) -> Synthetic:
    """The published campaign's shape: 3 policies x 900 protocol rollouts, GR00T F-FT 120 and VLA-0
    72 ID rollouts (2,892 valid rollouts), plus 72 invalid attempts of re-run trials."""
    rng = np.random.default_rng(seed)
    data = Synthetic()
    first_evaluation = _evaluation_numbers()
    for policy in FULL_POLICIES + ID_ONLY_POLICIES:
        policy_rows = []
        for task in TASKS:
            counts = CONDITION_COUNTS[task] if policy in FULL_POLICIES else {"id": ID_ONLY_TRIALS[policy]}
            groups: dict[str, dict[int, int]] = {}
            for condition, n in counts.items():
                k = int(rng.integers(0, n + 1))
                successes = np.zeros(n, dtype=int)
                successes[rng.choice(n, size=k, replace=False)] = 1
                matched = condition in ("ood", "direct", "paraphrase_ood", "paraphrase_direct")
                if matched:
                    groups[condition] = {j: int(s) for j, s in enumerate(successes)}
                for j, success in enumerate(successes):
                    evaluation = first_evaluation[(task, condition)] + j + 1
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
        if policy in FULL_POLICIES:
            # 24 invalid attempts per full policy: earlier attempts of trials that were re-run
            for row in [policy_rows[i] for i in rng.choice(len(policy_rows), size=24, replace=False)]:
                bad = dict(row, valid="false", failure_mode="",
                           success="" if int(row["evaluation_id"][1:]) % 2 else "0")
                data.invalid.append(bad)
                policy_rows.append(bad)
        order = rng.permutation(len(policy_rows))
        data.rows.extend(policy_rows[i] for i in order)
    return data


def counting_trials(n_scenes: int, policies: tuple[str, ...]) -> list:
    """Planned ledger rows: `n_scenes` counting scenes (E0000...), each run by every policy (aliases P0,
    P1, ... in that order), for tests that write a small real ledger."""
    from spabench.ledger import TrialRow

    return [TrialRow(trial_id=f"E{i:04d}-P{p}", evaluation_id=f"E{i:04d}", policy=policy, card=policy,
                     alias=f"P{p}", task="counting", condition="id", scene_id=f"s{i}", scene_condition="id",
                     matched_group=None, cell="goal_2_by_addition|counting", withheld=False,
                     instruction="Leave exactly two objects in the bowl.", instruction_variant="original",
                     timer_s=60.0, order=len(policies) * i + p)
            for i in range(n_scenes) for p, policy in enumerate(policies)]
