"""The figures' publication rules, checked on the drawn artists and the written files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from analysis_synthetic import FULL_POLICIES, write_csv
from PIL import Image

from spabench.analysis import figures
from spabench.analysis.failures import failure_mode_table
from spabench.analysis.outcomes import load_outcomes, policies_in_order
from spabench.analysis.rates import success_table
from spabench.suite.vocabulary import TASKS


@pytest.fixture(scope="module")
def tables(tmp_path_factory, synthetic):
    path = write_csv(tmp_path_factory.mktemp("fig") / "o.csv", synthetic.rows)
    outcomes = load_outcomes(path)
    return success_table(outcomes), failure_mode_table(outcomes), policies_in_order(outcomes)


def _bars_and_labels(figure):
    from matplotlib.collections import PolyCollection

    heights, labels = [], []
    for ax in figure.axes:
        for collection in ax.collections:
            if isinstance(collection, PolyCollection):
                heights += [float(np.ptp(path.vertices[:, 1])) for path in collection.get_paths()]
        labels += [t.get_text() for t in ax.texts]
    return heights, labels


@pytest.mark.parametrize("name", [n for n in figures.FIGURES if n != "fig11_failure_modes"])
def test_every_bar_visible_and_labelled_with_n(tables, name):
    summary, failures, policies = tables
    figure = figures.draw(name, summary, failures, policies, {})
    heights, labels = _bars_and_labels(figure)
    assert heights and min(heights) >= figures.ZERO_STUB - 1e-9  # a 0% bar is still drawn
    counts = [label for label in labels if "/" in label]
    assert len(counts) == len(heights)  # k/n on every bar
    for label in counts:
        k, n = map(int, label.split("/"))
        assert 0 <= k <= n


def test_fig6_holds_ood_and_direct_per_task(tables):
    summary, failures, policies = tables
    figure = figures.draw("fig6_ood_direct_per_task", summary, failures, policies, {})
    _, labels = _bars_and_labels(figure)
    # 3 policies x 6 tasks: OOD k/50 and direct k/20 bars, plus the all-task k/300 and k/120
    assert sum(label.endswith("/50") for label in labels) == 3 * len(TASKS)
    assert sum(label.endswith("/20") for label in labels) == 3 * len(TASKS)
    assert sum(label.endswith("/300") for label in labels) == 3
    assert sum(label.endswith("/120") for label in labels) == 3


def test_fig11_per_task_and_policy_normalised_with_n(tables, synthetic):
    summary, failures, policies = tables
    figure = figures.draw("fig11_failure_modes", summary, failures, policies, {"pi05": "pi0.5"})
    ax = figure.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert len(rows) == len(TASKS) * len(FULL_POLICIES)
    assert "Counting | pi0.5" in rows
    totals = [int(t.get_text()[2:]) for t in ax.texts if t.get_text().startswith("n=")]
    expected = [sum(v for (p, t, c, _), v in synthetic.failures.items() if (p, t, c) == (policy, task, "ood"))
                for task in TASKS for policy in FULL_POLICIES]
    assert totals == expected
    (collection,) = ax.collections
    widths = {}
    for path in collection.get_paths():
        y = round(float(path.vertices[:, 1].mean()), 3)
        widths[y] = widths.get(y, 0.0) + float(np.ptp(path.vertices[:, 0]))
    assert len(widths) == len(rows)
    assert np.allclose(list(widths.values()), 100.0)  # every bar is normalised


def test_zero_rate_bar_is_visible(tmp_path):
    rows = [{"policy": "pi05", "task": task, "condition": "id", "evaluation_id": f"{task}{j}",
             "success": "0" if task == "counting" else str(j % 2)} for task in TASKS for j in range(10)]
    outcomes = load_outcomes(write_csv(tmp_path / "o.csv", rows, ("policy", "task", "condition",
                                                                  "evaluation_id", "success")))
    written = figures.write_figures(success_table(outcomes), failure_mode_table(outcomes), ["pi05"], tmp_path)
    assert list(written) == ["fig5_id_per_task"]
    figure = figures.draw("fig5_id_per_task", success_table(outcomes), failure_mode_table(outcomes), ["pi05"], {})
    heights, labels = _bars_and_labels(figure)
    assert "0/10" in labels and min(heights) == pytest.approx(figures.ZERO_STUB)


def test_nothing_clipped_and_display_names(tables, tmp_path):
    """The outer pixel frame of every PNG is background: no label runs off the canvas."""
    summary, failures, policies = tables
    names = {"groot_fllm": "GR00T-N1.7 F-LLM", "pi05": "pi0.5"}
    written = figures.write_figures(summary, failures, policies, tmp_path, names=names)
    assert sorted(written) == sorted(figures.FIGURES)
    for name, paths in written.items():
        assert [p.suffix for p in paths] == [".png", ".pdf", ".svg"]
        with Image.open(paths[0]) as image:
            pixels = np.asarray(image.convert("L"))
        frame = np.concatenate([pixels[:3].ravel(), pixels[-3:].ravel(), pixels[:, :3].ravel(), pixels[:, -3:].ravel()])
        assert frame.min() >= 250, name
        svg = paths[2].read_text()
        if name != "fig11_failure_modes":
            assert "F-LLM" in svg and "pi0.5" in svg and "groot_fllm" not in svg, name  # long names wrap


def test_label_with_mathtext_and_newline_is_literal(tables, tmp_path):
    summary, failures, policies = tables
    written = figures.write_figures(summary, failures, policies, tmp_path,
                                    names={"pi05": "p$\\frac{$x\nnext"}, formats=("svg",))
    svg = Path(written["fig5_id_per_task"][0]).read_text()
    assert "p$\\frac{$x next" in svg
