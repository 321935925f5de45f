"""The paper's figures (Figs. 5-11): success rates with Wilson 95% whiskers, and failure-mode composition.

Each figure is laid out once on a `drawing.Canvas` (points, measured with the font's own advances)
and written as 300 dpi PNG, PDF (embedded TrueType subsets) and SVG (text kept as text) by the three
small writers in `spabench.analysis.drawing`. matplotlib is not used: its artist machinery cost more
than a second of CPU for the report's 21 files, and these figures need only bars, lines and text.

Conventions of every bar figure: colours from the Okabe-Ito palette (palette.py), the trial count
`k/n` above every bar, a 0% bar drawn as a visible stub in its colour, the title and the legend
above the plot (never over a bar), the page sized to its content so nothing is clipped, and
policies shown by their display names.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from spabench.analysis import palette
from spabench.analysis.drawing import fonts
from spabench.analysis.drawing.canvas import Canvas
from spabench.analysis.failures import FAILURE_MODE_ORDER, UNANNOTATED, failure_mode_label
from spabench.analysis.rates import ALL_TASKS, NON_RELATIONAL, NON_RELATIONAL_TASKS, summary_cells
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
    """Summary cells by (policy, task, condition) (rates.summary_cells: successes, trials, rate,
    wilson_low, wilson_high): a dict lookup per bar instead of a filter."""

    def __init__(self, summary: pd.DataFrame):
        self._rows = summary_cells(summary)

    def get(self, policy: str, task: str, condition: str):
        return self._rows.get((policy, task, condition))

    def has(self, policy: str, task: str, condition: str) -> bool:
        return (policy, task, condition) in self._rows


def one_line(text: object) -> str:
    """A label on one line (spabench.escaping.printable); drawn literally in every format."""
    return printable(text)


def display(names: Mapping[str, str], policy: str) -> str:
    return one_line(names.get(policy, policy))


# ---------------------------------------------------------------- layout (points, y down)

INCH = 72.0
Y_TOP = 118.0           # the value axis runs to 118 so k/n fits above a 100% bar
PLOT_HEIGHT = 1.95 * INCH
MAX_PLOT_WIDTH = 6.25 * INCH   # with the axis labels, a double-column figure (7.2 in)
TICK = 3.5              # tick length and the gap from tick to label
SPINE = "#000000"
GRID = "#E5E5E5"
WHISKER = "#222222"
COUNT_INK = "#333333"
SIZES = {"tick": 8.0, "axis": 9.0, "title": 10.0, "legend": 8.0}


def _width(groups: int, bars: int) -> float:
    """Plot width in points: room per bar, at most a double-column figure."""
    return min(MAX_PLOT_WIDTH, max(2.5 * INCH, groups * (0.3 + 0.17 * bars) * INCH))


def _value_axis(canvas: Canvas, height: float, y_of) -> float:
    """Grid, left spine, ticks 0-100 and the axis title; returns the leftmost x used."""
    face = fonts.face("normal")
    size = SIZES["tick"]
    labels = [str(v) for v in range(0, 101, 20)]
    widest = max(face.width(label, size) for label in labels)
    for value, label in zip(range(0, 101, 20), labels):
        y = y_of(value)
        canvas.line([(-TICK, y), (0, y)], SPINE, 0.8, role="tick")
        canvas.text(-2 * TICK, y, label, size, align="end", valign="center", role="value_label")
    canvas.line([(0, 0), (0, height)], SPINE, 0.8, role="spine")
    x = -2 * TICK - widest - 4.0
    title = canvas.text(x, height / 2, "Success rate (%)", SIZES["axis"], align="middle", valign="bottom",
                        rotation=90, role="axis_title")
    return title.extent()[0]


def _legend(canvas: Canvas, entries: list[tuple[str, str, str | None, str | None]], left: float, bottom: float,
            available: float, ncol: int, above: bool = True, by_column: bool = False) -> float:
    """A legend of (label, fill, edge, hatch) entries in at most `ncol` columns, narrowed until it
    fits `available` points, filled row by row (or column by column: Fig. 6 keeps each policy's
    OOD/direct pair in one column); placed with its bottom (above=True) or top edge at `bottom`.
    Returns the legend's far edge (top or bottom)."""
    if not entries:
        return bottom
    face, size = fonts.face("normal"), SIZES["legend"]
    handle_w, handle_h, gap, spacing, pitch = 1.4 * size, 0.7 * size, 0.6 * size, 1.2 * size, 1.45 * size
    widths = [handle_w + gap + face.width(label, size) for label, *_ in entries]
    ncol = max(1, min(ncol, len(entries)))
    while True:
        rows = -(-len(entries) // ncol)
        place = [(i % rows, i // rows) if by_column else divmod(i, ncol) for i in range(len(entries))]
        columns = [max(w for w, (_, c) in zip(widths, place) if c == col) for col in range(max(c for _, c in place) + 1)]
        total = sum(columns) + spacing * (len(columns) - 1)
        if total <= available or ncol == 1:
            break
        ncol -= 1
    top = bottom - rows * pitch if above else bottom
    for (label, fill, edge, hatch), (row, col) in zip(entries, place):
        x = left + sum(columns[:col]) + spacing * col
        centre = top + (row + 0.5) * pitch
        canvas.rect(x, centre - handle_h / 2, handle_w, handle_h, fill, edge, 0.5 if edge else 0.0, hatch,
                    role="legend_handle")
        canvas.text(x + handle_w + gap, centre, label, size, valign="center", role="legend_label")
    return top if above else top + rows * pitch


def bar_chart(groups: Sequence[str], series: Sequence[Bar], title: str, ncol: int | None = None,
              legend_by_column: bool = False) -> Canvas:
    """Grouped bars with Wilson whiskers and k/n above each bar, title and legend above the plot.

    Rectangles of role "bar" carry (rate, successes, trials, low, high) of their cell."""
    canvas = Canvas()
    n_groups, n_series = len(groups), max(len(series), 1)
    width, height = _width(n_groups, n_series), PLOT_HEIGHT
    unit = width / max(n_groups, 1)

    def y_of(value: float) -> float:
        return height * (1 - value / Y_TOP)

    for value in range(20, 101, 20):
        canvas.line([(0, y_of(value)), (width, y_of(value))], GRID, 0.7, role="grid")
    slot = 0.84 / n_series
    half, cap = slot * 0.45 * unit, slot * 0.22 * unit
    size = 5.5 if slot * unit > 7 else 4.5
    label_top = 0.0
    for i, bar in enumerate(series):
        offset = (i - (n_series - 1) / 2) * slot
        edge = palette.darker(bar.color, 0.55)
        hatch = edge if bar.hatch else None
        for j, cell in enumerate(bar.cells):
            if cell is None:
                continue
            successes, trials, share, wilson_low, wilson_high = cell
            rate, low, high = 100 * share, min(100 * wilson_low, 100 * share), max(100 * wilson_high, 100 * share)
            shown = rate if rate > 0 else ZERO_STUB   # a 0% bar stays visible
            x = (j + 0.5 + offset) * unit
            canvas.rect(x - half, y_of(shown), 2 * half, y_of(0) - y_of(shown), bar.color, edge, 0.5, hatch,
                        role="bar", data=(share, int(successes), int(trials), wilson_low, wilson_high))
            canvas.line([(x, y_of(low)), (x, y_of(high))], WHISKER, 0.8, role="whisker")
            canvas.line([(x - cap, y_of(low)), (x + cap, y_of(low))], WHISKER, 0.8, role="whisker")
            canvas.line([(x - cap, y_of(high)), (x + cap, y_of(high))], WHISKER, 0.8, role="whisker")
            label = canvas.text(x, y_of(max(high, shown) + 1.5), f"{int(successes)}/{int(trials)}", size,
                                color=COUNT_INK, valign="center", rotation=90, role="count")
            label_top = min(label_top, label.extent()[1])
    canvas.line([(0, height), (width, height)], SPINE, 0.8, role="spine")
    line_height = 1.17 * SIZES["tick"]
    for j, group in enumerate(groups):
        x = (j + 0.5) * unit
        canvas.line([(x, height), (x, height + TICK)], SPINE, 0.8, role="tick")
        text = TASK_LABELS.get(group, textwrap.fill(str(group), 14))
        for k, line in enumerate(text.split("\n")):
            canvas.text(x, height + 2 * TICK + k * line_height, line, SIZES["tick"], align="middle", valign="top",
                        role="group_label")
    left = _value_axis(canvas, height, y_of)
    entries = [(bar.label, bar.color, palette.darker(bar.color, 0.55), palette.darker(bar.color, 0.55)
                if bar.hatch else None) for bar in series]
    legend_top = _legend(canvas, entries, left, label_top - 6.0, width - left, ncol or min(len(entries), 5),
                         by_column=legend_by_column)
    if title:
        canvas.text(left, legend_top - 6.0, title, SIZES["title"], weight="bold", role="title")
    return canvas


def policy_color(policies: Sequence[str], policy: str) -> str:
    """A policy keeps its colour in every figure: its place in the report's policy order."""
    return palette.POLICY_COLORS[list(policies).index(policy) % len(palette.POLICY_COLORS)]


def _per_policy(cells: Cells, policies: Sequence[str], names: Mapping[str, str], shown: Sequence[str],
                keys: Sequence[tuple[str, str]]) -> list[Bar]:
    """One series per shown policy over the groups' (task, condition) keys."""
    return [Bar(display(names, p), policy_color(policies, p), [cells.get(p, t, c) for t, c in keys])
            for p in shown]


def _panel(groups: Sequence[str], series: Sequence[Bar], title: str, ncol: int | None = None,
           legend_by_column: bool = False) -> Canvas:
    return bar_chart(groups, series, title, ncol, legend_by_column)


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
    return _panel(groups, series, "OOD spatial grounding and the direct-manipulation control",
                  ncol=len(shown), legend_by_column=True)


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
    return _panel([display(names, p) for p in shown], series, "Cross-task objects (five tasks)", ncol=2)


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


ROW_PITCH = 0.2 * INCH     # Fig. 11: one bar per task x policy
SHARE_WIDTH = 4.3 * INCH


def fig11_failure_modes(failures: pd.DataFrame, policies: Sequence[str], names: Mapping[str, str],
                        mode_labels: Mapping[str, str] | None = None):
    """Fig. 11: failure-mode composition of failed OOD rollouts, one bar per task x policy,
    normalised to 100%, with the number of failures n beside each bar.

    Rectangles of role "share" carry (task, policy, failure mode, count, share in %)."""
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
    if not bars:
        return None
    colors = {m: palette.UNANNOTATED_COLOR if m == UNANNOTATED
              else palette.FAILURE_COLORS[i % len(palette.FAILURE_COLORS)]
              for i, m in enumerate(FAILURE_MODE_ORDER)}
    labels = {m: failure_mode_label(m) for m in modes} | dict(mode_labels or {})
    canvas = Canvas()
    width = SHARE_WIDTH
    centres, position, previous = [], 0.7, None
    for task, _, _, _ in bars:
        if previous is not None and task != previous:
            position += 0.6  # a gap between tasks
        centres.append(position * ROW_PITCH)
        previous = task
        position += 1.0
    height = (position - 1.0 + 0.7) * ROW_PITCH
    bar_h = 0.78 * ROW_PITCH
    for value in range(0, 101, 20):
        x = width * value / 100
        canvas.line([(x, height), (x, height + TICK)], SPINE, 0.8, role="tick")
        canvas.text(x, height + 2 * TICK, str(value), SIZES["tick"], align="middle", valign="top", role="value_label")
    for y, (task, policy, mine, total) in zip(centres, bars):
        left = 0.0
        for mode in modes:
            if not mine[mode]:
                continue
            share = 100 * mine[mode] / total
            w = width * share / 100
            canvas.rect(left, y - bar_h / 2, w, bar_h, colors[mode], "#FFFFFF", 0.4, role="share",
                        data=(task, policy, mode, mine[mode], share))
            if share >= 7:
                ink = "#FFFFFF" if _luminance(colors[mode]) < 0.45 else "#222222"
                canvas.text(left + w / 2, y, str(mine[mode]), 5.5, color=ink, align="middle", valign="center",
                            role="share_count")
            left += w
        canvas.line([(-TICK, y), (0, y)], SPINE, 0.8, role="tick")
        canvas.text(-2 * TICK, y, f"{one_line(TASK_LABELS[task])} | {display(names, policy)}", 6.5, align="end",
                    valign="center", role="row_label")
        canvas.text(width * 1.015, y, f"n={total}", 6.5, valign="center", role="total")
    canvas.line([(0, 0), (0, height)], SPINE, 0.8, role="spine")
    canvas.line([(0, height), (width, height)], SPINE, 0.8, role="spine")
    axis_title = canvas.text(width / 2, height + 2 * TICK + 1.3 * SIZES["tick"], "Share of failed OOD rollouts (%)",
                             SIZES["axis"], align="middle", valign="top", role="axis_title")
    left_edge = min(item.extent()[0] for item in canvas.of_role("row_label"))
    entries = [(labels[m], colors[m], None, None) for m in modes]
    _legend(canvas, entries, left_edge, axis_title.extent()[3] + 8.0, width - left_edge, 3, above=False)
    canvas.text(left_edge, -6.0, "Failure-mode composition of OOD failures, by task and policy", SIZES["title"],
                weight="bold", role="title")
    return canvas


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
         names: Mapping[str, str], mode_labels: Mapping[str, str] | None = None) -> Canvas | None:
    """One figure by name (a Canvas, or None when the outcomes hold nothing for it)."""
    function, _ = FIGURES[name]
    if name == "fig11_failure_modes":
        return function(failures, list(policies), names, mode_labels)
    return function(Cells(summary), list(policies), names)


def save(canvas: Canvas, stem: Path, formats: Sequence[str] = FORMATS, title: str = "") -> list[Path]:
    """Write one figure in each format (the writers are imported only for the formats asked)."""
    written = []
    for fmt in formats:
        path = stem.with_suffix("." + fmt)
        if fmt == "png":
            from spabench.analysis.drawing.png import to_png

            to_png(canvas, path, PNG_DPI)
        elif fmt == "pdf":
            from spabench.analysis.drawing.pdf import to_pdf

            path.write_bytes(to_pdf(canvas, title))
        elif fmt == "svg":
            from spabench.analysis.drawing.svg import to_svg

            path.write_text(to_svg(canvas, title), encoding="utf-8")
        else:
            raise ValueError(f"figure format {fmt!r}: allowed {', '.join(FORMATS)}")
        written.append(path)
    return written


def write_figures(summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str], out_dir: Path,
                  names: Mapping[str, str] | None = None, formats: Sequence[str] = FORMATS,
                  mode_labels: Mapping[str, str] | None = None) -> dict[str, list[Path]]:
    """Every figure that has data, in every format; returns {figure name: written paths} in the
    paper's order."""
    written = {}
    for name in FIGURES:
        canvas = draw(name, summary, failures, policies, dict(names or {}), mode_labels)
        if canvas is not None:
            written[name] = save(canvas, Path(out_dir) / name, formats, CAPTIONS[name])
    return written
