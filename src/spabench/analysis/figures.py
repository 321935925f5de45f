"""Figures in the style of the paper's: grouped bars of success rate with Wilson 95% error bars.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no global backend switch), so
the report runs headless and never disturbs a caller's matplotlib state. Each function returns
the written path, or None when the outcomes hold nothing to plot for it.
"""

from __future__ import annotations

import textwrap
import warnings

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from spabench.analysis.failures import FAILURE_MODE_ORDER, UNANNOTATED, failure_mode_label
from spabench.analysis.rates import ALL_TASKS, NON_RELATIONAL, NON_RELATIONAL_TASKS, rate_of
from spabench.suite import vocabulary
from spabench.suite.vocabulary import TASKS

POLICY_COLORS = ("#5E82E6", "#6CA363", "#C95A48", "#E0A33B", "#8E6CC9", "#4DA6A6", "#B5651D", "#7F7F7F")
SERIES_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3")
FAILURE_COLORS = ("#C95A48", "#E8927C", "#7F7F7F", "#E0A33B", "#6CA363", "#4DA6A6", "#5E82E6",
                  "#8E6CC9", "#B5651D", "#D17BB5", "#D9D9D9")

# The protocol's published labels (spabench.suite.vocabulary), wrapped for the axes.
TASK_LABELS = {
    **{t: label.replace(" ", "\n") for t, label in vocabulary.TASK_LABELS.items()},
    ALL_TASKS: "All tasks", NON_RELATIONAL: "Non-relational\n(pooled)",
}
CONDITION_LABELS = {
    **vocabulary.CONDITION_LABELS,
    "ood_matched": "OOD spatial (matched)",
    "ood_paraphrase_subset": "OOD spatial, original", "direct_paraphrase_subset": "Direct control, original",
    "id_cross_task_subset": "ID spatial (cross-task tasks)",
}
AGGREGATE_CONDITIONS = ("id", "ood", "ood_matched", "direct", "cross_task", "no_intervention")
PARAPHRASE_CONDITIONS = ("ood_paraphrase_subset", "paraphrase_ood", "direct_paraphrase_subset",
                         "paraphrase_direct")

# (label, color, [summary row or None per group]) for one bar series
Series = tuple[str, str, list]


def _figure(width: float, height: float, nrows: int = 1) -> tuple[Figure, list]:
    figure = Figure(figsize=(width, height), dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.subplots(nrows, 1, squeeze=False, sharey=True)[:, 0]
    return figure, list(axes)


def _legend(ax, **kwargs) -> None:
    """Legend outside the plot area, to the right, so it never hides a bar."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, **kwargs)


def _bars(ax, groups: Sequence[str], series: Sequence[Series], title: str = "") -> None:
    """Grouped bars, one group per x label, one bar per series, Wilson intervals as error bars."""
    x = np.arange(len(groups))
    width = 0.8 / max(len(series), 1)
    for i, (label, color, rows) in enumerate(series):
        rate = np.array([np.nan if r is None else 100 * r["rate"] for r in rows])
        low = np.array([np.nan if r is None else 100 * r["wilson_low"] for r in rows])
        high = np.array([np.nan if r is None else 100 * r["wilson_high"] for r in rows])
        offset = (i - (len(series) - 1) / 2) * width
        ax.bar(x + offset, np.nan_to_num(rate), width * 0.92, color=color, label=label,
               edgecolor="white", linewidth=0.5)
        yerr = np.clip([rate - low, high - rate], 0, None)  # float noise at 0% / 100%
        ax.errorbar(x + offset, rate, yerr=yerr, fmt="none", ecolor="#222222",
                    elinewidth=0.9, capsize=2.5)
    ax.set_xticks(x, [textwrap.fill(str(g), 12) for g in groups], fontsize=8)  # long labels wrap
    ax.set_ylim(0, 105)
    ax.set_yticks(range(0, 101, 20))
    ax.yaxis.grid(True, color="#E5E5E5", linewidth=0.7)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10, fontweight="bold")


def _save(figure: Figure, path: Path, ylabel_axes=None) -> Path:
    if ylabel_axes is not None:
        ylabel_axes.set_ylabel("Success rate (%)")
    with warnings.catch_warnings():  # a crowded figure keeps its default margins; not worth a warning
        warnings.simplefilter("ignore", UserWarning)
        figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def _policy_color(policies: Sequence[str], policy: str) -> str:
    return POLICY_COLORS[list(policies).index(policy) % len(POLICY_COLORS)]


def _present(summary: pd.DataFrame, task_filter=None, condition: str | None = None) -> pd.DataFrame:
    rows = summary
    if condition is not None:
        rows = rows[rows["condition"] == condition]
    if task_filter is not None:
        rows = rows[rows["task"].isin(task_filter)]
    return rows


def aggregate_by_condition(summary: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """Pooled success by condition (no-intervention: the four non-relational tasks)."""
    def cell(policy, condition):
        task = NON_RELATIONAL if condition == "no_intervention" else ALL_TASKS
        return rate_of(summary, policy, task, condition)
    conditions = [c for c in AGGREGATE_CONDITIONS if any(cell(p, c) is not None for p in policies)]
    if not conditions:
        return None
    series = [(p, _policy_color(policies, p), [cell(p, c) for c in conditions]) for p in policies]
    figure, (ax,) = _figure(1.3 + 1.1 * len(conditions), 3.4)
    _bars(ax, [CONDITION_LABELS[c] for c in conditions], series, "Success by condition (all tasks)")
    _legend(ax)
    return _save(figure, path, ax)


def per_task_id(summary: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """ID spatial success per task and policy."""
    tasks = [t for t in TASKS if not _present(summary, [t], "id").empty]
    if not tasks:
        return None
    series = [(p, _policy_color(policies, p), [rate_of(summary, p, t, "id") for t in tasks])
              for p in policies]
    figure, (ax,) = _figure(1.3 + 1.2 * len(tasks), 3.4)
    _bars(ax, [TASK_LABELS[t] for t in tasks], series, "ID spatial success by task")
    _legend(ax)
    return _save(figure, path, ax)


def _per_policy_panels(summary, policies, conditions, path, title, tasks=TASKS, with_all=True,
                       context=()):
    """One panel per policy that has any of `conditions`; x = tasks (+ all), bars = `context` and
    `conditions` (context conditions, such as ID beside cross-task, never qualify a policy alone)."""
    shown = [p for p in policies
             if any(rate_of(summary, p, t, c) is not None for t in tasks for c in conditions)]
    if not shown:
        return None
    conditions = tuple(context) + tuple(conditions)
    groups = [t for t in tasks if any(rate_of(summary, p, t, c) is not None
                                      for p in shown for c in conditions)]
    if with_all:
        groups.append(ALL_TASKS)
    used = [c for c in conditions if any(rate_of(summary, p, t, c) is not None
                                          for p in shown for t in groups)]
    figure, axes = _figure(2.4 + (0.45 + 0.3 * len(used)) * len(groups), 0.6 + 2.6 * len(shown), len(shown))
    for ax, policy in zip(axes, shown):
        series = [(CONDITION_LABELS[c], SERIES_COLORS[i % len(SERIES_COLORS)],
                   [rate_of(summary, policy, t, c) for t in groups]) for i, c in enumerate(used)]
        _bars(ax, [TASK_LABELS[t] for t in groups], series, policy)
        ax.set_ylabel("Success rate (%)")
    _legend(axes[0])
    figure.suptitle(title, fontsize=11)
    return _save(figure, path)


def ood_vs_direct(summary: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """OOD spatial vs direct control on the same matched scenes, per task."""
    return _per_policy_panels(summary, policies, ("ood_matched", "direct"), path,
                              "OOD spatial vs direct control on matched scenes")


def paraphrase(summary: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """The four instruction conditions on the paraphrase subset of matched scenes (all tasks)."""
    shown = [p for p in policies if any(rate_of(summary, p, ALL_TASKS, c) is not None
                                        for c in PARAPHRASE_CONDITIONS)]
    if not shown:
        return None
    series = [(CONDITION_LABELS[c], SERIES_COLORS[i], [rate_of(summary, p, ALL_TASKS, c) for p in shown])
              for i, c in enumerate(PARAPHRASE_CONDITIONS)]
    figure, (ax,) = _figure(1.5 + 1.6 * len(shown), 3.4)
    _bars(ax, shown, series, "Paraphrase subset: original vs paraphrased instructions")
    _legend(ax)
    return _save(figure, path, ax)


def cross_task(summary: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """ID success with standard objects vs with objects from other tasks (and the novel-object pilot)."""
    return _per_policy_panels(summary, policies, ("cross_task", "novel_object"), path,
                              "Cross-task objects (descriptive, not paired scenes)", with_all=False,
                              context=("id",))


def no_intervention(summary: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """No-intervention per task (+ pooled non-relational) and Relational Placement's pair."""
    tasks = [t for t in NON_RELATIONAL_TASKS if not _present(summary, [t], "no_intervention").empty]
    pair = [c for c in ("no_movement", "movement_required")
            if not _present(summary, ["relational_placement"], c).empty]
    if not tasks and not pair:
        return None
    shown = [p for p in policies if any(rate_of(summary, p, t, "no_intervention") is not None for t in tasks)
             or any(rate_of(summary, p, "relational_placement", c) is not None for c in pair)]
    panels = int(bool(tasks)) + int(bool(pair))
    figure = Figure(figsize=(2.0 + 1.1 * (len(tasks) + 1) + 1.2 * len(pair), 3.6), dpi=120)
    FigureCanvasAgg(figure)
    ratios = ([len(tasks) + 1] if tasks else []) + ([max(len(pair), 1)] if pair else [])
    axes = list(figure.subplots(1, panels, squeeze=False, sharey=True,
                                gridspec_kw={"width_ratios": ratios})[0])
    if tasks:
        groups = tasks + [NON_RELATIONAL]
        series = [(p, _policy_color(policies, p), [rate_of(summary, p, t, "no_intervention") for t in groups])
                  for p in shown]
        _bars(axes[0], [TASK_LABELS[t] for t in groups], series, "No intervention")
    if pair:
        series = [(p, _policy_color(policies, p), [rate_of(summary, p, "relational_placement", c) for c in pair])
                  for p in shown]
        _bars(axes[-1], [CONDITION_LABELS[c] for c in pair], series, "Relational Placement")
    _legend(axes[-1])
    return _save(figure, path, axes[0])


def failure_composition(failures: pd.DataFrame, policies: Sequence[str], path: Path) -> Path | None:
    """Stacked shares of failure modes among failed valid rollouts: one bar per policy x condition."""
    pooled = failures[failures["task"] == ALL_TASKS]
    bars = []  # (label, counts by mode, total)
    for policy in policies:
        mine = pooled[pooled["policy"] == policy]
        for condition in dict.fromkeys(mine["condition"]):
            counts = mine[mine["condition"] == condition].groupby("failure_mode")["count"].sum()
            bars.append((f"{policy} | {CONDITION_LABELS.get(condition, condition)} (n={int(counts.sum())})",
                         counts, int(counts.sum())))
    if not bars:
        return None
    modes = [m for m in FAILURE_MODE_ORDER if (pooled["failure_mode"] == m).any()]
    colors = {m: (FAILURE_COLORS[-1] if m == UNANNOTATED else FAILURE_COLORS[i % (len(FAILURE_COLORS) - 1)])
              for i, m in enumerate(FAILURE_MODE_ORDER)}
    figure, (ax,) = _figure(9.5, 0.9 + 0.24 * len(bars))
    y = np.arange(len(bars))[::-1]
    left = np.zeros(len(bars))
    for mode in modes:
        share = np.array([100 * counts.get(mode, 0) / total for _, counts, total in bars])
        ax.barh(y, share, 0.75, left=left, color=colors[mode], label=failure_mode_label(mode),
                edgecolor="white", linewidth=0.4)
        left += share
    ax.set_yticks(y, [label for label, _, _ in bars], fontsize=7)
    ax.set_xlim(0, 100)
    ax.set_xlabel("Share of failed valid rollouts (%)")
    ax.set_title("Failure-mode composition", fontsize=10, fontweight="bold")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    _legend(ax)
    return _save(figure, path)


FIGURES = (
    ("aggregate_by_condition.png", aggregate_by_condition),
    ("per_task_id.png", per_task_id),
    ("per_task_ood_vs_direct.png", ood_vs_direct),
    ("paraphrase.png", paraphrase),
    ("cross_task.png", cross_task),
    ("no_intervention.png", no_intervention),
)


def write_figures(summary: pd.DataFrame, failures: pd.DataFrame, policies: Sequence[str],
                  out_dir: Path) -> list[Path]:
    """Every figure that has data, as PNG files in `out_dir`; returns the written paths.

    Labels are drawn literally (no mathtext: a policy named `p$\\frac{$x` is text, not TeX) and on
    one line (spabench.escaping.printable)."""
    import matplotlib

    from spabench.escaping import printable

    shown = {p: printable(p) for p in policies}
    if any(k != v for k, v in shown.items()):
        summary = summary.assign(policy=summary["policy"].map(lambda p: shown.get(p, printable(p))))
        failures = failures.assign(policy=failures["policy"].map(lambda p: shown.get(p, printable(p))))
        policies = list(dict.fromkeys(shown.values()))
    with matplotlib.rc_context({"text.parse_math": False}):
        written = [draw(summary, policies, out_dir / name) for name, draw in FIGURES]
        written.append(failure_composition(failures, policies, out_dir / "failure_modes.png"))
    return [p for p in written if p is not None]
