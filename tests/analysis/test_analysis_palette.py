"""The figures' colours stay distinct for colour-blind readers.

Metric: CIEDE2000 (CIELAB, D65) between series drawn next to each other, after simulating
deuteranopia and protanopia with the Machado et al. (2009) matrices at severity 1.0. CIEDE2000 is
checked against Sharma, Wu & Dalal's published test pairs first, so the threshold means what it says.
"""

from __future__ import annotations

import pytest

from spabench.analysis import palette
from spabench.analysis.failures import FAILURE_MODE_ORDER

MIN_ADJACENT = 20.0  # CIEDE2000; main measured 12 (policies) and 9.6 (paraphrase) under deuteranopia
DEFICIENCIES = ("normal", "deuteranopia", "protanopia")


@pytest.mark.parametrize("lab1, lab2, expected", [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
])
def test_ciede2000_reproduces_sharma_test_pairs(lab1, lab2, expected):
    assert palette.ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert palette.ciede2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)


def test_simulation_collapses_red_green():
    """The Machado matrices do what they should: pure red and green become far closer to each other
    for a deuteranope than for normal vision (a broken simulation would make the test vacuous)."""
    normal = palette.difference("#FF0000", "#00FF00", "normal")
    assert palette.difference("#FF0000", "#00FF00", "deuteranopia") < normal / 2
    assert palette.difference("#FF0000", "#00FF00", "protanopia") < normal / 2
    assert palette.srgb_to_lab(palette.hex_to_rgb("#FFFFFF")) == pytest.approx([100, 0, 0], abs=1e-3)


def _series_lists() -> dict[str, list[str]]:
    policies = list(palette.POLICY_COLORS) + [palette.POLICY_COLORS[0]]  # cycled beyond eight
    shaded = [shade for c in palette.POLICY_COLORS[:5] for shade in palette.shades(c)]  # Fig. 6
    modes = [palette.FAILURE_COLORS[i] for i, m in enumerate(FAILURE_MODE_ORDER[:-2])]
    modes += [palette.UNSAFE_COLOR, palette.UNANNOTATED_COLOR]   # Fig. 11's order: ..., unsafe, unannotated
    return {"policies": policies, "policy shades (Fig. 6)": shaded,
            "paraphrase conditions (Fig. 7)": list(palette.PARAPHRASE_COLORS),
            "pair (Fig. 8)": list(palette.PAIR_COLORS), "failure modes (Fig. 11)": modes}


@pytest.mark.parametrize("deficiency", DEFICIENCIES)
@pytest.mark.parametrize("series", list(_series_lists()))
def test_adjacent_series_stay_distinct(series, deficiency):
    colors = _series_lists()[series]
    smallest, pair = palette.min_adjacent_difference(colors, deficiency)
    assert smallest >= MIN_ADJACENT, f"{series}: {pair} differ by only {smallest:.1f} ({deficiency})"


def test_palette_is_okabe_ito():
    assert set(palette.POLICY_COLORS) == set(palette.OKABE_ITO.values())
    assert set(palette.PARAPHRASE_COLORS[::2]) <= set(palette.OKABE_ITO.values())
