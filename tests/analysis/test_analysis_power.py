"""`spabench power` reproduces textbook sample sizes and its exact power matches simulation."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from analysis_synthetic import write_csv

from spabench.analysis.exact import mcnemar_exact_counts, wilson_half_width
from spabench.analysis.power import (
    PowerConfig,
    connor_pairs,
    discordant_shares,
    exact_mcnemar_power,
    exact_pairs,
    run_power,
    wald_trials,
    wilson_trials,
)
from spabench.cli.main import main
from spabench.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("rate, half_width, textbook", [
    (0.5, 0.10, 97),   # the classic "n = 96.04 -> 97" for +-10 pp at p = 0.5
    (0.5, 0.05, 385),  # 384.1 -> 385, the survey-sampling standard
    (0.5, 0.03, 1068),
    (0.3, 0.05, 323),  # 1.96^2 * 0.21 / 0.0025 = 322.7
    (0.1, 0.03, 385),  # 1.96^2 * 0.09 / 0.0009 = 384.1
])
def test_normal_approximation_textbook_cases(rate, half_width, textbook):
    assert wald_trials(rate, half_width) == textbook


@pytest.mark.parametrize("rate, half_width", [(0.5, 0.10), (0.5, 0.05), (0.3, 0.05), (0.9, 0.05), (0.02, 0.02)])
def test_wilson_trials_is_the_smallest_n(rate, half_width):
    n = wilson_trials(rate, half_width)
    assert wilson_half_width(rate, n) <= half_width < wilson_half_width(rate, n - 1)


def test_wilson_needs_fewer_than_wald_at_half_and_more_near_zero():
    assert wilson_trials(0.5, 0.1) == 93 < wald_trials(0.5, 0.1)
    assert wilson_trials(0.02, 0.02) > wald_trials(0.02, 0.02)


def test_connor_hand_computed():
    # rates 0.3 vs 0.6, independent: psi = 0.3*0.4 + 0.6*0.7 = 0.54, d = -0.3
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    expected = math.ceil((z_a * math.sqrt(0.54) + z_b * math.sqrt(0.54 - 0.09)) ** 2 / 0.09)
    assert connor_pairs(0.3, 0.6) == expected == 45
    assert discordant_shares(0.3, 0.6) == pytest.approx((0.12, 0.42))
    assert connor_pairs(0.5, 0.7, 0.3) == math.ceil((z_a * math.sqrt(0.3) + z_b * math.sqrt(0.3 - 0.04)) ** 2 / 0.04)


@pytest.mark.slow
def test_exact_power_matches_simulation():
    rng = np.random.default_rng(11)
    for n, p10, p01 in ((50, 0.12, 0.42), (30, 0.25, 0.05), (80, 0.2, 0.1)):
        draws = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=20000)
        simulated = np.mean([mcnemar_exact_counts(b, c) <= 0.05 for b, c, _ in draws])
        assert exact_mcnemar_power(n, p10, p01) == pytest.approx(simulated, abs=0.012)


def test_exact_pairs_reaches_power_first_at_n():
    n = exact_pairs(0.3, 0.6)
    p10, p01 = discordant_shares(0.3, 0.6)
    assert exact_mcnemar_power(n, p10, p01) >= 0.8 > exact_mcnemar_power(n - 1, p10, p01)
    assert n >= connor_pairs(0.3, 0.6)  # the exact test is conservative
    assert exact_pairs(0.4, 0.4) is None


def test_config_errors():
    with pytest.raises(ConfigError, match="needs half_width"):
        PowerConfig()
    with pytest.raises(ConfigError, match="impossible"):
        PowerConfig(rates=(0.2, 0.7), discordance=0.1)
    with pytest.raises(ConfigError, match="half_width"):
        PowerConfig(half_width=0.6)


def test_cli_prints_textbook_answer(capsys):
    assert main(["power", "half_width=0.1"]) == 0
    text = capsys.readouterr().out
    assert "97 trials" in text and "Wilson: 93 trials" in text
    assert main(["power", "rates=[0.3,0.6]"]) == 0
    assert "Connor (1987) normal approximation: 45 pairs" in capsys.readouterr().out
    assert main(["power", "rates=[0.3,oops]"]) == 2


@pytest.mark.slow
def test_pilot_campaign(tmp_path, synthetic, capsys):
    csv_path = write_csv(tmp_path / "pilot.csv", [r for r in synthetic.rows if r["policy"] == "pi05"])
    assert run_power(PowerConfig(half_width=0.1, outcomes=csv_path)) == 0
    text = capsys.readouterr().out
    assert "pi05" in text and "direct_minus_ood" in text and "pairs now" in text
    assert text.count("\n") > 60  # one line per cell


# ---------------------------------------------------------------------------- issue 38: sequential, pilots

def test_expected_pairs_hand_computed_when_b_wins_every_pair():
    """Every pair discordant for b: 2^k/(k+1) reaches the hybrid's 4/alpha = 80 first at k = 10
    (1024/11) and the pure test's 20 at k = 8 (256/9), on every simulated path."""
    from spabench.analysis.sequential import expected_pairs

    hybrid = expected_pairs(0.0, 1.0, 40, 0.05, hybrid=True, paths=200)
    pure = expected_pairs(0.0, 1.0, 40, 0.05, hybrid=False, paths=200)
    assert (hybrid.mean, hybrid.median, hybrid.right, hybrid.wrong) == (10, 10, 1.0, 0.0)
    assert (pure.mean, pure.median, pure.right) == (8, 8, 1.0)
    # 9 pairs: the e-process never reaches 80 (512/10), the final exact McNemar (p = 2^-8) decides
    assert expected_pairs(0.0, 1.0, 9, 0.05, paths=50).mean == 9 and expected_pairs(0.0, 1.0, 9, paths=50).right == 1


def test_power_and_the_benchmark_simulate_with_the_same_code():
    import importlib.util

    from spabench.analysis.sequential import decide_paths, simulate_pairs

    spec = importlib.util.spec_from_file_location("bench_sequential", REPO / "benchmarks" / "sequential.py")
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    a, b = bench.simulate(0.86, 0.5, 120, 300, 7)
    a2, b2 = simulate_pairs(0.86 * 0.5, 0.14 * 0.5, 0.86 * 0.5, 120, 300, 7)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    assert bench.decide is not None and all(np.array_equal(x, y) for x, y in
                                            zip(bench.decide(a, b, 0.05, 120), decide_paths(a, b, 0.05, 120), strict=True))


def test_rates_report_the_pairs_under_the_sequential_rule(capsys):
    from spabench.analysis.power import SEQUENTIAL_PATHS, SEQUENTIAL_SEED
    from spabench.analysis.sequential import expected_pairs

    assert main(["power", "rates=[0.3,0.6]"]) == 0
    text = capsys.readouterr().out
    n = exact_pairs(0.3, 0.6)
    e = expected_pairs(*discordant_shares(0.3, 0.6), n, 0.05, paths=SEQUENTIAL_PATHS, seed=SEQUENTIAL_SEED)
    assert f"sequential rule, `compare max_pairs={n}` (the hybrid): expected {e.mean:.0f} pairs" in text
    assert e.mean < n and abs(e.right - exact_mcnemar_power(n, *discordant_shares(0.3, 0.6))) < 0.04
    assert main(["power", "rates=[0.4,0.4]"]) == 0
    assert "no difference assumed" in capsys.readouterr().out


def _pilot_rows(counts: dict[tuple[str, str], tuple[int, int]]) -> list[dict]:
    rows = []
    for (policy, condition), (successes, trials) in counts.items():
        rows += [{"policy": policy, "task": "counting", "condition": condition, "evaluation_id": f"C-{condition}-{i:02d}",
                  "success": int(i < successes), "valid": "true"} for i in range(trials)]
    return rows


def test_a_thin_pilot_cell_is_warned_about_and_planned_at_its_interval_bound(tmp_path, capsys):
    """Before: a 0/20 pilot cell printed 'needed 16' (the Wilson n at rate 0) and nothing else."""
    from spabench.analysis.exact import wilson

    csv_path = write_csv(tmp_path / "pilot.csv", _pilot_rows({("p", "id"): (0, 20), ("p", "no_intervention"): (2, 3),
                                                              ("q", "id"): (10, 20)}))
    assert main(["power", f"outcomes={csv_path}", "half_width=0.1"]) == 0
    text = capsys.readouterr().out
    zero = next(line for line in text.splitlines() if line.split()[:3] == ["p", "counting", "id"])
    high = float(np.asarray(wilson(0, 20)[1]))
    assert zero.split()[-3:] == ["16", str(wilson_trials(high, 0.1)), "!"] and wilson_trials(high, 0.1) > 40
    middle = next(line for line in text.splitlines() if line.split()[:3] == ["q", "counting", "id"])
    assert not middle.endswith("!")
    warning = next(line for line in text.splitlines() if line.startswith("warning: 2 pilot cell(s)"))
    assert "p counting id 0/20" in warning and "p counting no_intervention 2/3" in warning
    assert "q counting id" not in warning
    assert "a full campaign (the protocol's 900 trials per policy) for its 2 policies: 1,800 trials" in text
    assert "bench time unknown: an outcomes CSV holds no attempt times" in text


def test_a_campaign_pilot_gives_the_full_campaign_bench_time(tmp_path, capsys):
    """A real ledger whose attempts started every 120 s with a one-hour break, one attempt invalid and
    re-run: 13 attempts for 12 valid trials. A full campaign for its two policies: 1,800 trials x 13/12
    attempts x 120 s = 65.0 h."""
    import sqlite3

    from analysis_synthetic import counting_trials

    from spabench.ledger import Ledger

    trials = counting_trials(6, ("p", "q"))
    campaign = tmp_path / "pilot"
    ledger = Ledger.create(campaign / "ledger.sqlite", trials, "ab" * 32, {"campaign": "unit"})
    attempts = []
    for n, trial in enumerate(trials):
        if n == 3:
            bad = ledger.begin_attempt(trial.trial_id)
            ledger.finish_attempt(bad, "invalid", "abort", invalid_reason="operator_abort")
            attempts.append(bad)
        attempt = ledger.begin_attempt(trial.trial_id)
        ledger.finish_attempt(attempt, "complete", "timer")
        ledger.record_score(attempt, "alice", n % 2 == 0, None if n % 2 == 0 else "grasp_failure")
        attempts.append(attempt)
    ledger.close()
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:   # the pilot's clock: 120 s apart, a break after 7
        for k, attempt in enumerate(attempts):
            start = 1_800_000_000 + 120 * k + (3600 if k >= 7 else 0)
            conn.execute("UPDATE attempts SET started_at = ?, ended_at = ? WHERE attempt_id = ?",
                         (_iso(start), _iso(start + 70), attempt))
    assert main(["power", f"campaign={campaign}"]) == 0
    text = capsys.readouterr().out
    assert "for its 2 policies: 1,800 trials, about 65.0 h at the bench" in text
    assert "120 s per attempt" in text and "1.08 attempts per valid trial" in text and "over 13 attempts" in text


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds")
