"""Colours of the figures: the Okabe-Ito palette, and the checks that keep it colour-blind safe.

Okabe & Ito (2002), "Color Universal Design", chose eight colours that stay distinct for the
common colour-vision deficiencies. The order below was picked so that series drawn next to each
other (policies in a group of bars, the four paraphrase conditions, neighbouring failure modes in
a stack) stay far apart after simulating deuteranopia and protanopia (Machado, Oliveira &
Fernandes 2009, severity 1.0, applied in linear sRGB), measured as CIEDE2000 colour difference
in CIELAB (D65). tests/analysis/test_analysis_palette.py holds the minimum.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

OKABE_ITO: dict[str, str] = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}
_O = OKABE_ITO

# One colour per policy, in the order policies appear (cycled beyond eight).
POLICY_COLORS: tuple[str, ...] = (_O["blue"], _O["vermillion"], _O["sky_blue"], _O["orange"],
                                  _O["reddish_purple"], _O["yellow"], _O["black"], _O["bluish_green"])
# Two-series figures (ID with standard vs transferred objects).
PAIR_COLORS: tuple[str, ...] = (_O["blue"], _O["orange"])
# Failure modes, in the vocabulary's order (the stack order of Fig. 11); beyond the eight
# Okabe-Ito colours three extras from Paul Tol's palettes; light grey is 'unannotated'.
FAILURE_COLORS: tuple[str, ...] = (_O["vermillion"], _O["reddish_purple"], _O["black"], _O["orange"],
                                   _O["blue"], _O["yellow"], _O["bluish_green"], _O["sky_blue"],
                                   "#DDCC77", "#AA4499", "#7A5A3A")
UNANNOTATED_COLOR = "#E7E7E7"
UNSAFE_COLOR = "#332288"   # Fig. 11: failures e-stopped as unsafe, apart from the annotated modes
LIGHT_MIX = 0.65   # light shade = this share of white mixed into the colour
DARK_FACTOR = 0.8  # dark shade = the colour scaled by this (sRGB)

# Machado et al. (2009) simulation matrices, severity 1.0, for linear RGB.
MACHADO: dict[str, np.ndarray] = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}


def hex_to_rgb(color: str) -> np.ndarray:
    """'#RRGGBB' -> sRGB floats in [0, 1]."""
    text = color.lstrip("#")
    if len(text) != 6:
        raise ValueError(f"colour {color!r} is not #RRGGBB")
    return np.array([int(text[i:i + 2], 16) / 255 for i in (0, 2, 4)])


def rgb_to_hex(rgb) -> str:
    return "#" + "".join(f"{int(round(255 * float(np.clip(c, 0, 1)))):02X}" for c in rgb)


def lighter(color: str, mix: float = LIGHT_MIX) -> str:
    """The light shade of a colour: `mix` of white blended in (sRGB)."""
    return rgb_to_hex(hex_to_rgb(color) * (1 - mix) + mix)


def darker(color: str, factor: float = DARK_FACTOR) -> str:
    """The dark shade of a colour (also used for bar edges)."""
    return rgb_to_hex(hex_to_rgb(color) * factor)


def shades(color: str) -> tuple[str, str]:
    """(dark, light) shades of one series colour: two conditions of one policy side by side."""
    return darker(color), lighter(color)


# The four paraphrase conditions: OOD original/paraphrase in blue, direct original/paraphrase in
# vermillion; the paraphrase is the light shade of its original.
PARAPHRASE_COLORS: tuple[str, ...] = (_O["blue"], lighter(_O["blue"], 0.6),
                                      _O["vermillion"], lighter(_O["vermillion"], 0.6))


def _to_linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _to_srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0, 1)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def simulate(color: str, deficiency: str) -> np.ndarray:
    """sRGB of `color` as seen with `deficiency` ('protanopia' | 'deuteranopia' | 'normal')."""
    srgb = hex_to_rgb(color)
    if deficiency == "normal":
        return srgb
    return _to_srgb(MACHADO[deficiency] @ _to_linear(srgb))


def srgb_to_lab(srgb) -> np.ndarray:
    """CIELAB (D65 white) of an sRGB colour."""
    linear = _to_linear(np.asarray(srgb, dtype=float))
    m = np.array([[0.4124564, 0.3575761, 0.1804375],
                  [0.2126729, 0.7151522, 0.0721750],
                  [0.0193339, 0.1191920, 0.9503041]])
    xyz = m @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def ciede2000(lab1, lab2) -> float:
    """CIEDE2000 colour difference (Sharma, Wu & Dalal 2005), kL = kC = kH = 1."""
    L1, a1, b1 = (float(v) for v in lab1)
    L2, a2, b2 = (float(v) for v in lab2)
    c_bar = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_bar ** 7 / (c_bar ** 7 + 25.0 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360 if c2p else 0.0
    dLp, dCp = L2 - L1, c2p - c1p
    if c1p * c2p == 0:
        dhp = 0.0
    else:
        dhp = h2p - h1p
        dhp = dhp - 360 if dhp > 180 else dhp + 360 if dhp < -180 else dhp
    dHp = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dhp / 2))
    Lp_bar, Cp_bar = (L1 + L2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hp_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hp_bar = (h1p + h2p) / 2
    else:
        hp_bar = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * np.cos(np.radians(hp_bar - 30)) + 0.24 * np.cos(np.radians(2 * hp_bar))
         + 0.32 * np.cos(np.radians(3 * hp_bar + 6)) - 0.20 * np.cos(np.radians(4 * hp_bar - 63)))
    d_theta = 30 * np.exp(-(((hp_bar - 275) / 25) ** 2))
    r_c = 2 * np.sqrt(Cp_bar ** 7 / (Cp_bar ** 7 + 25.0 ** 7))
    s_l = 1 + 0.015 * (Lp_bar - 50) ** 2 / np.sqrt(20 + (Lp_bar - 50) ** 2)
    s_c = 1 + 0.045 * Cp_bar
    s_h = 1 + 0.015 * Cp_bar * t
    r_t = -np.sin(np.radians(2 * d_theta)) * r_c
    return float(np.sqrt((dLp / s_l) ** 2 + (dCp / s_c) ** 2 + (dHp / s_h) ** 2
                         + r_t * (dCp / s_c) * (dHp / s_h)))


def difference(color1: str, color2: str, deficiency: str = "normal") -> float:
    """CIEDE2000 between two colours as seen with `deficiency`."""
    return ciede2000(srgb_to_lab(simulate(color1, deficiency)), srgb_to_lab(simulate(color2, deficiency)))


def min_adjacent_difference(colors, deficiency: str) -> tuple[float, tuple[str, str]]:
    """The smallest CIEDE2000 between neighbouring colours of a series list, and that pair."""
    pairs = list(pairwise(colors))
    scores = [difference(a, b, deficiency) for a, b in pairs]
    i = int(np.argmin(scores))
    return scores[i], pairs[i]
