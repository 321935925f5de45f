"""`spabench report` on a 100k-row outcomes table (175 policies), side by side with an anchor tree.

The table is the published campaign's 2,892 valid rollouts (tests/analysis' generator, plus its
72 invalid attempts) copied 35 times, each copy one lab: its five policies renamed (`pi05_lab07`)
and its evaluation ids and matched groups its own, so the copies never share an evaluation
(35 components of the comparison graph): 101,220 valid rollouts, 175 policies. This is the shape
measured on main before the per-component ranking: 183 s and 2.25 GB.

Every path runs `spabench report` in a fresh interpreter on the same CSV; measured per run: wall
time and the report process's peak resident memory (ru_maxrss of the child). Medians over --runs
runs of `current`; the anchor (--base, default: none) runs --base-runs times, interleaved.

    python benchmarks/report_100k.py [--runs N] [--copies C] [--base REV] [--base-runs N]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, export_source, median, table, write_result

CHILD = r"""
import sys
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
report(typed({"outcomes": sys.argv[1], "out": sys.argv[2], "campaign_dir": None}))
"""


def lab_copies_csv(path: Path, copies: int) -> tuple[Path, int, int]:
    """The campaign copied `copies` times as disjoint labs; returns (path, valid rows, policies)."""
    sys.path.insert(0, str(ROOT / "tests" / "analysis"))
    from analysis_synthetic import COLUMNS, synthetic_campaign

    base = synthetic_campaign().rows
    valid, policies = 0, set()
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for lab in range(copies):
            for row in base:
                policy = f"{row['policy']}_lab{lab:02d}"
                policies.add(policy)
                valid += row["valid"] == "true"
                writer.writerow(dict(row, policy=policy, evaluation_id=f"L{lab:02d}-{row['evaluation_id']}",
                                     matched_group=f"L{lab:02d}-{row['matched_group']}" if row["matched_group"] else ""))
    return path, valid, len(policies)


def run_once(src: Path, csv_path: Path, out: Path) -> dict:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD + "import resource, json; print(json.dumps({'rss_mb': "
         "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))", str(csv_path), str(out)],
        capture_output=True, text=True, cwd=src.parent,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"report failed ({src}):\n{done.stderr[-2000:]}")
    inner = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": wall, "peak_rss_mb": inner["rss_mb"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--copies", type=int, default=35)
    parser.add_argument("--base", default=None, help="an anchor revision run side by side (slow before the fix)")
    parser.add_argument("--base-runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        paths = {"current": ROOT / "src"}
        if args.base:
            (tmp / "anchor").mkdir()
            paths["anchor"] = export_source(args.base, tmp / "anchor")
        csv_path, valid, policies = lab_copies_csv(tmp / "outcomes.csv", args.copies)
        results: dict[str, list[dict]] = {name: [] for name in paths}
        for run in range(max(args.runs, args.base_runs if args.base else 0)):
            for name, src in paths.items():
                if run < (args.runs if name == "current" else args.base_runs):
                    results[name].append(run_once(src, csv_path, tmp / f"out_{name}_{run}"))
    summary = {name: {key: median([r[key] for r in runs]) for key in runs[0]} for name, runs in results.items()}
    rows = [(name, len(results[name]), s["wall"], s["peak_rss_mb"]) for name, s in summary.items()]
    print(f"report of {valid:,} valid rollouts, {policies} policies ({args.copies} disjoint labs); medians")
    print(table(rows, ("path", "runs", "wall s", "peak RSS MB")))
    write_result("report_100k", {"base": args.base, "copies": args.copies, "valid_rows": valid,
                                 "policies": policies, "summary": summary, "raw": results})


if __name__ == "__main__":
    main()
