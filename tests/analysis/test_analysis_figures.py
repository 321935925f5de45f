"""The figures' publication rules, checked on the drawing (canvas items) and on the written files."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from analysis_synthetic import FULL_POLICIES, write_csv
from PIL import Image, ImageFilter

from spabench.analysis import figures
from spabench.analysis.drawing import fonts
from spabench.analysis.drawing.canvas import Canvas, Rect, Text
from spabench.analysis.failures import failure_mode_table
from spabench.analysis.outcomes import load_outcomes, policies_in_order
from spabench.analysis.rates import success_table
from spabench.suite.vocabulary import TASKS

BAR_FIGURES = [n for n in figures.FIGURES if n != "fig11_failure_modes"]
NAMES = {"groot_fllm": "GR00T-N1.7 F-LLM", "pi05": "pi0.5"}


@pytest.fixture(scope="module")
def tables(tmp_path_factory, synthetic):
    path = write_csv(tmp_path_factory.mktemp("fig") / "o.csv", synthetic.rows)
    outcomes = load_outcomes(path)
    return success_table(outcomes), failure_mode_table(outcomes), policies_in_order(outcomes)


@pytest.fixture(scope="module")
def written(tables, tmp_path_factory):
    summary, failures, policies = tables
    return figures.write_figures(summary, failures, policies, tmp_path_factory.mktemp("written"), names=NAMES)


def _stub_points() -> float:
    return figures.ZERO_STUB * figures.PLOT_HEIGHT / figures.Y_TOP


@pytest.mark.parametrize("name", BAR_FIGURES)
def test_every_bar_visible_and_labelled_with_its_count(tables, name):
    summary, failures, policies = tables
    canvas = figures.draw(name, summary, failures, policies, {})
    bars, counts = canvas.of_role("bar"), canvas.of_role("count")
    assert bars and min(b.h for b in bars) >= _stub_points() - 1e-9  # a 0% bar is still drawn
    assert len(counts) == len(bars)  # k/n on every bar, in the bar's order, centred on it
    for bar, label in zip(bars, counts):
        rate, k, n = bar.data[:3]
        assert label.text == f"{k}/{n}" and 0 <= k <= n and rate == pytest.approx(k / n)
        assert label.x == pytest.approx(bar.x + bar.w / 2)
        assert label.extent()[3] <= bar.y + 1e-6   # above the bar, not over it


def test_fig6_holds_ood_and_direct_per_task(tables):
    summary, failures, policies = tables
    canvas = figures.draw("fig6_ood_direct_per_task", summary, failures, policies, {})
    labels = [t.text for t in canvas.of_role("count")]
    # 3 policies x 6 tasks: OOD k/50 and direct k/20 bars, plus the all-task k/300 and k/120
    assert sum(label.endswith("/50") for label in labels) == 3 * len(TASKS)
    assert sum(label.endswith("/20") for label in labels) == 3 * len(TASKS)
    assert sum(label.endswith("/300") for label in labels) == 3
    assert sum(label.endswith("/120") for label in labels) == 3
    hatched = [b for b in canvas.of_role("bar") if b.hatch]
    assert {b.data[2] for b in hatched} == {20, 120}   # direct control is the hatched, light series


def test_fig11_per_task_and_policy_normalised_with_n(tables, synthetic):
    summary, failures, policies = tables
    canvas = figures.draw("fig11_failure_modes", summary, failures, policies, {"pi05": "pi0.5"})
    rows = [t.text for t in canvas.of_role("row_label")]
    assert len(rows) == len(TASKS) * len(FULL_POLICIES)
    assert "Counting | pi0.5" in rows
    totals = [int(t.text[2:]) for t in canvas.of_role("total")]
    expected = [sum(v for (p, t, c, _), v in synthetic.failures.items() if (p, t, c) == (policy, task, "ood"))
                for task in TASKS for policy in FULL_POLICIES]
    assert totals == expected
    widths, counted = {}, {}
    for share in canvas.of_role("share"):
        task, policy, _, count, _ = share.data
        widths[(task, policy)] = widths.get((task, policy), 0.0) + share.w
        counted[(task, policy)] = counted.get((task, policy), 0) + count
    assert len(widths) == len(rows)
    assert np.allclose(list(widths.values()), figures.SHARE_WIDTH)  # every bar is normalised
    assert list(counted.values()) == expected


def test_zero_rate_bar_is_visible(tmp_path):
    rows = [{"policy": "pi05", "task": task, "condition": "id", "evaluation_id": f"{task}{j}",
             "success": "0" if task == "counting" else str(j % 2)} for task in TASKS for j in range(10)]
    outcomes = load_outcomes(write_csv(tmp_path / "o.csv", rows, ("policy", "task", "condition",
                                                                  "evaluation_id", "success")))
    written = figures.write_figures(success_table(outcomes), failure_mode_table(outcomes), ["pi05"], tmp_path)
    assert list(written) == ["fig5_id_per_task"]
    canvas = figures.draw("fig5_id_per_task", success_table(outcomes), failure_mode_table(outcomes), ["pi05"], {})
    zero = [b for b in canvas.of_role("bar") if b.data[1] == 0]
    assert len(zero) == 1 and zero[0].h == pytest.approx(_stub_points())
    assert "0/10" in [t.text for t in canvas.of_role("count")]
    # the stub is drawn in the PNG: its pixels have the bar's colour
    png = np.asarray(Image.open(written["fig5_id_per_task"][0]).convert("RGB"))
    dx, dy, _, _ = canvas.page()
    scale = figures.PNG_DPI / 72
    x, y = round((zero[0].x + zero[0].w / 2 + dx) * scale), round((zero[0].y + zero[0].h / 2 + dy) * scale)
    assert tuple(png[y, x]) != (255, 255, 255)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _box(item) -> tuple:
    return item.extent() if isinstance(item, Text) else (item.x, item.y, item.x + item.w, item.y + item.h)


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_title_and_legend_never_cover_the_data(tables, name):
    summary, failures, policies = tables
    canvas = figures.draw(name, summary, failures, policies, NAMES)
    furniture = canvas.of_role("title") + canvas.of_role("legend_label") + canvas.of_role("legend_handle")
    data = [i for i in canvas.items if i.role in ("bar", "count", "share", "share_count", "row_label", "total",
                                                  "group_label", "value_label", "axis_title")]
    assert furniture and data
    for item in furniture:
        for other in data:
            assert not _overlap(_box(item), _box(other)), (name, item, other)
    labels = [_box(t) for t in canvas.of_role("legend_label")]
    assert not any(_overlap(a, b) for i, a in enumerate(labels) for b in labels[i + 1:]), name


def test_nothing_clipped_and_display_names(written):
    """The outer pixel frame of every PNG is background: no label runs off the canvas."""
    assert sorted(written) == sorted(figures.FIGURES)
    for name, paths in written.items():
        assert [p.suffix for p in paths] == [".png", ".pdf", ".svg"]
        with Image.open(paths[0]) as image:
            assert image.info["dpi"] == pytest.approx((figures.PNG_DPI, figures.PNG_DPI), abs=0.01)
            pixels = np.asarray(image.convert("L"))
        frame = np.concatenate([pixels[:3].ravel(), pixels[-3:].ravel(), pixels[:, :3].ravel(), pixels[:, -3:].ravel()])
        assert frame.min() >= 250, name
        svg = paths[2].read_text()
        assert "F-LLM" in svg and "pi0.5" in svg and "groot_fllm" not in svg, name  # long names wrap


def test_svg_is_well_formed_and_holds_every_label(tables, written):
    summary, failures, policies = tables
    for name, paths in written.items():
        canvas = figures.draw(name, summary, failures, policies, NAMES)
        root = ET.fromstring(paths[2].read_bytes())
        _, _, width, height = canvas.page()
        assert [float(v) for v in root.get("viewBox").split()] == pytest.approx([0, 0, width, height], abs=0.01)
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        assert texts == [t.text for t in canvas.items if isinstance(t, Text)], name


BLUR = ImageFilter.GaussianBlur(1.5)  # forgives anti-aliasing and kerning, not a misplaced bar or label


def _render_pdf(path: Path, dpi: int) -> np.ndarray:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        return np.asarray(document[0].render(scale=dpi / 72).to_pil().convert("L").filter(BLUR), dtype=float)
    finally:
        document.close()


def _gray(path: Path, size) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("L").resize(size, Image.Resampling.BOX).filter(BLUR), dtype=float)


def test_pdf_renders_like_the_png_with_embedded_truetype(written):
    """PDFium (Chrome's PDF engine) draws each PDF; at 100 dpi it matches the PNG reduced to the
    same size (mean grey-level difference under 5 of 255 after a slight blur), and a different
    figure does not (over 15): the embedded fonts and the geometry are right."""
    import pypdfium2

    differences = {}
    for name, (png, pdf, _) in written.items():
        rendered = _render_pdf(pdf, 100)
        own = np.abs(rendered - _gray(png, rendered.shape[::-1])).mean()
        differences[name] = own
        assert own < 5.0, (name, own)
        raw = pdf.read_bytes()
        assert b"/FontFile2" in raw and b"/Type3" not in raw and b"/CIDFontType2" in raw
        document = pypdfium2.PdfDocument(str(pdf))
        text = document[0].get_textpage().get_text_range()
        document.close()
        assert ("Success rate (%)" in text) != (name == "fig11_failure_modes"), name
    a, b = written["fig5_id_per_task"][1], written["fig9_no_intervention"][0]
    rendered = _render_pdf(a, 100)
    assert np.abs(rendered - _gray(b, rendered.shape[::-1])).mean() > 15 > 3 * max(differences.values())


def test_outputs_are_byte_reproducible(tables, tmp_path):
    summary, failures, policies = tables
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = figures.write_figures(summary, failures, policies, tmp_path / "a")
    second = figures.write_figures(summary, failures, policies, tmp_path / "b")
    assert list(first) == list(figures.FIGURES)
    for name in first:
        for p, q in zip(first[name], second[name]):
            assert p.read_bytes() == q.read_bytes(), p.name


def test_font_subset_keeps_the_glyphs_drawn():
    """fontTools (an independent TrueType reader) finds the subset's glyphs identical to the
    original's, the advances the layout uses, and nothing but the glyphs asked for."""
    from fontTools.ttLib import TTFont

    face = fonts.face("normal")
    text = "Pi0.5 | 12/50 ±"
    gids = face.glyphs(text)
    original = TTFont(str(face.path))
    subset = TTFont(io.BytesIO(face.subset(gids)))
    order = original.getGlyphOrder()
    assert subset["maxp"].numGlyphs == max(gids) + 1
    cmap = original.getBestCmap()
    for char, gid in zip(text, gids):
        assert order[gid] == cmap[ord(char)]
        name = subset.getGlyphOrder()[gid]
        assert subset["glyf"][name].getCoordinates(subset["glyf"])[0] == \
            original["glyf"][order[gid]].getCoordinates(original["glyf"])[0]
        assert subset["hmtx"][name][0] == original["hmtx"][order[gid]][0] == face.advance(gid)
    unused = face.glyph("Q")
    assert unused not in gids and subset["glyf"][subset.getGlyphOrder()[unused]].numberOfContours == 0
    assert face.width(text, 10) == pytest.approx(sum(original["hmtx"][cmap[ord(c)]][0] for c in text) * 10
                                                 / original["head"].unitsPerEm)


def test_canvas_sizes_the_page_to_its_content():
    canvas = Canvas()
    canvas.rect(10, 20, 30, 40, "#000000")
    label = canvas.text(0, 0, "a long label", 8, align="end", rotation=90)
    x0, y0, x1, y1 = canvas.bounds()
    box = label.extent()
    assert x0 <= min(10, box[0]) - canvas.pad + 1e-9 and x1 >= 40 + canvas.pad - 1e-9
    assert y0 <= box[1] - canvas.pad + 1e-9 and y1 >= 60 + canvas.pad - 1e-9
    assert isinstance(canvas.items[0], Rect)


def test_label_with_tex_and_newline_is_literal(tables, tmp_path):
    summary, failures, policies = tables
    written = figures.write_figures(summary, failures, policies, tmp_path,
                                    names={"pi05": "p$\\frac{$x\nnext"}, formats=("svg",))
    svg = Path(written["fig5_id_per_task"][0]).read_text()
    assert "p$\\frac{$x next" in svg
