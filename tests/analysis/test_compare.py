"""Issue 38: `spabench compare`, the sequential comparison of two policies through the command line.

Decisions are checked against the hand computation (uniform prior: E = 2^m w_b! w_a! / (m + 1)!, the
first pair where E reaches 1/alpha, or 4/alpha in the hybrid; the final exact McNemar p-value as a
binomial sum), the pairing against reshuffled rows and a campaign's recorded order, and every bad
input against one clear error with nothing written.
"""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import counting_trials

from spabench.cli.main import main
from spabench.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "analysis" / "data" / "checkpoints_outcomes.csv"
FIELDS = ["policy", "task", "condition", "evaluation_id", "success", "valid"]
SIGNS = {"b": (0, 1), "a": (1, 0), "=": (1, 1), "0": (0, 0)}   # b: only b succeeds; a: only a; = both; 0 neither


def hand_evalue(b_wins: int, a_wins: int) -> Fraction:
    m = b_wins + a_wins
    return Fraction(2 ** m * math.factorial(b_wins) * math.factorial(a_wins), math.factorial(m + 1))


def hand_decision(signs: str, threshold: Fraction) -> tuple[str | None, int]:
    """(winner 'a'/'b' or None, pairs used) of the e-process alone."""
    wb = wa = 0
    for n, s in enumerate(signs, 1):
        wb += s == "b"
        wa += s == "a"
        if hand_evalue(wb, wa) >= threshold:
            return ("b" if wb > wa else "a"), n
    return None, len(signs)


def rows_for(signs: str, a: str = "ckpt_a", b: str = "ckpt_b") -> list[list[dict]]:
    """Rows grouped by evaluation: a's row, then b's, per sign."""
    return [[{"policy": policy, "task": "counting", "condition": "id", "evaluation_id": f"C-id-{i:03d}",
              "success": outcome, "valid": "true"} for policy, outcome in zip((a, b), SIGNS[s], strict=True)]
            for i, s in enumerate(signs)]


def write(path: Path, groups: list[list[dict]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(row for group in groups for row in group)
    return path


def run(capsys, *args: str) -> tuple[int, list[str], str]:
    code = main(["compare", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


# ---------------------------------------------------------------------------- hand-computed decisions

@pytest.mark.parametrize(("signs", "alpha"), [
    ("b" * 12, 0.05),                          # 2^m/(m+1): 16 after 7 (< 20), 256/9 after 8
    ("=0b=bb0bab=bbbb0bbbbb", 0.05),           # concordant pairs in between change nothing
    ("aabaaaaaaaab", 0.05),                    # a wins: decided for a
    ("bababababa", 0.05),                      # no difference: not decided
    ("a" * 16, 0.01),
])
def test_the_command_decides_as_the_hand_computation(tmp_path, capsys, signs, alpha):
    csv_path = write(tmp_path / "o.csv", rows_for(signs))
    winner, used = hand_decision(signs, 1 / Fraction(str(alpha)))
    code, lines, err = run(capsys, f"outcomes={csv_path}", "a=ckpt_a", "b=ckpt_b", f"alpha={alpha}")
    assert code == 0, err
    name = {"a": "ckpt_a", "b": "ckpt_b", None: "none"}[winner]
    assert lines[-1] == f"decision: {name} after {used} pairs"
    assert any(line.startswith("test: Beta(1,1)-mixture e-process") and f"alpha {alpha:g}" in line for line in lines)
    if winner is None:
        assert any("keep going" in line for line in lines)


def test_the_hybrid_final_test_decides_at_max_pairs(tmp_path, capsys):
    # 16 b, 4 a over 40 pairs: the e-process never reaches 4/alpha = 80; the exact McNemar p-value is
    # 2 P(X <= 4), X ~ Bin(20, 1/2) = 2 * 6196 / 2^20 = 0.0118, under the final test's level
    signs = "bbbba" * 4 + "=" * 20
    assert hand_decision(signs, Fraction(80))[0] is None
    p = Fraction(2 * sum(math.comb(20, k) for k in range(5)), 2 ** 20)
    csv_path = write(tmp_path / "o.csv", rows_for(signs))
    code, lines, _ = run(capsys, f"outcomes={csv_path}", "a=ckpt_a", "b=ckpt_b", "max_pairs=40")
    assert code == 0
    assert lines[-1] == "decision: ckpt_b after 40 pairs"
    final = next(line for line in lines if line.startswith("final exact McNemar at 40 pairs"))
    assert f"p = {float(p):.4g}" in final and "b won 16, a won 4" in final
    assert any(line.startswith("test: hybrid:") and "total alpha 0.05" in line for line in lines)
    # the same pairs short of max_pairs: the hybrid keeps going (no final test yet)
    short = write(tmp_path / "short.csv", rows_for(signs[:39]))
    code, lines, _ = run(capsys, f"outcomes={short}", "a=ckpt_a", "b=ckpt_b", "max_pairs=40")
    assert lines[-1] == "decision: none after 39 pairs" and any("keep going (up to max_pairs=40)" in line
                                                                for line in lines)


def test_verbose_prints_one_line_per_look_up_to_the_decision(tmp_path, capsys):
    signs = "=0b=bb0bab=bbbb0bbbbb"
    winner, used = hand_decision(signs, Fraction(20))
    csv_path = write(tmp_path / "o.csv", rows_for(signs))
    code, quiet, _ = run(capsys, f"outcomes={csv_path}", "a=ckpt_a", "b=ckpt_b")
    assert code == 0 and not any(line.startswith("look ") for line in quiet)
    for flag in ("--verbose", "verbose=true"):
        code, lines, _ = run(capsys, f"outcomes={csv_path}", "a=ckpt_a", "b=ckpt_b", flag)
        looks = [line for line in lines if line.startswith("look ")]
        assert code == 0 and len(looks) == used
        wb = wa = 0
        for n, (line, s) in enumerate(zip(looks, signs, strict=False), 1):
            wb += s == "b"
            wa += s == "a"
            assert line.startswith(f"look {n}: counting/id/C-id-{n - 1:03d}: ")
            assert f"(b won {wb}, a won {wa})" in line and f"e-value {float(hand_evalue(wb, wa)):.4g} of 20" in line
        assert looks[-1].endswith("decided: ckpt_b") and all(line.endswith("keep going") for line in looks[:-1])
        assert lines[-1] == f"decision: ckpt_b after {used} pairs"


def test_the_same_rows_in_another_order_within_an_evaluation_give_the_same_decision(tmp_path, capsys):
    rng = np.random.default_rng(38)
    signs = "".join(rng.choice(list("ab=0"), p=[0.15, 0.4, 0.25, 0.2], size=60))
    groups = rows_for(signs)
    for i in range(0, 60, 7):   # an invalid attempt re-run, and a third policy, in some evaluations
        groups[i].insert(0, {**groups[i][1], "success": "", "valid": "false"})
        groups[i].append({**groups[i][0], "policy": "other", "success": 1})
    reference_out = tmp_path / "ref"
    code, reference, _ = run(capsys, f"outcomes={write(tmp_path / 'o.csv', groups)}", "a=ckpt_a", "b=ckpt_b",
                             "max_pairs=60", f"out={reference_out}")
    assert code == 0 and reference[-1].startswith("decision: ckpt_b after ")
    evidence = pd.read_csv(reference_out / "evidence.csv")
    for k in range(4):
        shuffled = [[g[j] for j in rng.permutation(len(g))] for g in groups]
        out = tmp_path / f"s{k}"
        code, lines, _ = run(capsys, f"outcomes={write(tmp_path / f's{k}.csv', shuffled)}", "a=ckpt_a",
                             "b=ckpt_b", "max_pairs=60", f"out={out}")
        assert code == 0 and lines[-1] == reference[-1]
        pd.testing.assert_frame_equal(pd.read_csv(out / "evidence.csv"), evidence)


# ---------------------------------------------------------------------------- what it writes

def test_out_holds_the_evidence_csv_figure_and_summary(tmp_path, capsys):
    out = tmp_path / "cmp"
    code, lines, _ = run(capsys, f"outcomes={EXAMPLE}", "a=ckpt_a", "b=ckpt_b", "max_pairs=40", f"out={out}",
                         "figures.formats=[svg,png]")
    assert code == 0
    evidence = pd.read_csv(out / "evidence.csv")
    assert list(evidence["n"]) == list(range(1, 41)) and evidence["evaluation_id"].is_unique
    assert evidence["threshold"].eq(80).all()                     # 1 / (alpha / 4)
    decided_at = int(lines[-1].split()[3])
    assert evidence["decided"].tolist() == [False] * (decided_at - 1) + [True] * (41 - decided_at)
    wb, wa = (int(v) for v in evidence.loc[decided_at - 1, ["b_wins", "a_wins"]])
    assert evidence.loc[decided_at - 1, "e_value"] == pytest.approx(float(hand_evalue(wb, wa)), rel=1e-10)
    assert (out / "evidence.svg").stat().st_size > 0 and (out / "evidence.png").stat().st_size > 0
    svg = (out / "evidence.svg").read_text()
    assert "hybrid test" in svg and "alpha 0.05" in svg and "ckpt_b" in svg
    summary = (out / "compare.md").read_text()
    assert "Test: hybrid" in summary and "Alpha: 0.05" in summary and lines[-1] in summary


# ---------------------------------------------------------------------------- bad input

@pytest.mark.parametrize(("args", "message"), [
    (("a=ckpt_a",), "compare needs b=POLICY"),
    ((), "compare needs a=POLICY and b=POLICY"),
    (("a=ckpt_a", "b=nobody"), "policy b='nobody' has no valid rollout"),
    (("a=ckpt_a", "b=ckpt_b", "alpha=0.5"), r"alpha=0.5 must be in (0, 0.5)"),
    (("a=ckpt_a", "b=ckpt_b", "alpha=0"), r"alpha=0.0 must be in (0, 0.5)"),
    (("a=ckpt_a", "b=ckpt_b", "alpha=-0.1"), r"alpha=-0.1 must be in (0, 0.5)"),
    (("a=ckpt_a", "b=ckpt_b", "max_pairs=0"), "key 'max_pairs': 0"),
])
def test_bad_requests_are_one_clear_error_and_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "never"
    code, lines, err = run(capsys, f"outcomes={EXAMPLE}", *args, f"out={out}")
    assert code == 2 and err.count("spabench: error:") == 1 and message in err, err
    assert not out.exists() and not any(line.startswith("decision:") for line in lines)


def test_no_common_evaluation_is_one_clear_error(tmp_path, capsys):
    groups = rows_for("bbbb")
    for group in groups:
        group[1]["evaluation_id"] += "-elsewhere"
    code, _, err = run(capsys, f"outcomes={write(tmp_path / 'o.csv', groups)}", "a=ckpt_a", "b=ckpt_b",
                       f"out={tmp_path / 'never'}")
    assert code == 2 and err.count("spabench: error:") == 1 and "share no evaluation" in err
    assert not (tmp_path / "never").exists()


def test_an_unpaired_row_in_a_csv_is_one_clear_error(tmp_path, capsys):
    groups = rows_for("bbab=")
    groups[2] = groups[2][:1]     # a's rollout of C-id-002 has no b rollout
    code, _, err = run(capsys, f"outcomes={write(tmp_path / 'o.csv', groups)}", "a=ckpt_a", "b=ckpt_b",
                       f"out={tmp_path / 'never'}")
    assert code == 2 and err.count("spabench: error:") == 1
    assert "row 6, field 'evaluation_id'" in err and "C-id-002" in err and "no valid rollout of 'ckpt_b'" in err
    assert not (tmp_path / "never").exists()
    code, lines, _ = run(capsys, f"outcomes={tmp_path / 'o.csv'}", "a=ckpt_a", "b=ckpt_b", "unpaired=exclude")
    assert code == 0 and any("1 rollout(s) of ckpt_a or ckpt_b" in line for line in lines)
    assert lines[-1] == "decision: none after 4 pairs"


# ---------------------------------------------------------------------------- a campaign

def test_a_campaign_pairs_in_the_order_the_attempts_ended(tmp_path, capsys):
    """A real ledger: 12 evaluations planned a, b, a, b, ...; b's rollouts run first and in reverse,
    a's after them, one attempt invalid and re-run, two evaluations of b not run yet. The pairs take
    the order their evaluation's last rollout ended, invalid attempts are no evidence, and the
    pending pairs are left out (a live campaign)."""
    trials = counting_trials(12, ("ckpt_a", "ckpt_b"))
    campaign = tmp_path / "camp"
    ledger = Ledger.create(campaign / "ledger.sqlite", trials, "ab" * 32, {"campaign": "unit"})
    by_id = {t.trial_id: t for t in trials}
    outcome = {"ckpt_a": [0] * 12, "ckpt_b": [1] * 12}
    order = [f"E{i:04d}-P1" for i in range(11, 1, -1)] + [f"E{i:04d}-P0" for i in range(12)]
    for trial_id in order:
        if trial_id == "E0005-P0":
            bad = ledger.begin_attempt(trial_id)
            ledger.finish_attempt(bad, "invalid", "abort", invalid_reason="operator_abort")
        attempt = ledger.begin_attempt(trial_id)
        ledger.finish_attempt(attempt, "complete", "timer")
        success = bool(outcome[by_id[trial_id].policy][int(trial_id[1:5])])
        ledger.record_score(attempt, "alice", success, None if success else "grasp_failure")
    ledger.close()
    code, lines, err = run(capsys, f"campaign={campaign}", "a=ckpt_a", "b=ckpt_b", "--verbose")
    assert code == 0, err
    looks = [line for line in lines if line.startswith("look ")]
    # a's rollouts ended in evaluation order, after all of b's: pairs E0002, E0003, ...
    assert [line.split(": ")[1].split("/")[-1] for line in looks] == [f"E{i:04d}" for i in range(2, 10)]
    assert lines[-1] == "decision: ckpt_b after 8 pairs"   # b wins every pair: 2^8/9 >= 20
    assert any("2 rollout(s) of ckpt_a or ckpt_b without the other's" in line for line in lines)
