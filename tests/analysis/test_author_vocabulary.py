"""Outcomes in the authors' words (their sheets' task, condition, policy and failure-mode strings) load
beside spabench's names, and the report prints the protocol's published labels.

Measured on main: a `failure_mode` of `Wrong target` or `Correct target, incorrect spatial outcome`
stopped the report with "unknown failure mode".
"""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from spabench.analysis.outcomes import load_outcomes
from spabench.analysis.report import analyse, write_report
from spabench.errors import DataError
from spabench.suite import vocabulary as V

HEADER = ["policy", "task", "condition", "evaluation_id", "matched_group", "success", "failure_mode",
          "paraphrase_of"]


def _write(path, rows):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        w.writerows(rows)
    return path


def test_measured_on_main_authors_failure_modes_are_accepted(tmp_path):
    path = _write(tmp_path / "o.csv", [
        ["Pi0.5", "Relational Placement", "Concept/compositional transfer", "e1", "m1", "0", "Wrong target", ""],
        ["Pi0.5", "Relational Placement", "Concept/compositional transfer", "e2", "m2", "0",
         "Correct target, incorrect spatial outcome", ""],
    ])
    frame = load_outcomes(path)
    assert list(frame["failure_mode"]) == ["wrong_target", "correct_target_incorrect_spatial_outcome"]
    assert set(frame["policy"]) == {"pi05"} and set(frame["condition"]) == {"ood"}


@pytest.mark.parametrize("text,kind,expected", [
    ("State Recognition", "task", "object_state"), ("physical states", "task", "object_state"),
    ("Size Recognition", "task", "relative_size"), ("Referential Disambiguation", "task", "referential_description"),
    ("Ordinal Reference Ordering", "task", "ordinal_position"), ("COUNTING", "task", "counting"),
    ("Object State", "task", "object_state"), ("relative_size", "task", "relative_size"),
    ("Incorrect spatial outcome", "failure_mode", "correct_target_incorrect_spatial_outcome"),
    ("Other execution failure", "failure_mode", "other_execution_failure"),
    ("release / retention failure", "failure_mode", "release_retention_failure"),
    ("Timeout or incomplete execution", "failure_mode", "timeout_or_incomplete"),
    ("premature_release_or_drop", "failure_mode", "premature_release_or_drop"),
])
def test_names_in_any_spelling(text, kind, expected):
    lookup = {"task": V.task_name, "failure_mode": V.failure_mode_name}[kind]
    assert lookup(text) == expected


@pytest.mark.parametrize("text,task,para,expected", [
    ("In-distribution concept baseline", "counting", None, "id"),
    ("Concept/compositional transfer", "counting", None, "ood"),
    ("Matched manipulation control", "counting", None, "direct"),
    ("Language robustness", "counting", "ood", "paraphrase_ood"),
    ("Language robustness", "counting", "Matched manipulation control", "paraphrase_direct"),
    ("Language robustness", "counting", None, None),
    ("Novel-object state reasoning", "object_state", None, "novel_object"),
    ("Cross-task ordinal transfer - red block target", "ordinal_position", None, "cross_task"),
    ("Cross-task airplane counterfactual", "referential_description", None, "cross_task"),
    ("Goal already satisfied / no movement", "counting", None, "no_intervention"),
    ("Goal already satisfied / no movement", "relational_placement", None, "no_movement"),
    ("No valid target / no movement", "object_state", None, "no_intervention"),
    ("Invalid ordinal / no-movement diagnostic", "ordinal_position", None, "no_intervention"),
    ("No valid candidate category / no movement", "referential_description", None, "no_intervention"),
    ("Violated-relation correction control", "relational_placement", None, "movement_required"),
    ("paraphrase_direct", "counting", None, "paraphrase_direct"),
])
def test_condition_strings(text, task, para, expected):
    assert V.condition_name(text, task, para) == expected


def test_policy_names():
    assert [V.policy_name(p) for p in ("MolmoAct2", "Pi0.5", "GR00T Frozen LLM", "GR00T Full Fine-Tune",
                                       "VLA-0", "my_policy")] == \
        ["molmoact2", "pi05", "groot_fllm", "groot_fft", "vla0", "my_policy"]


def test_unknown_label_is_one_error_with_the_allowed_values(tmp_path):
    path = _write(tmp_path / "o.csv", [["Pi0.5", "Counting", "Concept/compositional transfer", "e1", "m1", "0",
                                        "Gripper sneezed", ""]])
    with pytest.raises(DataError) as err:
        load_outcomes(path)
    text = str(err.value)
    assert "row 2" in text and "failure_mode" in text and "Gripper sneezed" in text
    assert "Wrong target" in text and "wrong_target" in text
    bad = _write(tmp_path / "t.csv", [["Pi0.5", "Juggling", "ood", "e1", "m1", "1", "", ""]])
    with pytest.raises(DataError, match="unknown task 'Juggling'.*State Recognition"):
        load_outcomes(bad)
    lang = _write(tmp_path / "l.csv", [["Pi0.5", "Counting", "Language robustness", "e1", "m1", "1", "", ""]])
    with pytest.raises(DataError, match="paraphrase_of"):
        load_outcomes(lang)


@pytest.mark.slow
def test_report_shows_published_labels(tmp_path):
    rows = []
    for i in range(4):
        rows.append(["GR00T Frozen LLM", "State Recognition", "Concept/compositional transfer", f"o{i}", f"m{i}",
                     "0", "Wrong target" if i % 2 else "Grasp failure", ""])
        rows.append(["GR00T Frozen LLM", "State Recognition", "Matched manipulation control", f"o{i}", f"m{i}",
                     "1", "", ""])
    path = _write(tmp_path / "o.csv", rows)
    analysis = analyse(load_outcomes(path), n_resamples=200, seed=1)
    write_report(analysis, tmp_path / "out")
    failures = pd.read_csv(tmp_path / "out" / "failure_modes.csv")
    assert {"Wrong target", "Grasp failure"} <= set(failures["label"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| Wrong target |" in md and "| Grasp failure |" in md
    assert "Object State" in md and "OOD spatial" in md


@pytest.mark.slow
def test_an_authors_csv_reproduces_published_rates_gaps_and_failure_counts(tmp_path):
    """A CSV in the authors' words: 88/120 ID -> 73.3% [64.8, 80.4]; 0/50 OOD -> 0.0% [0.0, 7.1]
    (the protocol's published examples); the matched gap is direct minus OOD on the same scenes; the
    failure-mode counts come back under the published labels."""
    tasks = ["State Recognition", "Size Recognition", "Relational Placement", "Referential Disambiguation",
             "Ordinal Reference Ordering", "Counting"]
    rows = []
    for t, task in enumerate(tasks):
        for i in range(20):   # 88 of 120 ID successes: 15,15,15,15,14,14
            ok = i < (15 if t < 4 else 14)
            rows.append(["MolmoAct2", task, "In-distribution concept baseline", f"id{t}-{i}", "", int(ok),
                         "" if ok else "Grasp failure", ""])
    for i in range(50):       # Object State OOD: 0/50; 48 wrong-instance, 2 release failures
        rows.append(["MolmoAct2", "Physical States", "Concept/compositional transfer", f"ood{i}", f"m{i}", 0,
                     "Wrong instance" if i < 48 else "Release/retention failure", ""])
    for i in range(20):       # direct on 20 of those scenes: 16 successes
        rows.append(["MolmoAct2", "Physical States", "Matched manipulation control", f"dir{i}", f"m{i}",
                     int(i < 16), "" if i < 16 else "Incorrect spatial outcome", ""])
    for i in range(10):       # paraphrases on 10 of them
        rows.append(["MolmoAct2", "Physical States", "Language robustness", f"pood{i}", f"m{i}", 0, "No action",
                     "Concept/compositional transfer"])
        rows.append(["MolmoAct2", "Physical States", "Language robustness (direct prompt)", f"pdir{i}", f"m{i}",
                     1, "", ""])
    path = _write(tmp_path / "authors.csv", rows)
    analysis = analyse(load_outcomes(path), n_resamples=20_000, seed=20260906)
    write_report(analysis, tmp_path / "out")
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")

    def rate(task, condition):
        r = summary[(summary["policy"] == "molmoact2") & (summary["task"] == task) & (summary["condition"] == condition)]
        (row,) = r.itertuples()
        return row.successes, row.trials, round(100 * row.wilson_low, 1), round(100 * row.wilson_high, 1)

    assert rate("all", "id") == (88, 120, 64.8, 80.4)
    assert rate("object_state", "ood") == (0, 50, 0.0, 7.1)
    contrasts = pd.read_csv(tmp_path / "out" / "contrasts.csv")
    gap = contrasts[(contrasts["contrast"] == "direct_minus_ood") & (contrasts["task"] == "object_state")].iloc[0]
    assert gap["estimate"] == pytest.approx(0.8) and gap["n_pairs"] == 20
    assert gap["ci_low"] < 0.8 < gap["ci_high"] and gap["ci_method"] == "tango_score"
    assert not gap["degenerate"]
    para = contrasts[(contrasts["contrast"] == "paraphrase_minus_original_direct")
                     & (contrasts["task"] == "object_state")].iloc[0]
    # all 10 pairs differ alike (0): a real interval around 0, not a zero-width or missing one
    assert not para["degenerate"] and para["ci_low"] < 0 < para["ci_high"]
    failures = pd.read_csv(tmp_path / "out" / "failure_modes.csv")
    ood = failures[(failures["task"] == "object_state") & (failures["condition"] == "ood")]
    assert dict(zip(ood["label"], ood["count"], strict=True)) == {"Wrong target (wrong instance)": 48,
                                                     "Release/retention failure": 2}
    md = (tmp_path / "out" / "report.md").read_text()
    assert "degenerate bootstrap" not in md and "MC error" not in md and "Tango" in md
