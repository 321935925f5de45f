"""End to end: a synthetic campaign the size of the published one through `spabench report`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_synthetic import FULL_POLICIES, ID_ONLY_POLICIES, ID_ONLY_TRIALS, write_csv
from PIL import Image
from statsmodels.stats.proportion import proportion_confint

from spabench.analysis.commands import ReportConfig, report
from spabench.errors import ConfigError
from spabench.suite.vocabulary import TASKS

NON_RELATIONAL_TASKS = ("object_state", "referential_description", "ordinal_position", "counting")
FIGURES = ("fig5_id_per_task", "fig6_ood_direct_per_task", "fig7_paraphrase", "fig8_cross_task",
           "fig9_no_intervention", "fig10_relational_movement", "fig11_failure_modes")


def run_report(tmp_path: Path, csv_path: Path, **extra) -> Path:
    out = tmp_path / "report"
    cfg = ReportConfig.from_mapping({"outcomes": str(csv_path), "campaign_dir": None, "out": str(out),
                                       "bootstrap_seed": 0, "bootstrap": 500,
                                       "unpaired": "exclude", **extra})  # slices of the synthetic campaign cut pairs
    assert report(cfg) == 0
    return out


@pytest.fixture(scope="module")
def published_size(tmp_path_factory, synthetic):
    tmp = tmp_path_factory.mktemp("published")
    csv_path = write_csv(tmp / "outcomes.csv", synthetic.rows)
    return run_report(tmp, csv_path, figures={"formats": ["png", "pdf", "svg"]})


def expected_summary(synthetic) -> dict:
    """Every (policy, task, condition) the report must show, with its counts, from the generator."""
    expected = {key: tuple(v) for key, v in synthetic.cells.items()}
    pooled: dict = {}
    for (policy, task, condition), (k, n) in synthetic.cells.items():
        cell = pooled.setdefault((policy, "all", condition), [0, 0])
        cell[0] += k
        cell[1] += n
        if condition == "no_intervention" and task in NON_RELATIONAL_TASKS:
            cell = pooled.setdefault((policy, "non_relational", condition), [0, 0])
            cell[0] += k
            cell[1] += n
        if condition == "id" and (policy, task, "cross_task") in synthetic.cells:
            cell = pooled.setdefault((policy, "all", "id_cross_task_subset"), [0, 0])
            cell[0] += k
            cell[1] += n
    expected.update({key: tuple(v) for key, v in pooled.items()})
    return expected


def test_summary_reproduces_every_cell(published_size, synthetic):
    summary = pd.read_csv(published_size / "summary.csv")
    assert list(summary.columns) == ["policy", "task", "condition", "successes", "trials", "rate",
                                     "wilson_low", "wilson_high"]
    got = {(r.policy, r.task, r.condition): (r.successes, r.trials) for r in summary.itertuples()}
    expected = expected_summary(synthetic)
    assert got == expected
    low, high = proportion_confint(summary["successes"], summary["trials"], method="wilson")
    np.testing.assert_allclose(summary["rate"], summary["successes"] / summary["trials"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(summary["wilson_low"], np.clip(low, 0, 1), atol=1e-12)
    np.testing.assert_allclose(summary["wilson_high"], np.clip(high, 0, 1), atol=1e-12)


def test_protocol_sizes_of_aggregates(published_size):
    summary = pd.read_csv(published_size / "summary.csv").set_index(["policy", "task", "condition"])
    for policy in FULL_POLICIES:
        assert summary.loc[(policy, "non_relational", "no_intervention"), "trials"] == 80
        assert summary.loc[(policy, "all", "ood_matched"), "trials"] == 120
        assert summary.loc[(policy, "all", "direct"), "trials"] == 120
        assert summary.loc[(policy, "all", "ood_paraphrase_subset"), "trials"] == 60
        assert summary.loc[(policy, "all", "direct_paraphrase_subset"), "trials"] == 60
        assert summary.loc[(policy, "all", "cross_task"), "trials"] == 100  # strict: no novel pilot
        assert summary.loc[(policy, "all", "id_cross_task_subset"), "trials"] == 100
        assert summary.loc[(policy, "all", "ood"), "trials"] == 300
        trials = summary.xs("all", level="task")["trials"]
        assert trials.loc[policy].drop(["ood_matched", "ood_paraphrase_subset",
                                        "direct_paraphrase_subset", "id_cross_task_subset"]).sum() == 900
    for policy, per_task in ID_ONLY_TRIALS.items():
        assert set(summary.loc[policy].index.get_level_values("condition")) == {"id"}
        assert summary.loc[(policy, "all", "id"), "trials"] == 6 * per_task
    assert summary.xs("all", level="task").xs("id", level="condition")["trials"].sum() == 3 * 120 + 120 + 72
    valid = summary.drop(index=["all", "non_relational"], level="task").drop(
        index=["ood_matched", "ood_paraphrase_subset", "direct_paraphrase_subset"], level="condition")
    assert valid["trials"].sum() == 2892


def test_contrasts_match_generator_pairs(published_size, synthetic):
    contrasts = pd.read_csv(published_size / "contrasts.csv")
    assert list(contrasts.columns) == ["policy", "contrast", "task", "estimate", "ci_low", "ci_high",
                                       "n_pairs", "p_value", "ci_method", "ci_low_mc_se", "ci_high_mc_se",
                                       "degenerate", "n_resamples", "bootstrap_seed", "family", "p_holm"]
    table = contrasts.set_index(["policy", "contrast", "task"])
    for policy in FULL_POLICIES:
        per_task = []
        for task in TASKS:
            groups = synthetic.by_group[(policy, task)]
            diffs = [groups["direct"][j] - groups["ood"][j] for j in groups["direct"]]
            row = table.loc[(policy, "direct_minus_ood", task)]
            assert row["n_pairs"] == 20
            assert row["estimate"] == pytest.approx(np.mean(diffs))
            assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
            per_task.append(np.mean(diffs))
            para = [groups["paraphrase_ood"][j] - groups["ood"][j] for j in groups["paraphrase_ood"]]
            assert table.loc[(policy, "paraphrase_minus_original_ood", task), "estimate"] == \
                pytest.approx(np.mean(para))
        overall = table.loc[(policy, "direct_minus_ood", "all")]
        assert overall["estimate"] == pytest.approx(np.mean(per_task))
        assert overall["n_pairs"] == 120
        assert 0 <= overall["p_value"] <= 1
    assert not set(ID_ONLY_POLICIES) & set(contrasts["policy"])
    assert set(contrasts["contrast"]) == {"direct_minus_ood", "paraphrase_minus_original_ood",
                                          "paraphrase_minus_original_direct", "paraphrased_direct_minus_ood",
                                          "id_minus_ood"}


def test_failure_modes_count_failed_valid_rollouts(published_size, synthetic):
    failures = pd.read_csv(published_size / "failure_modes.csv", keep_default_na=False)
    per_task = failures[failures["task"] != "all"]
    got = {(r.policy, r.task, r.condition, r.failure_mode): r.count for r in per_task.itertuples()}
    assert got == synthetic.failures
    pooled = failures[failures["task"] == "all"].groupby("policy")["count"].sum()
    assert (pooled == per_task.groupby("policy")["count"].sum()).all()


def test_invalid_rollouts_listed_and_excluded(published_size, synthetic):
    invalid = pd.read_csv(published_size / "invalid.csv", keep_default_na=False, dtype=str)
    assert len(invalid) == len(synthetic.invalid) == 72
    assert sorted(zip(invalid["policy"], invalid["evaluation_id"], strict=True)) == \
        sorted((r["policy"], r["evaluation_id"]) for r in synthetic.invalid)
    text = (published_size / "report.md").read_text()
    assert "72 invalid attempts" in text
    # exclusion is proven by test_summary_reproduces_every_cell: its counts come from valid rows only


def test_report_markdown_and_figures(published_size):
    text = (published_size / "report.md").read_text()
    assert "## Success by condition" in text and "## Methods" in text
    assert "ID-only diagnostic baseline" in text and "**VLA-0**" in text and "**GR00T Full Fine-Tune**" in text
    for name in FIGURES:
        png, pdf, svg = (published_size / f"{name}.{ext}" for ext in ("png", "pdf", "svg"))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert pdf.read_bytes()[:5] == b"%PDF-", name
        assert b"<svg" in svg.read_bytes()[:1000], name
        with Image.open(png) as image:
            assert image.info["dpi"] == pytest.approx((300, 300), abs=0.5), name
            assert image.width > 900, name  # 300 dpi of a >3 inch figure
        assert f"![{name}]({name}.svg)" in text and f"[PNG]({name}.png)" in text and f"[PDF]({name}.pdf)" in text
    assert not list(published_size.parent.glob(".report.*"))  # no staging leftovers


def test_worked_check_in_report(tmp_path):
    """88/120 ID and 0/50 OOD render exactly as in the protocol."""
    rows, e = [], 0
    for task, k in zip(TASKS, (15, 15, 15, 15, 14, 14), strict=True):
        for j in range(20):
            e += 1
            rows.append({"policy": "p", "task": task, "condition": "id", "evaluation_id": f"E{e}",
                         "success": "true" if j < k else "FALSE"})
    for _ in range(50):
        e += 1
        rows.append({"policy": "p", "task": "counting", "condition": "ood", "evaluation_id": f"E{e}",
                     "success": "0"})
    out = run_report(tmp_path, write_csv(tmp_path / "o.csv", rows, COLUMNS_MIN))
    text = (out / "report.md").read_text()
    assert "73.3% [64.8, 80.4] (88/120)" in text
    assert "0.0% [0.0, 7.1] (0/50)" in text


COLUMNS_MIN = ("policy", "task", "condition", "evaluation_id", "success")


def test_example_csv(tmp_path):
    example = Path(__file__).parent / "data" / "example_outcomes.csv"
    out = run_report(tmp_path, example)
    summary = pd.read_csv(out / "summary.csv").set_index(["policy", "task", "condition"])
    row = summary.loc[("policy_a", "counting", "ood_matched")]
    assert (row["successes"], row["trials"]) == (1, 4)
    assert summary.loc[("policy_a", "counting", "direct"), "successes"] == 3
    invalid = pd.read_csv(out / "invalid.csv")
    assert list(invalid["evaluation_id"]) == ["C-ood-03"]
    contrasts = pd.read_csv(out / "contrasts.csv").set_index(["policy", "contrast", "task"])
    assert contrasts.loc[("policy_a", "direct_minus_ood", "counting"), "estimate"] == pytest.approx(0.5)


def test_seed_reproducible_and_rerun_replaces_report(tmp_path, synthetic):
    csv_path = write_csv(tmp_path / "o.csv", synthetic.rows[:900])
    first = pd.read_csv(run_report(tmp_path, csv_path, bootstrap_seed=5) / "contrasts.csv")
    again = pd.read_csv(run_report(tmp_path, csv_path, bootstrap_seed=5) / "contrasts.csv")
    pd.testing.assert_frame_equal(first, again)
    assert set(first["bootstrap_seed"]) == {5}
    other = pd.read_csv(run_report(tmp_path, csv_path, bootstrap_seed=6) / "contrasts.csv")
    assert not np.allclose(first["ci_low"], other["ci_low"])
    np.testing.assert_allclose(first["estimate"], other["estimate"])


def test_refuses_to_overwrite_foreign_directory(tmp_path, synthetic):
    csv_path = write_csv(tmp_path / "o.csv", synthetic.rows[:50])
    out = tmp_path / "report"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="spabench did not write"):
        run_report(tmp_path, csv_path)
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("cfg", [
    {"outcomes": None, "campaign_dir": None, "out": "x"},
    {"outcomes": "a.csv", "campaign_dir": "b", "out": "x"},
    {"outcomes": "a.csv", "campaign_dir": None, "out": None},
    {"outcomes": "a.csv", "campaign_dir": None, "out": "x", "bootstrap": 0},
    {"outcomes": "a.csv", "campaign_dir": None, "out": "x", "bootstrap_seed": -1},
])
def test_config_errors(cfg):
    with pytest.raises(ConfigError):
        report(ReportConfig.from_mapping(cfg))


def test_campaign_dir_without_ledger(tmp_path):
    cfg = ReportConfig.from_mapping({"outcomes": None, "campaign_dir": str(tmp_path), "out": str(tmp_path / "r")})
    with pytest.raises(ConfigError, match="ledger.sqlite"):
        report(cfg)
    assert not (tmp_path / "r").exists()


def test_failure_while_writing_leaves_no_partial_output(tmp_path, synthetic, monkeypatch):
    csv_path = write_csv(tmp_path / "o.csv", synthetic.rows[:300])
    out = run_report(tmp_path, csv_path)
    before = (out / "summary.csv").read_bytes()

    def broken(*args, **kwargs):  # fault injection: a figure that cannot be drawn
        raise RuntimeError("disk full")

    monkeypatch.setattr("spabench.analysis.figures.start_figures", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        run_report(tmp_path, write_csv(tmp_path / "o2.csv", synthetic.rows[:200]))
    assert (out / "summary.csv").read_bytes() == before  # the earlier report is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "o2.csv", "report"]
    fresh = tmp_path / "fresh"
    cfg = ReportConfig.from_mapping({"outcomes": str(csv_path), "out": str(fresh), "bootstrap": 10,
                                       "unpaired": "exclude"})
    with pytest.raises(RuntimeError):
        report(cfg)
    assert not fresh.exists()


def test_without_matched_group_column_and_with_invalid_only_policy(tmp_path):
    rows = [{"policy": "p", "task": "counting", "condition": c, "evaluation_id": f"E{i}",
             "success": str(i % 2), "valid": "true"}
            for i, c in enumerate(["id"] * 4 + ["ood"] * 4 + ["direct"] * 2)]
    rows.append({"policy": "q", "task": "counting", "condition": "id", "evaluation_id": "E1",
                 "success": "", "valid": "false"})
    out = run_report(tmp_path, write_csv(tmp_path / "o.csv", rows,
                                         COLUMNS_MIN + ("valid",)))
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["condition"]) == {"id", "ood", "direct"}
    assert set(summary["policy"]) == {"p"}
    contrasts = pd.read_csv(out / "contrasts.csv")
    assert set(contrasts["contrast"]) == {"id_minus_ood"}
    text = (out / "report.md").read_text()
    assert "no `matched_group` column" in text and "## q" not in text
    assert len(pd.read_csv(out / "invalid.csv")) == 1


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium (make test installs it)")
def test_report_html_offline_in_chromium(published_size):
    """report.html opens in headless Chromium with every request off the page refused, and shows
    every figure (decoded, non-empty) and every table of report.md."""
    from playwright.sync_api import sync_playwright

    html_path = published_size / "report.html"
    text = html_path.read_text()
    assert "http://" not in text and "https://" not in text and "src=\"fig" not in text
    md = (published_size / "report.md").read_text()
    md_tables = sum(1 for block in md.split("\n\n") if block.lstrip().startswith("|"))
    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True)
            page = context.new_page()

            def refuse(route):
                if not route.request.url.startswith(("file://", "data:")):
                    requests.append(route.request.url)
                    return route.abort()
                return route.continue_()

            page.route("**/*", refuse)
            page.goto(html_path.as_uri(), wait_until="load")
            figures_shown = page.evaluate("""() => [...document.querySelectorAll('img')].map(i => (
                {name: i.dataset.figure, ok: i.complete && i.naturalWidth > 0,
                 w: i.getBoundingClientRect().width, h: i.getBoundingClientRect().height}))""")
            tables = page.evaluate("document.querySelectorAll('table').length")
            title = page.title()
        finally:
            browser.close()
    assert requests == []
    assert sorted(f["name"] for f in figures_shown) == sorted(f"{name}.svg" for name in FIGURES)
    for figure in figures_shown:
        assert figure["ok"] and figure["w"] > 100 and figure["h"] > 50, figure
    assert tables == md_tables > 10
    assert title == "Spa-Bench report"


def test_report_tables_show_the_summary_cell_of_every_label(published_size):
    """Every rate cell of report.md's headline and per-policy tables, read back by its row and column
    labels, is the summary.csv row of that policy, task and condition (filtered the slow way)."""
    from spabench.analysis import report as rendering
    from spabench.analysis.labels import display_names
    from spabench.analysis.rates import CONDITION_ORDER, TASK_ORDER

    summary = pd.read_csv(published_size / "summary.csv")
    names = {name: policy for policy, name in display_names(summary["policy"].unique()).items()}
    conditions = {rendering._label(c): c for c in CONDITION_ORDER}
    tasks = {rendering._task_label(t): t for t in TASK_ORDER}
    titles = {title for title, _, _ in rendering.SECTIONS}

    def expected(policy: str, task: str, condition: str) -> str:
        hit = summary[(summary["policy"] == policy) & (summary["task"] == task) & (summary["condition"] == condition)]
        if hit.empty:
            return ""
        row = hit.iloc[0]
        return f"{rendering.format_rate(row.rate, row.wilson_low, row.wilson_high)} ({row.successes}/{row.trials})"

    heading = title = header = None
    checked = 0
    for line in (published_size / "report.md").read_text().splitlines():
        if line.startswith("## ") or line.startswith("### "):
            heading, title, header = (line[3:], None, None) if line.startswith("## ") else (heading, line[4:], None)
            continue
        headline = heading == "Success by condition (all tasks pooled)"
        if not line.startswith("| ") or not (headline or (heading in names and title in titles)):
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if header is None:
            header = cells
            continue
        for label, cell in zip(header[1:], cells[1:], strict=True):
            if headline:
                condition = conditions[label.removesuffix(" (non-relational)")]
                policy, task = names[cells[0]], "non_relational" if condition == "no_intervention" else "all"
            else:
                policy, task, condition = names[heading], tasks[cells[0]], conditions[label]
                if task == "all":
                    condition = rendering.ALL_ROW.get((condition, title), condition)
            assert cell == expected(policy, task, condition), (heading, title, cells[0], label)
            checked += int(cell != "")
    assert checked > 250
