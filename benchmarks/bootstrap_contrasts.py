"""Bootstrap cost: the contrasts table at the published size (3 policies x 900 outcomes).

Side by side in one process: the previous index-resampling bootstrap at its old default (2,000
resamples, `git show <rev>:src/spabench/analysis/contrasts.py`) against the vectorised multinomial
bootstrap at the published 100,000. Reports medians of several runs and their ratio.

    python benchmarks/bootstrap_contrasts.py [--runs 5] [--old-rev 52d1bf6]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _old_module(rev: str):
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/spabench/analysis/contrasts.py"],
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_contrasts.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_contrasts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old-rev", default="52d1bf6")
    args = parser.parse_args()
    from tests.analysis.analysis_synthetic import synthetic_campaign, write_csv  # the published-size data

    from spabench.analysis import contrasts as new
    from spabench.analysis.outcomes import load_outcomes

    csv_path = Path(tempfile.mkdtemp()) / "outcomes.csv"
    outcomes = load_outcomes(write_csv(csv_path, synthetic_campaign().rows))
    old = _old_module(args.old_rev)
    timings = {"old 2,000": [], "new 100,000": []}
    for _ in range(args.runs):
        t = time.perf_counter()
        old.contrast_table(outcomes, n_resamples=2000, seed=0)
        timings["old 2,000"].append(time.perf_counter() - t)
        t = time.perf_counter()
        new.contrast_table(outcomes, n_resamples=100_000, seed=20260906)
        timings["new 100,000"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in timings.items()}
    for k, v in med.items():
        print(f"{k:>12}: median {v:.3f} s over {args.runs} runs")
    print(f"ratio new/old: {med['new 100,000'] / med['old 2,000']:.2f}")


if __name__ == "__main__":
    main()
