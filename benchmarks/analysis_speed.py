"""The report's statistics and markdown for the published campaign's 2,892 rollouts, per function,
side by side with the tree before the lattice bootstrap.

Both trees run in fresh interpreters on the same outcomes CSV (tests/analysis' generator of the
campaign facts) and time, in process CPU (time.process_time), every stage `spabench report` runs
before it draws figures: load_outcomes, the contrasts (100,000 resamples), the between-policy table
(10,000), the ranking (1,000), the success table, the whole analyse(), render_markdown() and the
eight CSVs. Each child takes the median of --repeats calls; the table shows the median over --runs
interleaved children and the anchor/current ratio.

  anchor    --base (default: the commit before analysis/bootstrap.py was added)
  current   this tree

    python benchmarks/analysis_speed.py [--quick] [--runs N] [--repeats R] [--base REV]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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

STAGES = ("load_outcomes", "contrast_table", "between_policy_table", "bradley_terry_ranking", "success_table",
          "analyse", "render_markdown", "write_csvs")

CHILD = r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
from spabench.analysis import comparisons, contrasts, ranking, rates, report
from spabench.analysis.outcomes import load_outcomes
from spabench.escaping import csv_safe_frame

csv_path, repeats = sys.argv[1], int(sys.argv[2])
seed = contrasts.PUBLISHED_SEED


def cpu(f):
    times = []
    for _ in range(repeats):
        start = time.process_time()
        value = f()
        times.append(time.process_time() - start)
    return statistics.median(times), value


out, result = {}, {}
out["load_outcomes"], outcomes = cpu(lambda: load_outcomes(csv_path, unpaired="error"))
out["contrast_table"], _ = cpu(lambda: contrasts.contrast_table(outcomes, n_resamples=100_000, seed=seed))
out["between_policy_table"], _ = cpu(lambda: comparisons.between_policy_table(outcomes))
out["bradley_terry_ranking"], _ = cpu(lambda: ranking.bradley_terry_ranking(outcomes, n_resamples=1000, seed=seed))
out["success_table"], _ = cpu(lambda: rates.success_table(outcomes))
out["analyse"], analysis = cpu(lambda: report.analyse(outcomes))
out["render_markdown"], _ = cpu(lambda: report.render_markdown(analysis, {}))
folder = Path(tempfile.mkdtemp())


def write_csvs():
    for name in ("summary", "contrasts", "failures", "invalid", "comparisons", "ranking", "completeness", "agreement"):
        csv_safe_frame(getattr(analysis, name)).to_csv(folder / f"{name}.csv", index=False)


out["write_csvs"], _ = cpu(write_csvs)
print(json.dumps(out))
"""


def base_revision() -> str:
    """The commit before the first one that added analysis/bootstrap.py (the lattice bootstrap)."""
    return revision_before_added("src/spabench/analysis/bootstrap.py")


def run_once(src: Path, csv_path: Path, repeats: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(csv_path), str(repeats)], capture_output=True,
                          text=True, cwd=src.parent,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    if done.returncode != 0:
        raise SystemExit(f"analysis failed ({src}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="calls per stage in each child (median)")
    parser.add_argument("--quick", action="store_true", help="one run of each tree, one call per stage")
    parser.add_argument("--base", default=None, help="the anchor revision (default: before analysis/bootstrap.py)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.repeats = 1, 1
    base = args.base or base_revision()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "anchor").mkdir()
        trees = {"anchor": export_source(base, tmp / "anchor"), "current": ROOT / "src"}
        csv_path = campaign_outcomes_csv(tmp / "outcomes.csv")
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, src in trees.items():
                results[name].append(run_once(src, csv_path, args.repeats))
    summary = {name: {stage: median([r[stage] for r in runs]) for stage in STAGES} for name, runs in results.items()}
    for stages in summary.values():
        stages["analyse+render+csvs"] = stages["analyse"] + stages["render_markdown"] + stages["write_csvs"]
    rows = [(stage, summary["anchor"][stage], summary["current"][stage],
             summary["anchor"][stage] / summary["current"][stage]) for stage in summary["anchor"]]
    print(f"analysis of 2,892 rollouts, process CPU s: medians of {args.runs} interleaved runs x {args.repeats} "
          f"calls (anchor = {base})")
    print(table(rows, ("stage", "anchor cpu s", "current cpu s", "ratio")))
    write_result("analysis_speed", {"base": base, "runs": args.runs, "repeats": args.repeats, "summary": summary,
                                    "raw": results})


if __name__ == "__main__":
    main()
