"""The full report for the published campaign's 2,892 rollouts, side by side with the earlier paths.

Every path runs `spabench report` in a fresh interpreter (imports included) on the same outcomes
CSV: tests/analysis' generator of the campaign facts (MolmoAct2, pi0.5 and GR00T F-LLM 900 each,
GR00T F-FT 120 and VLA-0 72 ID rollouts = 2,892, plus 72 invalid attempts of re-run trials).

  anchor      the report before the publication work (`git archive` of --base: statsmodels/scipy
              imported for three formulas, seven 120 dpi PNG figures, no report.html, no statistics
              beyond the paper): 13 files
  renderer    the tree before the figures went back to matplotlib (`git archive` of --renderer: the
              last tree with spabench.analysis.drawing, a home-made canvas and TrueType subsetter
              whose smallest text at print width was 2.8 pt): the same outputs, one process
  current     this tree as a lab runs it: Figs. 5-11 as SVG (figures.formats' default) drawn by
              matplotlib under spabench.mplstyle at one column (figures.width=single, 3.5 in),
              report.html through markdown-it-py, the figures drawn by two forked workers
  double      this tree with figures.width=double (7 in)
  all_formats this tree with figures.formats=[svg,pdf,png] (each figure also as PDF with embedded
              TrueType and 300 dpi PNG: what a lab asks for when it writes the paper)

Measured per run: wall time, CPU time of the report process, and CPU time including any worker
processes (user + sys, from the parent's RUSAGE_CHILDREN). Medians over --runs, runs interleaved.
Run it through /work/bin/tslot (or on an otherwise idle machine): wall time is what it measures.

    python benchmarks/report_speed.py [--quick] [--runs N] [--base REV] [--renderer REV]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    ROOT,
    campaign_outcomes_csv,
    export_source,
    median,
    revision_before_added,
    table,
    write_result,
)

CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
from spabench.analysis.commands import report
try:  # the command's own config (this checkout); older revisions: the flat root config, or a DictConfig
    from spabench.analysis.commands import ReportConfig
    typed = ReportConfig.from_mapping
except ImportError:
    try:
        from spabench.config import SpabenchConfig
        typed = SpabenchConfig.from_mapping
    except ImportError:
        from omegaconf import OmegaConf
        typed = OmegaConf.create
imported = time.process_time()
cfg = {"outcomes": sys.argv[1], "out": sys.argv[2], "campaign_dir": None}
if len(sys.argv) > 3:
    cfg["figures"] = json.loads(sys.argv[3])
cfg = typed(cfg)
report(cfg)
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"import_cpu": imported, "self_cpu": me.ru_utime + me.ru_stime,
                  "workers_cpu": kids.ru_utime + kids.ru_stime, "inner_wall": time.perf_counter() - start}))
"""


# this tree's paths and their figures.* settings (an anchor revision runs with its own defaults)
FIGURE_SETTINGS = {"current": {"width": "single"}, "double": {"width": "double"},
                   "all_formats": {"width": "single", "formats": ["svg", "pdf", "png"]}}


def base_revision() -> str:
    """Before analysis/exact.py (the numpy formulas): the report as the publication work found it."""
    return revision_before_added("src/spabench/analysis/exact.py")


def renderer_revision() -> str:
    """The last tree with analysis/drawing (spabench's own renderer), before matplotlib came back."""
    removed = subprocess.run(["git", "-C", str(ROOT), "log", "--diff-filter=D", "--format=%H", "--",
                              "src/spabench/analysis/drawing/canvas.py"], capture_output=True, text=True, check=True)
    commits = removed.stdout.split()
    if not commits:
        raise SystemExit("no commit removes analysis/drawing; pass --renderer REV")
    return commits[-1] + "~1"


def run_once(src: Path, csv_path: Path, out: Path, figures: dict | None = None) -> dict:
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    args = [sys.executable, "-c", CHILD, str(csv_path), str(out)] + ([json.dumps(figures)] if figures else [])
    done = subprocess.run(args, capture_output=True, text=True, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin",
                                                                     "HOME": str(Path.home())}, cwd=src.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"report failed ({src}):\n{done.stderr[-2000:]}")
    inner = json.loads(done.stdout.strip().splitlines()[-1])
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    files = sorted(p.name for p in out.iterdir())
    return {"wall": wall, "cpu_total": total, "cpu_report_process": inner["self_cpu"],
            "cpu_imports": inner["import_cpu"], "files": len(files)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one run of each path")
    parser.add_argument("--base", default=None, help="the anchor revision (default: before analysis/exact.py)")
    parser.add_argument("--renderer", default=None,
                        help="the renderer revision (default: the last tree with analysis/drawing)")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    revisions = {"anchor": args.base or base_revision(), "renderer": args.renderer or renderer_revision()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = {}
        for name, revision in revisions.items():
            (tmp / name).mkdir()
            paths[name] = export_source(revision, tmp / name)
        for name in FIGURE_SETTINGS:
            paths[name] = ROOT / "src"
        csv_path = campaign_outcomes_csv(tmp / "outcomes.csv")
        results: dict[str, list[dict]] = {name: [] for name in paths}
        for run in range(args.runs):
            for name, src in paths.items():
                results[name].append(run_once(src, csv_path, tmp / f"out_{name}_{run}", FIGURE_SETTINGS.get(name)))
    summary = {name: {key: median([r[key] for r in runs]) for key in runs[0]} for name, runs in results.items()}
    anchor = summary["anchor"]
    rows = [(name, s["wall"], s["cpu_total"], s["cpu_report_process"], s["cpu_imports"], int(s["files"]),
             anchor["wall"] / s["wall"], anchor["cpu_total"] / s["cpu_total"]) for name, s in summary.items()]
    print(f"report of 2,892 rollouts: medians of {args.runs} interleaved runs "
          f"(anchor = {revisions['anchor']}, renderer = {revisions['renderer']})")
    print(table(rows, ("path", "wall s", "cpu s (all)", "cpu s (report proc)", "cpu s imports", "files",
                       "wall ratio", "cpu ratio")))
    write_result("report_speed", {"revisions": revisions, "runs": args.runs, "summary": summary,
                                  "raw": results})


if __name__ == "__main__":
    main()
