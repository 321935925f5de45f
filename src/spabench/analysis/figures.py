"""The paper's figures (Figs. 5-11): success rates with Wilson 95% whiskers, and failure-mode composition.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no global backend switch, imported
only when figures are drawn) under spabench's style sheet (`spabench.mplstyle`: Okabe-Ito colours,
text sizes in points at the printed width, TrueType fonts in the PDF, text kept as text in the SVG),
then a lab's own sheet on top (`FigureSettings.style`). Each figure is exactly the column width it
is drawn for (3.5 in single, 7 in double), so its point sizes are the printed ones.

Conventions of every bar figure: the trial count `k/n` above every bar, a 0% bar drawn as a visible
stub in its colour, the title and the legend above the plot (never over a bar), groups wrapped onto
more rows of panels when a column is too narrow for their bars, and policies shown by their display
names.
"""

from __future__ import annotations

import math
import os
import textwrap
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from spabench.analysis import palette
from spabench.analysis.failures import FAILURE_MODE_ORDER, UNANNOTATED, failure_mode_label
from spabench.analysis.rates import ALL_TASKS, NON_RELATIONAL, NON_RELATIONAL_TASKS, summary_cells
from spabench.errors import ConfigError
from spabench.escaping import printable
from spabench.suite import vocabulary
from spabench.suite.rules import UNSAFE
from spabench.suite.vocabulary import FAILURE_MODES, TASKS

FORMATS = ("png", "pdf", "svg")
PAGE_FORMATS = ("svg", "png")   # what report.md and report.html show a figure as, in order of preference
DEFAULT_FORMATS = ("svg",)      # the report's pages need one; PNG and PDF are written on request
PNG_DPI = 300
ZERO_STUB = 1.2  # height (pp) of the stub that marks a 0% bar
STYLE_SHEET = Path(__file__).with_name("spabench.mplstyle")
WIDTHS = {"single": 3.5, "double": 7.0}  # inches: a journal's single and double column

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
class FigureSettings:
    """How the report draws its figures (`figures.<field>=` on the command line).

    width: single (3.5 in) | double (7 in), the printed width of every figure.
    style: a lab's own matplotlib style sheet (.mplstyle), applied on top of spabench's.
    formats: the files written per figure (png: 300 dpi, pdf: TrueType fonts embedded, svg: text
      as text); one of svg or png is shown in report.md and report.html. SVG alone by default: each
      format is a full redraw by matplotlib, and PDF and PNG are what a lab asks for when it writes
      the paper (`figures.formats=[svg,pdf,png]`).
    """

    width: str = "single"
    style: Path | None = None
    formats: tuple[str, ...] = DEFAULT_FORMATS

    def __post_init__(self) -> None:
        if self.width not in WIDTHS:
            raise ConfigError(f"figures.width: {self.width!r} (allowed: {' | '.join(WIDTHS)})")
        formats = self.formats
        if isinstance(formats, str) or not all(isinstance(f, str) for f in formats) or not formats \
                or any(f not in FORMATS for f in formats) or not set(formats) & set(PAGE_FORMATS):
            raise ConfigError(f"figures.formats: {formats!r} (allowed: a list of {', '.join(FORMATS)} holding "
                              f"svg or png, which report.md and report.html show; e.g. [svg,pdf])")
        object.__setattr__(self, "formats", tuple(dict.fromkeys(formats)))
        if self.style is not None:
            path = Path(str(self.style)).expanduser().resolve()
            if not path.is_file():
                raise ConfigError(f"figures.style: {self.style} is not a file (a matplotlib .mplstyle sheet)")
            object.__setattr__(self, "style", path)

    @classmethod
    def from_mapping(cls, values: Mapping | None) -> FigureSettings:
        """The settings from `figures.*` keys; an unknown key is refused, naming the allowed ones."""
        values = dict(values or {})
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise ConfigError(f"report: unknown key 'figures.{unknown[0]}' (allowed: "
                              f"{', '.join('figures.' + name for name in allowed)})")
        if "width" in values and not isinstance(values["width"], str):
            raise ConfigError(f"figures.width: {values['width']!r} (allowed: {' | '.join(WIDTHS)})")
        if values.get("style") is not None and (not isinstance(values["style"], (str, Path))
                                                or not str(values["style"]).strip()):
            raise ConfigError(f"figures.style: {values['style']!r} (allowed: a path to a .mplstyle file, or null)")
        if "formats" in values and isinstance(values["formats"], Sequence) and not isinstance(values["formats"], str):
            values["formats"] = tuple(values["formats"])   # a list from the command line or the YAML
        return cls(**values)

    @property
    def inches(self) -> float:
        return WIDTHS[self.width]

    def styles(self) -> list[str]:
        """The style sheets in the order applied: spabench's, then the lab's."""
        return [str(STYLE_SHEET)] + ([str(self.style)] if self.style else [])

    def check_style(self) -> None:
        """Read the lab's sheet now (before the report computes anything): a line matplotlib cannot
        parse is an error naming the file, not a warning after the figures are drawn."""
        if self.style is None:
            return
        import logging

        import matplotlib

        problems: list[str] = []

        class Collect(logging.Handler):   # matplotlib logs a bad line of a style sheet and goes on
            def emit(self, record: logging.LogRecord) -> None:
                problems.append(record.getMessage())

        handler, logger = Collect(logging.WARNING), logging.getLogger("matplotlib")
        logger.addHandler(handler)
        try:
            matplotlib.rc_params_from_file(str(self.style), use_default_template=False)
        except (ValueError, KeyError, OSError, UnicodeDecodeError) as error:
            problems.append(str(error))
        finally:
            logger.removeHandler(handler)
        if problems:
            raise ConfigError(f"figures.style: {self.style}: {problems[0]}")


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
    """A label on one line (spabench.escaping.printable); with text.parse_math off (the style sheet)
    a `$` in a policy name is drawn literally, never parsed as TeX."""
    return printable(text)


def display(names: Mapping[str, str], policy: str) -> str:
    return one_line(names.get(policy, policy))


# ---------------------------------------------------------------- layout (points)

WHISKER = "#222222"
COUNT_INK = "#333333"
PANEL_HEIGHT = 1.3 * 72     # one row of bar panels
GROUP_FILL = 0.84           # share of a group's slot taken by its bars


# the style's font sizes the figures read (matplotlib types rcParams by key)
FontSizeKey = Literal["font.size", "axes.labelsize", "axes.titlesize", "xtick.labelsize", "ytick.labelsize",
                      "figure.titlesize"]


def _rc(name: FontSizeKey) -> float:
    """A font size from the active style, in points."""
    import matplotlib
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=matplotlib.rcParams[name]).get_size_in_points()


def _new_figure(width_in: float, height_pt: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_pt / 72), dpi=72)
    FigureCanvasAgg(figure)
    return figure


def _policy_colors() -> list[str]:
    """The style's colour cycle as #RRGGBB (spabench's: Okabe-Ito in palette.POLICY_COLORS order)."""
    import matplotlib
    from matplotlib.colors import to_hex

    return [to_hex(c["color"]).upper() for c in matplotlib.rcParams["axes.prop_cycle"]
            if "color" in c] or list(palette.POLICY_COLORS)


def figure_policies(policies: Sequence[str], settings: FigureSettings) -> list[str]:
    """The policies the figures draw: the first as many as the style has colours, in the report's
    order. One more would share a colour with another in every figure, and hundreds (many labs'
    tables concatenated) make bars no one can read at a column's width while matplotlib spends
    minutes laying them out; the report's tables keep every policy, and its Figures section names
    the policies left out. A lab's style sheet with a longer `axes.prop_cycle` draws more."""
    with _styled(settings):
        return list(policies)[:len(_policy_colors())]


def policy_color(policies: Sequence[str], policy: str) -> str:
    """A policy keeps its colour in every figure: its place in the report's policy order."""
    colors = _policy_colors()
    return colors[list(policies).index(policy) % len(colors)]


def _wrapped(figure, text: str, size: float, weight: str = "bold") -> str:
    """`text` broken into lines that each fit the page width at `size` (measured with the font)."""
    from matplotlib.font_manager import FontProperties

    font = FontProperties(size=size, weight=weight)
    renderer = figure.canvas.get_renderer()
    room = 0.97 * figure.bbox.width
    widths: dict[str, float] = {}   # neighbouring widths wrap into the same lines: each is measured once

    def fits(line: str) -> bool:
        if line not in widths:
            widths[line] = renderer.get_text_width_height_descent(line, font, ismath=False)[0]
        return widths[line] <= room

    for chars in range(len(text), 8, -1):
        lines = textwrap.wrap(text, chars) or [text]
        if all(fits(line) for line in lines):
            return "\n".join(lines)
    return textwrap.fill(text, 8)


def _legend(figure, handles, where: str, title: str = "") -> object:
    """One figure legend outside the plots (`where`: upper | lower), with as many columns as fit
    the page width (measured, not guessed); above the plots it carries the figure's title, so
    title and legend are one block that the layout keeps off the data."""
    import matplotlib

    width = figure.bbox.width
    renderer = figure.canvas.get_renderer()
    size = _rc("figure.titlesize")
    heading = _wrapped(figure, title, size, matplotlib.rcParams["figure.titleweight"]) if title else None
    legend = None
    for ncol in range(min(len(handles), 6), 0, -1):
        if legend is not None:
            legend.remove()
        legend = figure.legend(handles=handles, loc=f"outside {where} left", ncol=ncol, title=heading,
                               alignment="left",
                               title_fontproperties={"size": size,
                                                     "weight": matplotlib.rcParams["figure.titleweight"]})
        if legend.get_window_extent(renderer).width <= 0.98 * width:
            break
    return legend


def _grow(figure, plots_pt: float, *blocks) -> None:
    """Make the page tall enough for the plots (`plots_pt`) plus the measured title and legend
    blocks, so the layout never squeezes a panel to fit them."""
    renderer = figure.canvas.get_renderer()
    extra = sum(block.get_window_extent(renderer).height for block in blocks) * 72 / figure.dpi
    figure.set_size_inches(figure.get_figwidth(), (plots_pt + extra + 6.0 * len(blocks)) / 72)


def _fit_counts(figure, axes, counts) -> None:
    """Raise every panel's value axis just enough that each rotated k/n label fits above its bar:
    the label's top lands at most 2 pt below the panel's top edge."""
    renderer = figure.canvas.get_renderer()
    figure.draw_without_rendering()
    top = 105.0
    for ax, label in counts:
        height = ax.bbox.height
        length = label.get_window_extent(renderer).height + 2.0 * figure.dpi / 72
        anchor = label.get_position()[1]
        if height > length:
            top = max(top, anchor * height / (height - length))
    for ax in axes:
        ax.set_ylim(0, top)


def bar_chart(groups: Sequence[str], series: Sequence[Bar], title: str, settings: FigureSettings):
    """Grouped bars with Wilson whiskers and k/n above each bar, title and legend above the plots.

    The groups are wrapped onto rows of panels so that every bar keeps room for its k/n label at
    the style's size. The figure carries `spabench_bars`: (bar patch, k/n text, cell) per bar."""
    from matplotlib.patches import Patch

    n_series = max(len(series), 1)
    count_size = _rc("font.size")
    width_pt = settings.inches * 72
    left = 1.3 * _rc("axes.labelsize") + 2.2 * _rc("ytick.labelsize") + 12.0   # y label, "100", ticks
    plot_pt = width_pt - left - 4.0
    pitch = 1.35 * count_size          # a rotated label needs its line height beside its neighbour
    per_row = max(1, min(len(groups), int(plot_pt * GROUP_FILL // (n_series * pitch))))
    rows = math.ceil(len(groups) / per_row)
    per_row = math.ceil(len(groups) / rows)  # balance the rows
    lines = max((TASK_LABELS.get(g, textwrap.fill(str(g), 14)).count("\n") + 1 for g in groups), default=1)
    tick_block = 1.25 * _rc("xtick.labelsize") * lines + 6.0
    height = rows * (PANEL_HEIGHT + tick_block) + 12.0   # plus the title and legend block, measured below
    figure = _new_figure(settings.inches, height)
    axes = list(figure.subplots(rows, 1, squeeze=False)[:, 0])
    slot = GROUP_FILL / n_series
    bars, counts = [], []
    for row, ax in enumerate(axes):
        mine = list(range(row * per_row, min(len(groups), (row + 1) * per_row)))
        whiskers = []  # (x, rate, below, above): one errorbar call per panel
        for i, bar in enumerate(series):
            offset = (i - (n_series - 1) / 2) * slot
            drawn = []   # (x, bar height, cell): the series' bars of this panel, drawn in one call
            for position, j in enumerate(mine):
                cell = bar.cells[j]
                if cell is not None:
                    rate = 100 * cell[2]
                    drawn.append((position + offset, rate if rate > 0 else ZERO_STUB, cell))  # 0%: a stub
            if not drawn:
                continue
            patches = ax.bar([x for x, _, _ in drawn], [shown for _, shown, _ in drawn], width=0.9 * slot,
                             color=bar.color, edgecolor=palette.darker(bar.color, 0.55), linewidth=0.5,
                             hatch=bar.hatch, zorder=2).patches
            for patch, (x, shown, cell) in zip(patches, drawn, strict=True):
                successes, trials, share, wilson_low, wilson_high = cell
                rate = 100 * share
                low, high = min(100 * wilson_low, rate), max(100 * wilson_high, rate)   # float noise at 0/100
                whiskers.append((x, rate, rate - low, high - rate))
                # inside its panel once _fit_counts raised the value axis: no part of the layout
                label = ax.text(x, max(high, shown) + 1.5, f"{int(successes)}/{int(trials)}", rotation=90,
                                ha="center", va="bottom", fontsize=count_size, color=COUNT_INK, in_layout=False)
                bars.append((patch, label, cell))
                counts.append((ax, label))
        if whiskers:
            xs, rates, below, above = zip(*whiskers, strict=True)
            ax.errorbar(xs, rates, yerr=[below, above], fmt="none", ecolor=WHISKER, elinewidth=0.6,
                        capsize=0.22 * slot * plot_pt / per_row, capthick=0.6, zorder=3)
        ax.set_xlim(-0.5, per_row - 0.5)
        ax.set_xticks(range(len(mine)), [TASK_LABELS.get(groups[j], textwrap.fill(str(groups[j]), 14))
                                         for j in mine])
        ax.set_yticks(range(0, 101, 20))
        ax.yaxis.grid(True)
        ax.set_ylabel("Success rate (%)")
    handles = [Patch(facecolor=b.color, edgecolor=palette.darker(b.color, 0.55), hatch=b.hatch, linewidth=0.5,
                     label=b.label) for b in series]
    _grow(figure, height, _legend(figure, handles, "upper", title))
    _fit_counts(figure, axes, counts)
    figure.spabench_bars = bars
    return figure


def _per_policy(cells: Cells, policies: Sequence[str], names: Mapping[str, str], shown: Sequence[str],
                keys: Sequence[tuple[str, str]]) -> list[Bar]:
    """One series per shown policy over the groups' (task, condition) keys."""
    return [Bar(display(names, p), policy_color(policies, p), [cells.get(p, t, c) for t, c in keys])
            for p in shown]


# ---------------------------------------------------------------- the figures

def fig5_id_per_task(cells: Cells, policies: Sequence[str], names: Mapping[str, str], settings: FigureSettings):
    """Fig. 5: ID spatial success per task, every policy (ID-only baselines included)."""
    shown = [p for p in policies if any(cells.has(p, t, "id") for t in TASKS)]
    if not shown:
        return None
    groups = [t for t in TASKS if any(cells.has(p, t, "id") for p in shown)] + [ALL_TASKS]
    series = _per_policy(cells, policies, names, shown, [(t, "id") for t in groups])
    return bar_chart(groups, series, "ID spatial grounding by task", settings)


def fig6_ood_direct(cells: Cells, policies: Sequence[str], names: Mapping[str, str], settings: FigureSettings):
    """Fig. 6: OOD spatial (50 per task, dark shade) and direct control (20 matched scenes, light,
    hatched) per task, one colour per policy."""
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
    return bar_chart(groups, series, "OOD spatial grounding and the direct-manipulation control", settings)


def fig7_paraphrase(cells: Cells, policies: Sequence[str], names: Mapping[str, str], settings: FigureSettings):
    """Fig. 7: the four instruction conditions on the paraphrase subset (all tasks)."""
    shown = [p for p in policies if any(cells.has(p, ALL_TASKS, c) for c in PARAPHRASE_CONDITIONS)]
    if not shown:
        return None
    series = [Bar(CONDITION_LABELS[c], palette.PARAPHRASE_COLORS[i],
                  [cells.get(p, ALL_TASKS, c) for p in shown], hatch="///" if i % 2 else None)
              for i, c in enumerate(PARAPHRASE_CONDITIONS)]
    return bar_chart([display(names, p) for p in shown], series,
                     "Paraphrase subset: four conditions, same scenes", settings)


def fig8_cross_task(cells: Cells, policies: Sequence[str], names: Mapping[str, str], settings: FigureSettings):
    """Fig. 8: cross-task aggregate, ID with standard objects vs with transferred objects (five
    tasks, descriptive: the scenes are not paired)."""
    conditions = ("id_cross_task_subset", "cross_task")
    shown = [p for p in policies if cells.has(p, ALL_TASKS, "cross_task")]
    if not shown:
        return None
    series = [Bar(CONDITION_LABELS[c], palette.PAIR_COLORS[i], [cells.get(p, ALL_TASKS, c) for p in shown])
              for i, c in enumerate(conditions)]
    return bar_chart([display(names, p) for p in shown], series, "Cross-task objects (five tasks)", settings)


def fig9_no_intervention(cells: Cells, policies: Sequence[str], names: Mapping[str, str],
                         settings: FigureSettings):
    """Fig. 9: no-intervention success per task and the 80-trial aggregate of the four tasks."""
    tasks = [t for t in NON_RELATIONAL_TASKS if any(cells.has(p, t, "no_intervention") for p in policies)]
    if not tasks:
        return None
    shown = [p for p in policies if any(cells.has(p, t, "no_intervention") for t in tasks)]
    groups = tasks + [NON_RELATIONAL]
    series = _per_policy(cells, policies, names, shown, [(t, "no_intervention") for t in groups])
    return bar_chart(groups, series, "No intervention: success = no arm or gripper motion", settings)


def fig10_relational_pair(cells: Cells, policies: Sequence[str], names: Mapping[str, str],
                          settings: FigureSettings):
    """Fig. 10: Relational Placement, no-movement vs movement-required on matched scenes."""
    task = "relational_placement"
    pair = [c for c in ("no_movement", "movement_required") if any(cells.has(p, task, c) for p in policies)]
    if not pair:
        return None
    shown = [p for p in policies if any(cells.has(p, task, c) for c in pair)]
    series = _per_policy(cells, policies, names, shown, [(task, c) for c in pair])
    return bar_chart([CONDITION_LABELS[c] for c in pair], series, "Relational Placement", settings)


ROW_PITCH = 0.15 * 72     # Fig. 11: one bar per task x policy (points)


def fig11_failure_modes(failures: pd.DataFrame, policies: Sequence[str], names: Mapping[str, str],
                        settings: FigureSettings, mode_labels: Mapping[str, str] | None = None):
    """Fig. 11: failure-mode composition of failed OOD rollouts: one panel per task, one bar per
    policy, normalised to 100%, with the number of failures n beside each bar.

    The figure carries `spabench_shares`: (patch, task, policy, failure mode, count, share in %)
    per segment, and `spabench_totals`: (text, task, policy, n) per bar."""
    from matplotlib.patches import Patch

    rows = failures[(failures["condition"] == FAILURE_CONDITION) & (failures["task"] != ALL_TASKS)]
    if rows.empty:
        return None
    counts = rows.groupby(["task", "policy", "failure_mode"], sort=False)["count"].sum().to_dict()
    modes = [m for m in FAILURE_MODE_ORDER if rows["failure_mode"].eq(m).any()]
    blocks = []  # (task, [(policy, {mode: count}, total)])
    for task in TASKS:
        bars = []
        for policy in policies:
            mine = {m: counts.get((task, policy, m), 0) for m in modes}
            if sum(mine.values()):
                bars.append((policy, mine, sum(mine.values())))
        if bars:
            blocks.append((task, bars))
    if not blocks:
        return None
    colors = {m: palette.FAILURE_COLORS[i % len(palette.FAILURE_COLORS)] for i, m in enumerate(FAILURE_MODES)}
    colors |= {UNSAFE: palette.UNSAFE_COLOR, UNANNOTATED: palette.UNANNOTATED_COLOR}
    labels = {m: failure_mode_label(m) for m in modes} | dict(mode_labels or {})
    n_bars = sum(len(bars) for _, bars in blocks)
    height = n_bars * ROW_PITCH + len(blocks) * (1.6 * _rc("axes.titlesize") + 4) + 2 * _rc("xtick.labelsize") \
        + 1.6 * _rc("axes.labelsize") + 16   # plus the title and the legend, measured below
    figure = _new_figure(settings.inches, height)
    axes = list(figure.subplots(len(blocks), 1, sharex=True, squeeze=False,
                                height_ratios=[len(bars) + 0.4 for _, bars in blocks])[:, 0])
    size = _rc("font.size")
    shares, totals, inside = [], [], []
    for ax, (task, bars) in zip(axes, blocks, strict=True):
        y = list(range(len(bars)))
        for yi, (policy, mine, total) in zip(y, bars, strict=True):
            left = 0.0
            for mode in modes:
                if not mine[mode]:
                    continue
                share = 100 * mine[mode] / total
                patch = ax.barh(yi, share, left=left, height=0.78, color=colors[mode], edgecolor="white",
                                linewidth=0.4)[0]
                shares.append((patch, task, policy, mode, mine[mode], share))
                inside.append((ax, left + share / 2, yi, share, str(mine[mode]), colors[mode]))
                left += share
            text = ax.text(101.5, yi, f"n={total}", va="center", fontsize=size, clip_on=False)
            totals.append((text, task, policy, total))
        ax.set_yticks(y, [display(names, p) for p, _, _ in bars])
        ax.set_ylim(len(bars) - 0.5, -0.5)
        ax.set_xlim(0, 100)
        ax.set_xticks(range(0, 101, 20))
        ax.tick_params(axis="y", length=0)
        ax.set_title(one_line(TASK_LABELS[task]), fontsize=_rc("axes.titlesize"), pad=2)
    axes[-1].set_xlabel("Share of failed OOD rollouts (%)")
    title = "Failure-mode composition of OOD failures, by task and policy"
    heading = figure.suptitle(_wrapped(figure, title, _rc("figure.titlesize")), x=0.01, ha="left")
    _grow(figure, height, _legend(figure, [Patch(facecolor=colors[m], label=labels[m]) for m in modes], "lower"),
          heading)
    figure.draw_without_rendering()   # the layout, then the counts that fit inside their segment
    for ax, x, yi, share, text, color in inside:   # a count inside its segment when it fits there
        if share / 100 * ax.bbox.width / figure.dpi * 72 >= 0.64 * size * len(text) + 3:
            ink = "#FFFFFF" if _luminance(color) < 0.45 else "#222222"
            ax.text(x, yi, text, ha="center", va="center", fontsize=size, color=ink)
    figure.spabench_shares = shares
    figure.spabench_totals = totals
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
                                "direct-manipulation control (light, hatched). The direct bars cover only "
                                "the 20 matched scenes per task that have a direct control, not all 50 OOD "
                                "scenes: compare them with the matched OOD rate (`ood_matched`), not with "
                                "the dark bar beside them.",
    "fig7_paraphrase": "Fig. 7. The four instruction conditions on the paraphrase subset (same scenes).",
    "fig8_cross_task": "Fig. 8. Cross-task aggregate: ID with standard objects vs transferred objects "
                       "(five tasks; descriptive, scenes not paired).",
    "fig9_no_intervention": "Fig. 9. No-intervention success per task and the 80-trial aggregate.",
    "fig10_relational_movement": "Fig. 10. Relational Placement: no-movement vs movement-required scenes.",
    "fig11_failure_modes": "Fig. 11. Failure-mode composition of failed OOD rollouts per task and policy "
                           "(normalised; n = failures).",
}


def _styled(settings: FigureSettings):
    """matplotlib's defaults, then spabench's sheet, then the lab's: the caller's own rcParams are
    restored afterwards."""
    import matplotlib.style

    return matplotlib.style.context(settings.styles(), after_reset=True)


def draw(name: str, summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str],
         names: Mapping[str, str], mode_labels: Mapping[str, str] | None = None,
         settings: FigureSettings | None = None):
    """One figure by name (a matplotlib Figure, or None when the outcomes hold nothing for it)."""
    settings = settings or FigureSettings()
    function, _ = FIGURES[name]
    with _styled(settings):
        if name == "fig11_failure_modes":
            figure = function(failures, list(policies), names, settings, mode_labels)
        else:
            figure = function(Cells(summary), list(policies), names, settings)
        if figure is not None:   # laid out once (by the figure function): the formats reuse it
            figure.set_layout_engine("none")
    return figure


_METADATA: dict[str, dict[str, str | None]] = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None},
             "svg": {"Date": None}}


def save(figure, stem: Path, formats: Sequence[str] = DEFAULT_FORMATS, title: str = "",
         settings: FigureSettings | None = None) -> list[Path]:
    """Write one figure in each format at its full page (its width is the column's)."""
    import logging

    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise ValueError(f"figure format {unknown[0]!r}: allowed {', '.join(FORMATS)}")
    written = []
    subsetter = logging.getLogger("fontTools")   # the PDF's font subsetting narrates every table at INFO
    level = subsetter.level
    subsetter.setLevel(max(level, logging.WARNING))
    try:
        with _styled(settings or FigureSettings()):
            for fmt in formats:
                path = stem.with_suffix("." + fmt)
                metadata = dict(_METADATA[fmt])
                if title and fmt != "png":
                    metadata["Title"] = title
                # zlib level 1: level 6 took several times as long for files about 10% smaller
                extra = {"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
                figure.savefig(path, format=fmt, dpi=PNG_DPI if fmt == "png" else 72, metadata=metadata, **extra)
                written.append(path)
    finally:
        subsetter.setLevel(level)
    return written


def _render(name: str, summary, failures, policies, names, out_dir, formats, mode_labels, settings):
    figure = draw(name, summary, failures, policies, names, mode_labels, settings)
    if figure is None:
        return None
    return save(figure, Path(out_dir) / name, formats, CAPTIONS[name], settings)


_JOB: tuple = ()  # the arguments of the figures being drawn, inherited by forked workers


def _written_or_oserror(name: str, args: tuple) -> list[Path]:
    """One figure drawn and saved. A write that fails (a full disk) can leave matplotlib's PDF writer
    raising an unrelated error while it cleans up; the OSError under it is what the report's output
    guard turns into one clear message, so that is what is raised."""
    try:
        return _render(name, *args)
    except OSError:
        raise
    except Exception as exc:
        cause = exc.__context__
        while cause is not None and not isinstance(cause, OSError):
            cause = cause.__context__
        if cause is None:
            raise
        raise OSError(cause.errno, cause.strerror, cause.filename) from exc


def _render_forked(name: str):
    return name, _written_or_oserror(name, _JOB)


def default_jobs() -> int:
    """Worker processes for the figures: two where the machine has two CPUs or more (the figures are
    independent; forked workers inherit the imported matplotlib and its loaded fonts), else one."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _can_fork() -> bool:
    """POSIX fork from a caller with no other Python thread (forking a threaded process can
    deadlock; numpy's idle BLAS threads register their own fork handlers and do not count)."""
    return hasattr(os, "fork") and threading.active_count() == 1


class FigureJob:
    """Figures being drawn: by forked workers that started at `start_figures` (the caller computes
    the rest of the report meanwhile), or, where forking is not possible, one by one at `result`."""

    def __init__(self, args: tuple, jobs: int, policies: list[str]):
        self._args = args
        self.policies = policies   # the policies the figures show (figure_policies)
        self._pool: Any = None      # multiprocessing.pool.Pool while workers draw
        self._pending: Any = None   # its AsyncResult
        if jobs > 1 and _can_fork():
            self._fork(jobs)

    def _fork(self, jobs: int) -> None:
        global _JOB
        import importlib
        import multiprocessing
        import warnings

        import matplotlib.backends.backend_agg  # noqa: F401  imported once, before the fork
        for fmt in self._args[5]:   # the writers of the formats asked for (PDF's pulls in fontTools)
            importlib.import_module(f"matplotlib.backends.backend_{fmt if fmt != 'png' else 'agg'}")

        _JOB = self._args
        try:
            with warnings.catch_warnings():   # Python counts the idle BLAS threads as threads too
                warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
                self._pool = multiprocessing.get_context("fork").Pool(jobs)
        finally:
            _JOB = ()   # the workers have their copy
        # the heaviest first, so the workers finish together
        order = sorted(FIGURES, key=lambda n: n not in ("fig6_ood_direct_per_task", "fig11_failure_modes",
                                                        "fig5_id_per_task"))
        self._pending = self._pool.map_async(_render_forked, order, chunksize=1)

    def result(self) -> dict[str, list[Path]]:
        """{figure name: written paths} in the paper's order, once every figure is written."""
        if self._pool is None:
            results = {name: _written_or_oserror(name, self._args) for name in FIGURES}
        else:
            with self._pool:
                results = dict(self._pending.get())
            self._pool = None
        return {name: results[name] for name in FIGURES if results.get(name)}

    def cancel(self) -> None:
        """Stop the workers (the report failed before it needed the figures)."""
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def start_figures(summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str], out_dir: Path,
                  names: Mapping[str, str] | None = None, formats: Sequence[str] | None = None,
                  mode_labels: Mapping[str, str] | None = None, settings: FigureSettings | None = None,
                  jobs: int | None = None) -> FigureJob:
    """Start drawing every figure that has data, in each format (default: the settings'), into
    `out_dir`, for the policies `figure_policies` keeps (the job's `policies`). With jobs > 1
    (default: two on a machine with two CPUs) forked workers draw while the caller goes on; else
    they are drawn one by one when the result is asked for. The files are the same either way."""
    settings = settings or FigureSettings()
    shown = figure_policies(policies, settings)
    args = (summary, failures, shown, dict(names or {}), Path(out_dir),
            tuple(settings.formats if formats is None else formats), mode_labels, settings)
    return FigureJob(args, default_jobs() if jobs is None else max(1, int(jobs)), shown)


def write_figures(summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str], out_dir: Path,
                  names: Mapping[str, str] | None = None, formats: Sequence[str] | None = None,
                  mode_labels: Mapping[str, str] | None = None,
                  settings: FigureSettings | None = None, jobs: int | None = None) -> dict[str, list[Path]]:
    """Every figure that has data, in each format (default: the settings'); returns {figure name:
    written paths} in the paper's order (`start_figures`, then its result)."""
    return start_figures(summary, failures, policies, out_dir, names, formats, mode_labels, settings,
                         jobs).result()


# ---------------------------------------------------------------- `spabench compare`

CAPTIONS_COMPARE = ("Running evidence of the sequential comparison: the e-value after each matched pair "
                    "(log scale; only discordant pairs move it), the threshold at which it decides, and "
                    "the pair where the comparison was decided.")


def evidence_figure(path: pd.DataFrame, result: Any, names: Mapping[str, str],
                    settings: FigureSettings | None = None):
    """The e-value per pair of `spabench compare` (a step line on a log axis) with the e-process's
    threshold, the decision marked and the test and alpha in the title. `path`: the evidence frame
    (n, e_value, threshold); `result`: the `sequential.SequentialResult`; `names`: a and b's names."""
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, NullFormatter

    settings = settings or FigureSettings()
    with _styled(settings):
        colors = _policy_colors()
        figure = _new_figure(settings.inches, PANEL_HEIGHT * 1.6)
        ax = figure.subplots()
        n = path["n"].to_numpy()
        e_value = np.clip(path["e_value"].to_numpy(dtype=float), 1e-300, 1e300)
        threshold = float(path["threshold"].iloc[0]) if len(path) else 1.0 / result.split.alpha_seq
        xs, ys = np.concatenate([[0], n]), np.concatenate([[1.0], e_value])
        used = result.pairs_used if result.decision is not None else len(n)
        ax.step(xs[: used + 1], ys[: used + 1], where="post", color=colors[0], linewidth=1.0)
        if used < len(n):   # after the decision: not evidence, drawn light
            ax.step(xs[used:], ys[used:], where="post", color="#BBBBBB", linewidth=0.8)
        ax.axhline(threshold, color=WHISKER, linestyle="--", linewidth=0.7)
        ax.axhline(1.0, color="#999999", linewidth=0.5)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))   # no TeX: parse_math is off
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(0, max(int(n.max()) if len(n) else 1, 1))
        ax.set_xlabel("matched pairs")
        ax.set_ylabel("e-value")
        ax.grid(True, axis="y", which="major")
        handles = [Line2D([], [], color=colors[0], linewidth=1.0, label="e-value"),
                   Line2D([], [], color=WHISKER, linestyle="--", linewidth=0.7,
                          label=f"threshold {threshold:.4g} (level {result.split.alpha_seq:.4g})")]
        if result.decision is not None:
            ax.axvline(result.pairs_used, color=colors[1], linewidth=0.8)
            handles.append(Line2D([], [], color=colors[1], linewidth=0.8,
                                  label=f"decided: {one_line(names[result.decision])} after {result.pairs_used} "
                                        f"pairs ({result.stopped_by})"))
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0.5), max(high, threshold * 2))
        test = (f"hybrid test: e-process + exact McNemar at {result.max_pairs} pairs" if result.max_pairs is not None
                else "sequential test: e-process on discordant pairs")
        sides = "two-sided" if result.two_sided else "one-sided"
        title = f"{one_line(names['a'])} (a) vs {one_line(names['b'])} (b). {test}, {sides}, alpha {result.alpha:g}"
        plots = PANEL_HEIGHT * 1.6
        _grow(figure, plots, _legend(figure, handles, "upper", title))
        figure.draw_without_rendering()   # laid out once under the style: every format reuses it
    figure.set_layout_engine("none")
    return figure
