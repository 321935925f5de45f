"""The figures' publication rules, checked on the matplotlib figures and on the written files.

Sizes are read back from the files themselves: PDFium (Chrome's PDF engine, an independent reader)
gives the size of every character the PDF's text operators draw, and the SVG's text elements carry
their own font sizes.
"""

from __future__ import annotations

import ctypes
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from analysis_synthetic import FULL_POLICIES, write_csv
from PIL import Image, ImageFilter

from spabench.analysis import figures, palette
from spabench.analysis.failures import failure_mode_table
from spabench.analysis.outcomes import load_outcomes, policies_in_order
from spabench.analysis.rates import success_table
from spabench.errors import ConfigError
from spabench.suite.vocabulary import TASKS

BAR_FIGURES = [n for n in figures.FIGURES if n != "fig11_failure_modes"]
NAMES = {"groot_fllm": "GR00T-N1.7 F-LLM", "pi05": "pi0.5"}
WIDTHS = ("single", "double")
SVG = "{http://www.w3.org/2000/svg}"
MIN_PT = 6.0


@pytest.fixture(scope="module")
def tables(tmp_path_factory, synthetic):
    path = write_csv(tmp_path_factory.mktemp("fig") / "o.csv", synthetic.rows)
    outcomes = load_outcomes(path)
    return success_table(outcomes), failure_mode_table(outcomes), policies_in_order(outcomes)


@pytest.fixture(scope="module", params=WIDTHS)
def written(request, tables, tmp_path_factory):
    summary, failures, policies = tables
    settings = figures.FigureSettings(width=request.param, formats=figures.FORMATS)
    out = tmp_path_factory.mktemp(f"written_{request.param}")
    return settings, figures.write_figures(summary, failures, policies, out, names=NAMES, settings=settings)


def _draw(tables, name, width="single", names=None):
    summary, failures, policies = tables
    return figures.draw(name, summary, failures, policies, names or {}, settings=figures.FigureSettings(width))


def _texts(figure) -> list:
    """Every visible, non-empty text artist of the figure (tick labels, legend, counts, titles)."""
    from matplotlib.text import Text

    return [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]


# ---------------------------------------------------------------- what the figures show

@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", BAR_FIGURES)
def test_every_bar_visible_and_labelled_with_its_count(tables, name, width):
    figure = _draw(tables, name, width)
    renderer = figure.canvas.get_renderer()
    bars = figure.spabench_bars
    assert bars
    for patch, label, (successes, trials, rate, _, _) in bars:
        assert patch.get_height() >= figures.ZERO_STUB - 1e-9          # a 0% bar is still drawn
        assert label.get_text() == f"{int(successes)}/{int(trials)}" and rate == pytest.approx(successes / trials)
        box, text = patch.get_window_extent(renderer), label.get_window_extent(renderer)
        assert (text.x0 + text.x1) / 2 == pytest.approx((box.x0 + box.x1) / 2, abs=0.5)   # centred on it
        assert text.y0 >= box.y1 - 0.5                                  # above the bar, not over it
        assert text.y1 <= patch.axes.bbox.y1 + 0.5                      # inside its panel
    labels = [label.get_window_extent(renderer) for _, label, _ in bars]
    for i, a in enumerate(labels):   # neighbouring k/n labels never overlap
        assert not any(a.overlaps(b) and a.intersection(a, b).width > 0.5 for b in labels[i + 1:]), name


def test_fig6_holds_ood_and_direct_per_task(tables):
    figure = _draw(tables, "fig6_ood_direct_per_task")
    labels = [label.get_text() for _, label, _ in figure.spabench_bars]
    # 3 policies x 6 tasks: OOD k/50 and direct k/20 bars, plus the all-task k/300 and k/120
    assert sum(label.endswith("/50") for label in labels) == 3 * len(TASKS)
    assert sum(label.endswith("/20") for label in labels) == 3 * len(TASKS)
    assert sum(label.endswith("/300") for label in labels) == 3
    assert sum(label.endswith("/120") for label in labels) == 3
    hatched = {int(cell[1]) for patch, _, cell in figure.spabench_bars if patch.get_hatch()}
    assert hatched == {20, 120}   # direct control is the hatched, light series
    assert "20 matched scenes" in figures.CAPTIONS["fig6_ood_direct_per_task"]


def test_fig11_per_task_and_policy_normalised_with_n(tables, synthetic):
    figure = _draw(tables, "fig11_failure_modes", names={"pi05": "pi0.5"})
    expected = {(task, policy): sum(v for (p, t, c, _), v in synthetic.failures.items()
                                    if (p, t, c) == (policy, task, "ood"))
                for task in TASKS for policy in FULL_POLICIES}
    totals = {(task, policy): n for text, task, policy, n in figure.spabench_totals}
    assert totals == {k: v for k, v in expected.items() if v}
    assert all(text.get_text() == f"n={n}" for text, _, _, n in figure.spabench_totals)
    widths, counted = {}, {}
    for patch, task, policy, _, count, _ in figure.spabench_shares:
        widths[(task, policy)] = widths.get((task, policy), 0.0) + patch.get_width()
        counted[(task, policy)] = counted.get((task, policy), 0) + count
    assert np.allclose(list(widths.values()), 100.0)   # every bar is normalised
    assert counted == totals
    ticks = [t.get_text() for ax in figure.axes for t in ax.get_yticklabels()]
    assert ticks.count("pi0.5") == len(TASKS)


def test_figures_show_as_many_policies_as_the_style_has_colours(tmp_path):
    """Eleven policies: the figures draw the first eight (Okabe-Ito's eight colours, one each), the
    report's tables keep all eleven and report.md names the three left out; a lab's sheet with a
    longer colour cycle draws them all."""
    from spabench.analysis.commands import ReportConfig, report

    policies = [f"policy{i:02d}" for i in range(11)]
    rows = [{"policy": p, "task": task, "condition": "id", "evaluation_id": f"{task}{j}", "success": str((i + j) % 2)}
            for i, p in enumerate(policies) for task in TASKS[:2] for j in range(4)]
    csv_path = write_csv(tmp_path / "o.csv", rows, ("policy", "task", "condition", "evaluation_id", "success"))
    outcomes = load_outcomes(csv_path)
    summary, failures = success_table(outcomes), failure_mode_table(outcomes)
    job = figures.start_figures(summary, failures, policies, tmp_path / "f", jobs=1)
    assert job.policies == policies[:8]
    (tmp_path / "f").mkdir()
    assert list(job.result()) == ["fig5_id_per_task"]
    figure = figures.draw("fig5_id_per_task", summary, failures, job.policies, {})
    assert {text.get_text() for text in figure.legends[0].get_texts()} == set(policies[:8])
    lab = tmp_path / "lab.mplstyle"
    lab.write_text("axes.prop_cycle: cycler('color', [" + ", ".join(f"'{i:02d}{i:02d}{i:02d}'" for i in range(12)) + "])\n")
    assert figures.figure_policies(policies, figures.FigureSettings(style=lab)) == policies

    out = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"outcomes": str(csv_path), "out": str(out), "campaign_dir": None,
                                               "bootstrap": 200})) == 0
    md = (out / "report.md").read_text()
    assert "The figures show the first 8 of 11 policies" in md
    assert "Left out of the figures (3): policy08, policy09, policy10." in md
    assert set(__import__("pandas").read_csv(out / "summary.csv")["policy"]) == set(policies)


def test_zero_rate_bar_is_visible(tmp_path):
    rows = [{"policy": "pi05", "task": task, "condition": "id", "evaluation_id": f"{task}{j}",
             "success": "0" if task == "counting" else str(j % 2)} for task in TASKS for j in range(10)]
    outcomes = load_outcomes(write_csv(tmp_path / "o.csv", rows, ("policy", "task", "condition",
                                                                  "evaluation_id", "success")))
    summary, failures = success_table(outcomes), failure_mode_table(outcomes)
    written = figures.write_figures(summary, failures, ["pi05"], tmp_path, formats=("png",))
    assert list(written) == ["fig5_id_per_task"]
    figure = figures.draw("fig5_id_per_task", summary, failures, ["pi05"], {})
    zero = [(patch, label) for patch, label, cell in figure.spabench_bars if cell[0] == 0]
    assert len(zero) == 1 and zero[0][0].get_height() == pytest.approx(figures.ZERO_STUB)
    assert zero[0][1].get_text() == "0/10"
    # the stub is drawn in the PNG: the pixel at its centre has the bar's colour
    box = zero[0][0].get_window_extent(figure.canvas.get_renderer())
    scale = figures.PNG_DPI / figure.dpi
    with Image.open(written["fig5_id_per_task"][0]) as image:
        png = np.asarray(image.convert("RGB"))
    x, y = round((0.75 * box.x0 + 0.25 * box.x1) * scale), round(png.shape[0] - (box.y0 + box.y1) / 2 * scale)
    r, g, b = (int(v) for v in png[y, x])   # the bar's blue (fill or edge), not white or the whisker's grey
    assert b - r > 60 and b > g, (r, g, b)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_title_and_legend_never_cover_the_data_and_nothing_is_clipped(tables, name, width):
    figure = _draw(tables, name, width, NAMES)
    renderer = figure.canvas.get_renderer()
    page = figure.bbox
    furniture = [legend.get_window_extent(renderer) for legend in figure.legends]
    if figure._suptitle is not None:
        furniture.append(figure._suptitle.get_window_extent(renderer))
    assert furniture
    data = [ax.bbox for ax in figure.axes] + [t.get_window_extent(renderer) for ax in figure.axes
                                              for t in ax.texts]
    for item in furniture:
        for other in data:
            assert not item.overlaps(other), (name, item, other)
    for text in _texts(figure):   # every label on the page
        box = text.get_window_extent(renderer)
        assert box.x0 >= page.x0 - 0.5 and box.x1 <= page.x1 + 0.5 and box.y0 >= -0.5 and box.y1 <= page.y1 + 0.5, \
            (name, text.get_text(), box)


# ---------------------------------------------------------------- the written files

def _pdf_characters(path: Path) -> list[tuple[str, float, str]]:
    """(character, font size in pt, font name) of every character the PDF's text operators draw
    (PDFium's text page; characters PDFium generates itself, like line breaks, left out)."""
    import pypdfium2
    import pypdfium2.raw as raw

    document = pypdfium2.PdfDocument(str(path))
    try:
        page = document[0]
        textpage = page.get_textpage()
        name = ctypes.create_string_buffer(256)
        flags = ctypes.c_int()
        chars = []
        for i in range(textpage.count_chars()):
            if raw.FPDFText_IsGenerated(textpage.raw, i):
                continue
            raw.FPDFText_GetFontInfo(textpage.raw, i, name, 256, ctypes.byref(flags))
            chars.append((chr(raw.FPDFText_GetUnicode(textpage.raw, i)), raw.FPDFText_GetFontSize(textpage.raw, i),
                          name.value.decode()))
        return chars
    finally:
        document.close()


def _pdf_width_in(path: Path) -> float:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        return document[0].get_width() / 72
    finally:
        document.close()


def _svg_texts(path: Path) -> list[tuple[str, float]]:
    """(text, font size) of every SVG text element (user units are points: the viewBox is in pt)."""
    root = ET.fromstring(path.read_bytes())
    out = []
    for element in root.iter(f"{SVG}text"):
        size = re.search(r"font-size:\s*([\d.]+)px", element.get("style", ""))
        assert size, element.attrib
        out.append(("".join(element.itertext()), float(size.group(1))))
    return out


def test_smallest_text_is_at_least_6_pt_at_the_printed_width(written):
    """Every figure at 3.5 in and at 7 in: the page is exactly that wide, and no character the PDF
    draws nor any SVG text element is below 6 pt."""
    settings, files = written
    assert sorted(files) == sorted(figures.FIGURES)
    for name, (png, pdf, svg) in files.items():
        assert _pdf_width_in(pdf) == pytest.approx(settings.inches, abs=1e-3), name
        chars = [c for c in _pdf_characters(pdf) if not c[0].isspace()]
        assert len(chars) > 50, name
        smallest = min(size for _, size, _ in chars)
        assert smallest >= MIN_PT - 1e-6, (name, settings.width, smallest)
        texts = _svg_texts(svg)
        assert min(size for _, size in texts) >= MIN_PT - 1e-6, name
        root = ET.fromstring(svg.read_bytes())
        assert float(root.get("width").removesuffix("pt")) == pytest.approx(72 * settings.inches, abs=0.01)
        with Image.open(png) as image:
            assert image.info["dpi"] == pytest.approx((figures.PNG_DPI, figures.PNG_DPI), abs=0.01)
            assert image.width == pytest.approx(settings.inches * figures.PNG_DPI, abs=1)
            pixels = np.asarray(image.convert("L"))
        frame = np.concatenate([pixels[:3].ravel(), pixels[-3:].ravel(), pixels[:, :3].ravel(), pixels[:, -3:].ravel()])
        assert frame.min() >= 250, name   # no ink touches the page edge: nothing runs off it


def test_pdf_fonts_are_embedded_truetype(written):
    _, files = written
    for name, (_, pdf, _) in files.items():
        raw = pdf.read_bytes()
        assert b"/FontFile2" in raw and b"/CIDFontType2" in raw, name   # TrueType (Type 42) programs
        assert b"/Type3" not in raw and b"/FontFile3" not in raw, name
        assert {font for _, _, font in _pdf_characters(pdf)} <= {f for f in re.findall(
            r"/BaseFont /(\S+)", raw.decode("latin-1"))}


def test_svg_keeps_every_label_as_text(tables, written):
    """Every line of every text artist of the figure is a text element of its SVG (no glyph paths)."""
    settings, files = written
    summary, failures, policies = tables
    for name, (_, _, svg) in files.items():
        figure = figures.draw(name, summary, failures, policies, NAMES, settings=settings)
        shown = sorted(t for t, _ in _svg_texts(svg))
        expected = sorted(line for text in _texts(figure) for line in text.get_text().split("\n") if line.strip())
        assert shown == expected, name
        assert "F-LLM" in " ".join(shown) and "pi0.5" in " ".join(shown), name


def test_pdf_renders_like_the_png(written):
    """PDFium draws each PDF; at 100 dpi it matches the PNG reduced to the same size (mean grey-level
    difference under 5 of 255 after a slight blur), and a different figure does not (over 15)."""
    import pypdfium2

    blur = ImageFilter.GaussianBlur(1.5)

    def render(path: Path) -> np.ndarray:
        document = pypdfium2.PdfDocument(str(path))
        try:
            return np.asarray(document[0].render(scale=100 / 72).to_pil().convert("L").filter(blur), dtype=float)
        finally:
            document.close()

    def gray(path: Path, size) -> np.ndarray:
        with Image.open(path) as image:
            return np.asarray(image.convert("L").resize(size, Image.Resampling.BOX).filter(blur), dtype=float)

    _, files = written
    differences = {}
    for name, (png, pdf, _) in files.items():
        rendered = render(pdf)
        differences[name] = np.abs(rendered - gray(png, rendered.shape[::-1])).mean()
        assert differences[name] < 5.0, (name, differences[name])
    rendered = render(files["fig5_id_per_task"][1])
    assert np.abs(rendered - gray(files["fig11_failure_modes"][0], rendered.shape[::-1])).mean() > 15


def test_outputs_are_byte_reproducible(tables, tmp_path):
    summary, failures, policies = tables
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = figures.write_figures(summary, failures, policies, tmp_path / "a", jobs=1)   # one by one
    second = figures.write_figures(summary, failures, policies, tmp_path / "b", jobs=2)  # two forked workers
    assert list(first) == list(figures.FIGURES)
    for name in first:
        for p, q in zip(first[name], second[name], strict=True):
            assert p.read_bytes() == q.read_bytes(), p.name


def test_label_with_tex_and_newline_is_literal(tables, tmp_path):
    summary, failures, policies = tables
    written = figures.write_figures(summary, failures, policies, tmp_path,
                                    names={"pi05": "p$\\frac{$x\nnext"}, formats=("svg",))
    svg = Path(written["fig5_id_per_task"][0]).read_text()
    assert "p$\\frac{$x next" in svg


# ---------------------------------------------------------------- style and settings

def test_style_sheet_keeps_the_okabe_ito_policy_colours():
    import matplotlib.style

    with matplotlib.style.context([str(figures.STYLE_SHEET)], after_reset=True):
        assert figures._policy_colors() == list(palette.POLICY_COLORS)


def test_a_lab_style_sheet_changes_the_output(tables, tmp_path):
    """A lab's sheet on top of spabench's: its font size and first colour reach the SVG; the caller's
    own matplotlib settings are untouched afterwards."""
    import matplotlib

    summary, failures, policies = tables
    lab = tmp_path / "lab.mplstyle"
    lab.write_text("font.size: 9\nxtick.labelsize: 8\naxes.prop_cycle: cycler('color', ['AA3377', '228833'])\n")
    before = dict(matplotlib.rcParams)
    runs = {}
    for label, settings in (("spabench", figures.FigureSettings()), ("lab", figures.FigureSettings(style=lab))):
        (tmp_path / label).mkdir()
        runs[label] = figures.write_figures(summary, failures, policies, tmp_path / label, formats=("svg", "pdf"),
                                            settings=settings)
    default, styled = (runs[k]["fig5_id_per_task"][0].read_text() for k in ("spabench", "lab"))
    counts = {k: {size for text, size in _svg_texts(runs[k]["fig5_id_per_task"][0]) if re.fullmatch(r"\d+/\d+", text)}
              for k in runs}
    assert counts == {"spabench": {6.0}, "lab": {9.0}}
    assert "#aa3377" in styled.lower() and "#aa3377" not in default.lower()
    assert "#0072b2" in default.lower() and "#0072b2" not in styled.lower()
    sizes = {size for _, size, _ in _pdf_characters(runs["lab"]["fig5_id_per_task"][1])}
    assert 9.0 in sizes and 8.0 in sizes
    assert dict(matplotlib.rcParams) == before


def test_figure_settings_refuse_what_they_do_not_read(tmp_path):
    assert figures.FigureSettings.from_mapping({"width": "double"}).inches == 7.0
    assert figures.FigureSettings.from_mapping(None).inches == 3.5
    with pytest.raises(ConfigError, match="figures.colour.*allowed: figures.width, figures.style, figures.formats"):
        figures.FigureSettings.from_mapping({"colour": "red"})
    with pytest.raises(ConfigError, match="figures.width: 'triple'"):
        figures.FigureSettings.from_mapping({"width": "triple"})
    with pytest.raises(ConfigError, match="is not a file"):
        figures.FigureSettings.from_mapping({"style": str(tmp_path / "missing.mplstyle")})
    assert figures.FigureSettings.from_mapping(None).formats == ("svg",)
    assert figures.FigureSettings.from_mapping({"formats": ["pdf", "png", "pdf"]}).formats == ("pdf", "png")
    for formats in (["pdf"], [], ["svg", "eps"], "svg", [1]):   # the report's pages show svg or png
        with pytest.raises(ConfigError, match="figures.formats: .*svg or png"):
            figures.FigureSettings.from_mapping({"formats": formats})
    bad = tmp_path / "bad.mplstyle"
    bad.write_text("font.size: huge\n")
    with pytest.raises(ConfigError, match="bad.mplstyle"):
        figures.FigureSettings(style=bad).check_style()


def test_config_default_is_the_dataclass_default():
    """The `figures` key's declared default (what `report` and `compare` draw with when no figures.* is
    given) lists exactly FigureSettings' fields with their defaults."""
    import dataclasses

    from spabench.analysis.commands import ReportConfig
    from spabench.analysis.compare import CompareConfig

    declared = ReportConfig.from_mapping({}).figures
    assert CompareConfig.from_mapping({}).figures == declared
    assert {k: tuple(v) if isinstance(v, list) else v for k, v in declared.items()} \
        == {f.name: f.default for f in dataclasses.fields(figures.FigureSettings)}


def test_report_import_leaves_matplotlib_for_the_figures():
    """`spabench report` imports matplotlib only when it draws (commands that never draw skip it)."""
    import subprocess
    import sys

    code = ("import sys, spabench.analysis.commands, spabench.analysis.report, spabench.analysis.html; "
            "print(sorted(m for m in ('matplotlib', 'markdown_it', 'fontTools') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_report_page_through_markdown_it(tmp_path):
    """report.html is CommonMark + tables from markdown-it-py: raw HTML in a name is shown as text,
    an image is inlined from its file, and an image that is not a figure of the report is refused."""
    from spabench.analysis.html import markdown_to_html

    figure = tmp_path / "fig5.svg"
    figure.write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    markdown = ("# Report\n\n## Success by condition\n\n| policy | rate |\n|---|---|\n| <script>x</script> \\| a | "
                "**50%** |\n\n![fig5](fig5.png)\n\nFig. 5. ([PDF](fig5.pdf))\n")
    page = markdown_to_html(markdown, {"fig5.png": figure})
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt; | a" in page
    assert '<h2 id="success-by-condition">' in page and "<strong>50%</strong>" in page
    assert 'data-figure="fig5.png"' in page and "data:image/svg+xml;base64," in page
    assert '<a href="fig5.pdf">PDF</a>' in page
    with pytest.raises(ValueError, match="other.png"):
        markdown_to_html("![x](other.png)\n", {"fig5.png": figure})
