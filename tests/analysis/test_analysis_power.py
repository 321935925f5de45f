"""`spabench power` reproduces textbook sample sizes and its exact power matches simulation."""

from __future__ import annotations

import math

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
