"""The paper's figures (Figs. 5-11): success rates with Wilson 95% whiskers, and failure-mode composition.

Each figure is written as 300 dpi PNG, PDF (TrueType fonts) and SVG. Drawn with matplotlib's
object API on the Agg canvas (no pyplot, no global backend switch), so the report runs headless and
never disturbs a caller's matplotlib state; matplotlib is imported only here, when figures are drawn.

Conventions of every bar figure: colours from the Okabe-Ito palette (palette.py), the trial count
`k/n` above every bar, a 0% bar drawn as a visible stub in its colour, the outer bounding box
computed from every label so nothing is clipped, and policies shown by their display names.
"""

from __future__ import annotations

import os
import textwrap
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from spabench.analysis import palette
from spabench.analysis.failures import FAILURE_MODE_ORDER, UNANNOTATED, failure_mode_label
from spabench.analysis.rates import ALL_TASKS, NON_RELATIONAL, NON_RELATIONAL_TASKS
from spabench.escaping import printable
from spabench.suite import vocabulary
from spabench.suite.vocabulary import TASKS

FORMATS = ("png", "pdf", "svg")
PNG_DPI = 300
ZERO_STUB = 1.2  # height (pp) of the stub that marks a 0% bar

# The protocol's published labels (spabench.suite.vocabulary), wrapped for the axes; the derived
# subsets and the legends of Figs. 7-8 name what the bars compare.
TASK_LABELS = {
    **{t: label.replace(" ", "\n") for t, label in vocabulary.TASK_LABELS.items()},
    ALL_TASKS: "All tasks", NON_RELATIONAL: "Aggregate\n(4 tasks)",
}
CONDITION_LABELS = {
    **vocabulary.CONDITION_LABELS,
    "ood_matched": "OOD spatial (matched)",
    "paraphrase_ood": "OOD spatial, paraphrase", "paraphrase_direct": "Direct control, paraphrase",
    "ood_paraphrase_subset": "OOD spatial, original", "direct_paraphrase_subset": "Direct control, original",
    "cross_task": "Transferred objects", "id_cross_task_subset": "ID, standard objects",
}
PARAPHRASE_CONDITIONS = ("ood_paraphrase_subset", "paraphrase_ood", "direct_paraphrase_subset",
                         "paraphrase_direct")
FAILURE_CONDITION = "ood"  # Fig. 11 decomposes the OOD failures


@dataclass(frozen=True)
class Bar:
    """One bar series: a legend label, a fill, an edge and a hatch, and one cell (or None) per group."""
    label: str
    color: str
    cells: list
    hatch: str | None = None


class Cells:
    """Summary rows indexed by (policy, task, condition): a dict lookup per bar instead of a filter."""

    def __init__(self, summary: pd.DataFrame):
        columns = ["policy", "task", "condition", "successes", "trials", "rate", "wilson_low", "wilson_high"]
        self._rows = {(r[0], r[1], r[2]): r for r in summary[columns].itertuples(index=False, name=None)}

    def get(self, policy: str, task: str, condition: str):
        return self._rows.get((policy, task, condition))

    def has(self, policy: str, task: str, condition: str) -> bool:
        return (policy, task, condition) in self._rows


def one_line(text: object) -> str:
    """A label on one line (spabench.escaping.printable); with text.parse_math off (RC) a `$` in a
    policy name is drawn literally, never parsed as TeX."""
    return printable(text)


def display(names: Mapping[str, str], policy: str) -> str:
    return one_line(names.get(policy, policy))


# ---------------------------------------------------------------- drawing primitives

# Every figure is laid out on a canvas with a wide white margin (inches) and cropped to its ink
# after the 300 dpi raster: one draw gives the PNG and the bounding box of the PDF/SVG, and a label
# can only be cut off if it runs past the margin, which `save` detects and handles.
MARGIN = 0.5
# Plot-area insets inside the margin (inches): left, right, bottom, top (ticks, title, legend).
INSETS = (0.75, 0.2, 0.65, 0.8)
MAX_WIDTH = 7.2  # a double-column figure


def _new_figure(width: float, height: float, insets: tuple[float, float, float, float] = INSETS):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    left, right, bottom, top = insets  # width/height include the insets; the plot keeps at least 1 x 0.6 in
    full_w = max(width, left + right + 1.0) + 2 * MARGIN
    full_h = max(height, bottom + top + 0.6) + 2 * MARGIN
    figure = Figure(figsize=(full_w, full_h), dpi=100)
    FigureCanvasAgg(figure)
    (ax,) = figure.subplots(1, 1, squeeze=False)[0]
    figure.subplots_adjust(left=(MARGIN + left) / full_w, right=1 - (MARGIN + right) / full_w,
                           bottom=(MARGIN + bottom) / full_h, top=1 - (MARGIN + top) / full_h)
    return figure, [ax]


def _style(ax, ylabel: bool = True) -> None:
    ax.set_ylim(0, 118)
    ax.set_yticks(range(0, 101, 20))
    ax.tick_params(axis="both", labelsize=8)
    ax.yaxis.grid(True, color="#E5E5E5", linewidth=0.7)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if ylabel:
        ax.set_ylabel("Success rate (%)", fontsize=9)


def draw_bars(ax, groups: Sequence[str], series: Sequence[Bar], title: str = "") -> list:
    """Grouped bars with Wilson whiskers and k/n above each bar; returns the legend handles.

    Bars and whiskers go in as one collection per series (one draw call each, not one per bar).
    """
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.patches import Patch

    x = np.arange(len(groups))
    width = 0.84 / max(len(series), 1)
    half, cap = width * 0.45, width * 0.22
    size = 5.5 if width * 72 * ax.figure.get_figwidth() / max(len(groups), 1) > 7 else 4.5
    handles, whiskers = [], []
    for i, bar in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width
        present = [j for j, cell in enumerate(bar.cells) if cell is not None]
        edge = palette.darker(bar.color, 0.55)
        handles.append(Patch(facecolor=bar.color, edgecolor=edge, hatch=bar.hatch, linewidth=0.5,
                             label=bar.label))
        if not present:
            continue
        xs = x[present] + offset
        cells = [bar.cells[j] for j in present]
        rate = np.array([100 * c[5] for c in cells])
        low = np.minimum(np.array([100 * c[6] for c in cells]), rate)   # float noise at 0% / 100%
        high = np.maximum(np.array([100 * c[7] for c in cells]), rate)
        heights = np.where(rate > 0, rate, ZERO_STUB)  # a 0% bar stays visible
        boxes = [[(xi - half, 0), (xi - half, h), (xi + half, h), (xi + half, 0)] for xi, h in zip(xs, heights)]
        ax.add_collection(PolyCollection(boxes, facecolors=bar.color, edgecolors=edge, linewidths=0.5,
                                         hatch=bar.hatch, zorder=2))
        for xi, lo, hi in zip(xs, low, high):
            whiskers += [[(xi, lo), (xi, hi)], [(xi - cap, lo), (xi + cap, lo)], [(xi - cap, hi), (xi + cap, hi)]]
        for xi, top, cell in zip(xs, np.maximum(high, heights), cells):
            ax.text(xi, top + 1.5, f"{int(cell[3])}/{int(cell[4])}", rotation=90, ha="center",
                    va="bottom", fontsize=size, color="#333333")
    ax.add_collection(LineCollection(whiskers, colors="#222222", linewidths=0.8, zorder=3))
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_xticks(x, [TASK_LABELS.get(g, textwrap.fill(str(g), 14)) for g in groups])
    _style(ax)
    if title:
        ax.set_title(title, fontsize=10, fontweight="bold", loc="left")
    ax._spabench_handles = handles
    return handles


def _legend(figure, axes, ncol: int | None = None) -> None:
    """One legend above the plot area, so it never hides a bar."""
    handles, labels = [], []
    for ax in axes:
        for h in getattr(ax, "_spabench_handles", []):
            if h.get_label() not in labels:
                handles.append(h)
                labels.append(h.get_label())
    if handles:
        axes[0].legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, 1.06), frameon=False,
                       fontsize=8, ncol=ncol or min(len(labels), 5), handlelength=1.4, columnspacing=1.2)


def save(figure, stem: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Draw the 300 dpi raster once, crop it to its ink (plus a small pad): that is the PNG, and
    the crop box, in inches, is the bounding box the PDF and SVG are written with."""
    from matplotlib.transforms import Bbox
    from PIL import Image

    figure.set_dpi(PNG_DPI)
    figure.canvas.draw()
    rgba = np.asarray(figure.canvas.buffer_rgba())
    ink = rgba.view(np.uint32)[..., 0] != np.uint32(0xFFFFFFFF)  # anything but opaque white
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    height, width = ink.shape
    pad = int(0.05 * PNG_DPI)
    if len(rows) == 0:
        y0, y1, x0, x1 = 0, height, 0, width
    else:
        y0, y1 = max(rows[0] - pad, 0), min(rows[-1] + 1 + pad, height)
        x0, x1 = max(cols[0] - pad, 0), min(cols[-1] + 1 + pad, width)
    if len(rows) and (rows[0] == 0 or cols[0] == 0 or rows[-1] == height - 1 or cols[-1] == width - 1):
        return _save_tight(figure, stem, formats)  # ink reaches the canvas edge: lay out again
    box = Bbox.from_extents(x0 / PNG_DPI, (height - y1) / PNG_DPI, x1 / PNG_DPI, (height - y0) / PNG_DPI)
    written = []
    for fmt in formats:
        path = stem.with_suffix("." + fmt)
        if fmt == "png":  # zlib level 1: level 6 took four times as long for 10% smaller files
            Image.fromarray(np.ascontiguousarray(rgba[y0:y1, x0:x1, :3])).save(
                path, format="png", compress_level=1, dpi=(PNG_DPI, PNG_DPI))
        else:
            figure.savefig(path, format=fmt, dpi=72, bbox_inches=box, metadata=_METADATA[fmt])
        written.append(path)
    return written


def _save_tight(figure, stem: Path, formats: Sequence[str]) -> list[Path]:
    """The slow path: matplotlib's own tight bounding box around every artist."""
    written = []
    for fmt in formats:
        path = stem.with_suffix("." + fmt)
        kwargs = {"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
        figure.savefig(path, format=fmt, dpi=PNG_DPI if fmt == "png" else 72, bbox_inches="tight",
                       pad_inches=0.05, metadata=_METADATA[fmt], **kwargs)
        written.append(path)
    return written


_METADATA = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None},
             "svg": {"Date": None}}
# Type 3 PDF fonts (matplotlib's default; embedding TrueType subsets tripled the PDF time) and SVG
# text kept as text (smaller, searchable, editable; the viewer supplies a sans-serif font).
RC = {"text.parse_math": False, "svg.hashsalt": "spabench", "svg.fonttype": "none",
      "font.family": "DejaVu Sans", "hatch.linewidth": 0.6}


def _width(groups: int, bars: int) -> float:
    """Plot width in inches: room per bar, at most a double-column figure."""
    return min(MAX_WIDTH, max(3.2, 0.4 + groups * (0.3 + 0.17 * bars)))


def policy_color(policies: Sequence[str], policy: str) -> str:
    """A policy keeps its colour in every figure: its place in the report's policy order."""
    return palette.POLICY_COLORS[list(policies).index(policy) % len(palette.POLICY_COLORS)]


def _per_policy(cells: Cells, policies: Sequence[str], names: Mapping[str, str], shown: Sequence[str],
                keys: Sequence[tuple[str, str]]) -> list[Bar]:
    """One series per shown policy over the groups' (task, condition) keys."""
    return [Bar(display(names, p), policy_color(policies, p), [cells.get(p, t, c) for t, c in keys])
            for p in shown]


def _panel(groups: Sequence[str], series: Sequence[Bar], title: str, height: float = 3.3,
           ncol: int | None = None):
    figure, (ax,) = _new_figure(_width(len(groups), len(series)), height)
    draw_bars(ax, groups, series, title)
    _legend(figure, [ax], ncol=ncol)
    return figure


# ---------------------------------------------------------------- the figures

def fig5_id_per_task(cells: Cells, policies: Sequence[str], names: Mapping[str, str]):
    """Fig. 5: ID spatial success per task, every policy (ID-only baselines included)."""
    shown = [p for p in policies if any(cells.has(p, t, "id") for t in TASKS)]
    if not shown:
        return None
    groups = [t for t in TASKS if any(cells.has(p, t, "id") for p in shown)] + [ALL_TASKS]
    series = _per_policy(cells, policies, names, shown, [(t, "id") for t in groups])
    return _panel(groups, series, "ID spatial grounding by task")


def fig6_ood_direct(cells: Cells, policies: Sequence[str], names: Mapping[str, str]):
    """Fig. 6: OOD spatial (50 per task, dark shade) and direct control (20, light) per task, one
    colour per policy."""
    shown = [p for p in policies if any(cells.has(p, t, c) for t in TASKS for c in ("ood", "direct"))]
    if not shown:
        return None
    groups = [t for t in TASKS if any(cells.has(p, t, c) for p in shown for c in ("ood", "direct"))]
    groups.append(ALL_TASKS)
    series = []
    for p in shown:
        dark, light = palette.shades(policy_color(policies, p))
        series.append(Bar(f"{display(names, p)}, OOD", dark, [cells.get(p, t, "ood") for t in groups]))
        series.append(Bar(f"{display(names, p)}, direct", light, [cells.get(p, t, "direct") for t in groups],
                          hatch="///"))
    return _panel(groups, series, "OOD spatial grounding and the direct-manipulation control", 3.4,
                  ncol=min(len(series), 6))


def fig7_paraphrase(cells: Cells, policies: Sequence[str], names: Mapping[str, str]):
    """Fig. 7: the four instruction conditions on the paraphrase subset (all tasks)."""
    shown = [p for p in policies if any(cells.has(p, ALL_TASKS, c) for c in PARAPHRASE_CONDITIONS)]
    if not shown:
        return None
    series = [Bar(CONDITION_LABELS[c], palette.PARAPHRASE_COLORS[i],
                  [cells.get(p, ALL_TASKS, c) for p in shown], hatch="///" if i % 2 else None)
              for i, c in enumerate(PARAPHRASE_CONDITIONS)]
    return _panel([display(names, p) for p in shown], series,
                  "Paraphrase subset: four conditions, same scenes", ncol=4)


def fig8_cross_task(cells: Cells, policies: Sequence[str], names: Mapping[str, str]):
    """Fig. 8: cross-task aggregate, ID with standard objects vs with transferred objects (five
    tasks, descriptive: the scenes are not paired)."""
    conditions = ("id_cross_task_subset", "cross_task")
    shown = [p for p in policies if cells.has(p, ALL_TASKS, "cross_task")]
    if not shown:
        return None
    series = [Bar(CONDITION_LABELS[c], palette.PAIR_COLORS[i], [cells.get(p, ALL_TASKS, c) for p in shown])
              for i, c in enumerate(conditions)]
    return _panel([display(names, p) for p in shown], series, "Cross-task objects (five tasks)", 3.2, ncol=2)


def fig9_no_intervention(cells: Cells, policies: Sequence[str], names: Mapping[str, str]):
    """Fig. 9: no-intervention success per task and the 80-trial aggregate of the four tasks."""
    tasks = [t for t in NON_RELATIONAL_TASKS if any(cells.has(p, t, "no_intervention") for p in policies)]
    if not tasks:
        return None
    shown = [p for p in policies if any(cells.has(p, t, "no_intervention") for t in tasks)]
    groups = tasks + [NON_RELATIONAL]
    series = _per_policy(cells, policies, names, shown, [(t, "no_intervention") for t in groups])
    return _panel(groups, series, "No intervention: success = no arm or gripper motion")


def fig10_relational_pair(cells: Cells, policies: Sequence[str], names: Mapping[str, str]):
    """Fig. 10: Relational Placement, no-movement vs movement-required on matched scenes."""
    task = "relational_placement"
    pair = [c for c in ("no_movement", "movement_required") if any(cells.has(p, task, c) for p in policies)]
    if not pair:
        return None
    shown = [p for p in policies if any(cells.has(p, task, c) for c in pair)]
    series = _per_policy(cells, policies, names, shown, [(task, c) for c in pair])
    return _panel([CONDITION_LABELS[c] for c in pair], series,
                  "Relational Placement")


def fig11_failure_modes(failures: pd.DataFrame, policies: Sequence[str], names: Mapping[str, str],
                        mode_labels: Mapping[str, str] | None = None):
    """Fig. 11: failure-mode composition of failed OOD rollouts, one bar per task x policy,
    normalised to 100%, with the number of failures n beside each bar."""
    rows = failures[(failures["condition"] == FAILURE_CONDITION) & (failures["task"] != ALL_TASKS)]
    if rows.empty:
        return None
    counts = rows.groupby(["task", "policy", "failure_mode"], sort=False)["count"].sum().to_dict()
    modes = [m for m in FAILURE_MODE_ORDER if rows["failure_mode"].eq(m).any()]
    bars = []  # (task, policy, {mode: count}, total)
    for task in TASKS:
        for policy in policies:
            mine = {m: counts.get((task, policy, m), 0) for m in modes}
            if sum(mine.values()):
                bars.append((task, policy, mine, sum(mine.values())))
    colors = {m: palette.UNANNOTATED_COLOR if m == UNANNOTATED
              else palette.FAILURE_COLORS[i % len(palette.FAILURE_COLORS)]
              for i, m in enumerate(FAILURE_MODE_ORDER)}
    labels = {m: failure_mode_label(m) for m in modes} | dict(mode_labels or {})
    longest = max(len(f"{one_line(TASK_LABELS[t])} | {display(names, p)}") for t, p, _, _ in bars)
    insets = (0.3 + 0.055 * longest, 0.5, 1.3, 0.4)
    figure, (ax,) = _new_figure(5.0 + insets[0], 0.25 + 0.2 * len(bars) + 0.12 * len({b[0] for b in bars}) + 1.7,
                                insets=insets)
    y, position, ticks = [], 0.0, []
    previous = None
    for task, policy, _, _ in bars:
        if previous is not None and task != previous:
            position += 0.6  # a gap between tasks
        y.append(position)
        ticks.append(f"{one_line(TASK_LABELS[task])} | {display(names, policy)}")
        previous = task
        position += 1.0
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    y = -np.array(y)
    left = np.zeros(len(bars))
    boxes, fills, handles = [], [], []
    for mode in modes:
        share = np.array([100 * c[mode] / total for _, _, c, total in bars])
        handles.append(Patch(facecolor=colors[mode], label=labels[mode]))
        for yi, li, si, (_, _, c, _) in zip(y, left, share, bars):
            if si <= 0:
                continue
            boxes.append([(li, yi - 0.39), (li, yi + 0.39), (li + si, yi + 0.39), (li + si, yi - 0.39)])
            fills.append(colors[mode])
            if si >= 7:
                ink = "white" if _luminance(colors[mode]) < 0.45 else "#222222"
                ax.text(li + si / 2, yi, str(c[mode]), ha="center", va="center", fontsize=5.5, color=ink)
        left += share
    ax.add_collection(PolyCollection(boxes, facecolors=fills, edgecolors="white", linewidths=0.4))
    ax.set_ylim(y.min() - 0.7, y.max() + 0.7)
    for yi, (_, _, _, total) in zip(y, bars):
        ax.text(101.5, yi, f"n={total}", va="center", fontsize=6.5)
    ax.set_yticks(y, ticks, fontsize=6.5)
    ax.set_xlim(0, 100)
    ax.set_xticks(range(0, 101, 20))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel("Share of failed OOD rollouts (%)", fontsize=9)
    ax.set_title("Failure-mode composition of OOD failures, by task and policy", fontsize=10,
                 fontweight="bold", loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.55 / (ax.get_position().height
                                                                               * figure.get_figheight())),
              frameon=False, fontsize=7, ncol=3)
    return figure


def _luminance(color: str) -> float:
    r, g, b = palette.hex_to_rgb(color)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# name -> (function, the paper's figure number); failure composition takes the failure table
FIGURES: dict[str, tuple] = {
    "fig5_id_per_task": (fig5_id_per_task, 5),
    "fig6_ood_direct_per_task": (fig6_ood_direct, 6),
    "fig7_paraphrase": (fig7_paraphrase, 7),
    "fig8_cross_task": (fig8_cross_task, 8),
    "fig9_no_intervention": (fig9_no_intervention, 9),
    "fig10_relational_movement": (fig10_relational_pair, 10),
    "fig11_failure_modes": (fig11_failure_modes, 11),
}
CAPTIONS: dict[str, str] = {
    "fig5_id_per_task": "Fig. 5. ID spatial success per task for every policy (ID-only baselines included).",
    "fig6_ood_direct_per_task": "Fig. 6. OOD spatial success (dark, 50 trials per task) and the "
                                "direct-manipulation control on 20 of those scenes (light, hatched).",
    "fig7_paraphrase": "Fig. 7. The four instruction conditions on the paraphrase subset (same scenes).",
    "fig8_cross_task": "Fig. 8. Cross-task aggregate: ID with standard objects vs transferred objects "
                       "(five tasks; descriptive, scenes not paired).",
    "fig9_no_intervention": "Fig. 9. No-intervention success per task and the 80-trial aggregate.",
    "fig10_relational_movement": "Fig. 10. Relational Placement: no-movement vs movement-required scenes.",
    "fig11_failure_modes": "Fig. 11. Failure-mode composition of failed OOD rollouts per task and policy "
                           "(normalised; n = failures).",
}


def draw(name: str, summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str],
         names: Mapping[str, str], mode_labels: Mapping[str, str] | None = None):
    """One figure by name (a Figure, or None when the outcomes hold nothing for it)."""
    import matplotlib

    function, _ = FIGURES[name]
    with matplotlib.rc_context(RC):
        if name == "fig11_failure_modes":
            return function(failures, list(policies), names, mode_labels)
        return function(Cells(summary), list(policies), names)


def _render(name: str, summary, failures, policies, names, out_dir, formats, mode_labels) -> list[Path] | None:
    figure = draw(name, summary, failures, policies, names, mode_labels)
    if figure is None:
        return None
    import matplotlib

    with matplotlib.rc_context(RC):
        return save(figure, Path(out_dir) / name, formats)


_JOB: tuple = ()  # the arguments of the figures being drawn, inherited by forked workers


def _render_forked(name: str):
    return name, _render(name, *_JOB)


def _single_threaded() -> bool:
    """No Python thread but this one: fork is then safe. (numpy's BLAS keeps idle native threads;
    BLAS libraries register fork handlers for them, so they do not count.)"""
    return threading.active_count() == 1


def default_jobs() -> int:
    """Worker processes for the figures: two where the machine has two CPUs or more (each figure is
    independent; forked workers inherit the imported matplotlib), else one."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def write_figures(summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str], out_dir: Path,
                  names: Mapping[str, str] | None = None, formats: Sequence[str] = FORMATS,
                  mode_labels: Mapping[str, str] | None = None, jobs: int | None = None) -> dict[str, list[Path]]:
    """Every figure that has data, in every format; returns {figure name: written paths} in the
    paper's order. With jobs > 1 the figures are drawn by forked worker processes (POSIX, and only
    from a single-threaded caller: forking a threaded process can deadlock); else one by one."""
    global _JOB
    import matplotlib
    from matplotlib import font_manager

    args = (summary, failures, list(policies), dict(names or {}), Path(out_dir), tuple(formats), mode_labels)
    jobs = default_jobs() if jobs is None else max(1, int(jobs))
    with matplotlib.rc_context(RC):  # load the fonts once, before any fork
        for weight in ("normal", "bold"):
            font_manager.get_font(font_manager.findfont(font_manager.FontProperties(weight=weight)))
    results: dict[str, list[Path] | None] = {}
    parallel = jobs > 1 and hasattr(os, "fork") and _single_threaded()
    if parallel:
        import multiprocessing

        _JOB = args
        try:
            # Pool forks its workers before it starts its own helper threads; Python's warning about
            # forking a multi-threaded process counts the idle BLAS threads too
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
                pool = multiprocessing.get_context("fork").Pool(jobs)
            with pool:
                # the heaviest first, so the two workers finish together
                order = sorted(FIGURES, key=lambda n: n not in ("fig6_ood_direct_per_task", "fig11_failure_modes"))
                results = dict(pool.map(_render_forked, order, chunksize=1))
        finally:
            _JOB = ()
    else:
        results = {name: _render(name, *args) for name in FIGURES}
    return {name: results[name] for name in FIGURES if results.get(name)}
