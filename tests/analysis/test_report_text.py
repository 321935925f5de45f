"""The report's text says what the paper's reader needs and nothing of the analyst's machine.

Measured on main: the paired direct-minus-OOD contrast under paraphrase was missing; no section
stated the per-policy protocol differences (VLA-0 90 s / 10 Hz, GR00T F-FT assist, EMA); no table
of failure totals per task across policies; no limitations; the analyst's absolute path in the first
line; the bootstrap attributed to "the published analysis" (it is the authors' released code);
invalid attempts described as infrastructure faults ("an infrastructure fault is not a policy
failure") although e-stops and aborts are the operator's, with no table by policy and reason.
"""

from __future__ import annotations

import pandas as pd
import pytest
from analysis_synthetic import COLUMNS, FULL_POLICIES, synthetic_campaign, write_csv

from spabench.analysis.attempts import invalid_attempt_table
from spabench.analysis.commands import ReportConfig, report
from spabench.analysis.outcomes import load_outcomes
from spabench.suite.vocabulary import TASKS


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    campaign = synthetic_campaign()
    csv_path = write_csv(folder / "outcomes.csv", campaign.rows)
    out = folder / "report"
    report(ReportConfig.from_mapping({"outcomes": str(csv_path), "out": str(out), "bootstrap": 500}))
    return campaign, folder, out, (out / "report.md").read_text()


@pytest.mark.slow
def test_no_absolute_path_in_the_report(written):
    _, folder, out, text = written
    assert str(folder) not in text and str(out) not in text and "/tmp" not in text
    assert text.splitlines()[2].startswith("Source: outcomes.csv:")


def test_the_matched_gap_under_paraphrase(written):
    campaign, _, out, text = written
    contrasts = pd.read_csv(out / "contrasts.csv").set_index(["policy", "contrast", "task"])
    for policy in FULL_POLICIES:
        for task in TASKS:
            groups = campaign.by_group[(policy, task)]
            pairs = [groups["paraphrase_direct"][j] - groups["paraphrase_ood"][j] for j in groups["paraphrase_direct"]]
            row = contrasts.loc[(policy, "paraphrased_direct_minus_ood", task)]
            assert row["estimate"] == pytest.approx(sum(pairs) / len(pairs)) and row["n_pairs"] == 10
    assert "`paraphrased_direct_minus_ood` (paraphrase_direct minus paraphrase_ood)" in text


def test_protocol_differences_from_the_cards(written):
    _, _, out, text = written
    section = text.split("## Protocol differences between policies")[1].split("\n## ")[0]
    lines = {line.split("**")[1]: line for line in section.splitlines() if line.startswith("- **")}
    assert "90 s timer (protocol 60 s)" in lines["VLA-0"] and "control at 10 Hz" in lines["VLA-0"]
    assert "pre-rollout assist" in lines["GR00T Full Fine-Tune"] and "EMA" in lines["GR00T Full Fine-Tune"]
    assert "EMA action filter, alpha 0.25" in lines["GR00T Frozen LLM"]
    assert "the protocol's settings" in lines["Pi0.5"] and "the protocol's settings" in lines["MolmoAct2"]
    settings = pd.read_csv(out / "protocol_settings.csv").set_index("policy")
    assert settings.loc["vla0", "timer_s"] == 90 and settings.loc["vla0", "control_hz"] == 10


def test_failure_totals_per_task_across_policies(written):
    campaign, _, _, text = written
    section = text.split("## Failures per task across policies")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in section.splitlines() if line.startswith("| ")}
    failed = sum(1 for r in campaign.rows if r["valid"] == "true" and r["success"] == "0")
    assert rows["all tasks"].rstrip(" |").endswith(f"{failed}/2892")
    counting = [r for r in campaign.rows if r["valid"] == "true" and r["task"] == "counting"]
    assert f"{sum(r['success'] == '0' for r in counting)}/{len(counting)} |" in rows["Counting"]


def test_limitations_and_attribution(written):
    text = written[3]
    assert "## Limitations" in text and "One bench" in text and "not pixel for pixel" in text
    assert "authors' released analysis code" in text and "published analysis" not in text
    assert "infrastructure fault is not a policy failure" not in text
    assert "72 invalid attempts" in text and "not_recorded" in text  # a CSV without invalid_reason


def test_invalid_attempts_by_policy_and_reason(tmp_path):
    columns = list(COLUMNS) + ["invalid_reason"]
    rows = [["a", "counting", "id", "E1", "1", "", "original", "", "true", ""],
            ["a", "counting", "id", "E1", "", "", "original", "", "false", "estop"],
            ["a", "counting", "id", "E2", "", "", "original", "", "false", "estop"],
            ["a", "counting", "id", "E3", "", "", "original", "", "false", "server_lost"],
            ["a", "counting", "id", "E3", "0", "", "original", "", "true", ""],
            ["b", "counting", "id", "E1", "", "", "original", "", "false", "operator_abort"],
            ["b", "counting", "id", "E1", "1", "", "original", "", "true", ""],
            ["b", "counting", "id", "E2", "1", "", "original", "", "false", "operator_invalidated: wrong scene"],
            ["b", "counting", "id", "E3", "", "", "original", "", "false", "console_lost"],
            ["b", "counting", "id", "E3", "", "", "original", "", "false", "console_lost"]]
    path = tmp_path / "o.csv"
    path.write_text(",".join(columns) + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
    got = invalid_attempt_table(load_outcomes(path)).set_index(["policy", "reason"])
    assert got.loc[("a", "estop"), "attempts"] == 2 and got.loc[("a", "estop"), "kind"] == "operator: e-stop, cause: not recorded"
    assert (got.loc[("a", "estop"), "trials_rerun"], got.loc[("a", "estop"), "trials_without_valid"]) == (1, 1)
    assert got.loc[("a", "server_lost"), "kind"] == "policy server fault"
    assert got.loc[("b", "operator_abort"), "kind"] == "operator: abort"
    assert got.loc[("b", "operator_invalidated"), "trials_without_valid"] == 1
    # the browser console's dead-man (issue 18): its own reason and kind, grouped like the others
    assert got.loc[("b", "console_lost"), "attempts"] == 2 and got.loc[("b", "console_lost"), "trials_without_valid"] == 1
    assert got.loc[("b", "console_lost"), "kind"] == "operator's console lost (dead-man hold)"
    assert len(got) == 5
