"""The ledger calls a session makes between two trials, on a campaign near its end, side by side with
an anchor tree.

Each child (a fresh interpreter on one tree's `src`) plans a SQLite ledger of --trials trials, starts
and finishes --done of them through the Ledger API (complete attempts, as a bench would), then times
next_trial(), pending_trials(), unscored_attempts() and outcomes(), each the median of --repeats
calls. The table shows the median over --runs interleaved children of each tree and anchor/current.

  anchor    --base (default: the commit before this benchmark was added)
  current   this tree

    python benchmarks/ledger_queries.py [--quick] [--runs N] [--trials N] [--done N] [--base REV]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, export_source, median, revision_before_added, table, write_result

CALLS = ("next_trial", "pending_trials", "progress", "claims")  # what a session asks between two trials

CHILD = r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
from spabench.ledger import Ledger
from spabench.ledger.schema import TrialRow

n_trials, n_done, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rows = [TrialRow(trial_id=f"E{i:04d}-P1", evaluation_id=f"E{i:04d}", policy="pol", card="pol", alias="P1",
                 task="counting", condition="no_intervention", scene_id=f"s{i}",
                 scene_condition="no_intervention", matched_group=None, cell="c|a", withheld=False,
                 instruction="Count them.", instruction_variant="original", timer_s=60.0, order=i)
        for i in range(n_trials)]
folder = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
ledger = Ledger.create(folder / "ledger.sqlite", rows, "bench-hash")
for i in range(n_done):
    attempt = ledger.begin_attempt(f"E{i:04d}-P1")
    ledger.finish_attempt(attempt, "complete", "timer", episode_path=f"episodes/{attempt}")
ledger.close()
ledger = Ledger.open(folder)
out = {}
for name in sys.argv[4:]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        getattr(ledger, name)()
        times.append(time.perf_counter() - t)
    out[name] = statistics.median(times)
ledger.close()
print(json.dumps(out))
"""


def run_child(src: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(args.trials), str(args.done), str(args.repeats),
                           *CALLS], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run of each tree, 3 repeats")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--trials", type=int, default=2700)
    parser.add_argument("--done", type=int, default=2600)
    parser.add_argument("--base", default=None, help="anchor revision")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.repeats = 1, 3
    base = args.base or revision_before_added("benchmarks/ledger_queries.py")
    with tempfile.TemporaryDirectory(prefix="ledger-anchor-") as tmp:
        trees = {"anchor": export_source(base, Path(tmp)), "current": ROOT / "src"}
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, src in trees.items():
                results[name].append(run_child(src, args))
    summary = {name: {c: median([r[c] for r in runs]) for c in CALLS} for name, runs in results.items()}
    rows = [(c, f"{summary['anchor'][c] * 1000:.2f}", f"{summary['current'][c] * 1000:.2f}",
             f"{summary['anchor'][c] / summary['current'][c]:.1f}x") for c in CALLS]
    print(f"{args.done} complete attempts of {args.trials} trials (SQLite), ms per call, medians of "
          f"{args.runs} runs x {args.repeats} calls; anchor {base}")
    print(table(rows, ("call", "anchor ms", "current ms", "anchor/current")))
    path = write_result("ledger_queries", {"base": base, "trials": args.trials, "done": args.done,
                                           "summary_s": summary, "raw": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
