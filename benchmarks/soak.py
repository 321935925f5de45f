"""Soak: one `spabench run` process through hundreds of twin trials, watching for leaks.

A campaign is planned for the twin (all six tasks, the two scripted stand-in policies, which are NOT
VLAs: they read the twin's privileged scene state) and run by one real `spabench run` subprocess
(bench=sim_demo, operator=auto, 2 s rollout timers: the twin is not paced in real time, a trial takes
about a second) against the
stand-in servers on loopback. Every --interval seconds the sampler reads the run process's resident
memory (VmRSS) and thread count from /proc/<pid>/status, its open file descriptors from /proc/<pid>/fd,
and the completed-trial count from the ledger (a read-only connection opened per sample).

Reported: a table every --every trials; for each quantity the value at start (after warm-up), middle
and end, the median of the first and last quartile of the trials after warm-up (the first 10%), their
change, and the least-squares slope per 100 trials. Flat means RSS grows < 5% from the first to the last
quartile, and threads and descriptors grow by at most one (a transient worker) with a slope < 0.5 per
100 trials. Writes benchmarks/results/soak.json (also as it goes, so a cut-off run leaves its figures).

    python benchmarks/soak.py [--trials 500] [--quick] [--interval 2] [--timer 2]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from _common import median, table, write_result  # noqa: E402

WARMUP = 0.10          # fraction of the trials before the flatness figures start
RSS_GROWTH_MAX = 5.0   # % from the first to the last quartile
COUNT_GROWTH_MAX = 1   # threads / fds: at most one more (a transient worker thread or file)
QUANTITIES = ("rss_mb", "threads", "fds")


def overrides(trials: int) -> list[str]:
    """Plan overrides for >= `trials` trials: all six tasks of demo_twin, two policies, ID/OOD/direct."""
    from tests.support import multibench

    per_cell = math.ceil(trials / (6 * len(multibench.POLICIES)))      # trials per task and policy
    direct = max(1, per_cell // 5)
    id_ = max(1, (per_cell - direct) // 2)
    ood = max(1, per_cell - direct - id_)
    return [o for o in multibench.campaign_overrides(id_=id_, ood=ood, direct=direct)
            if not o.startswith("campaign.tasks=")]


def proc_sample(pid: int) -> dict | None:
    """RSS (MB), threads and open descriptors of a live process; None once it has gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip().startswith("Z"):
        return None
    return {"rss_mb": int(fields["VmRSS"].split()[0]) / 1024.0, "threads": int(fields["Threads"]), "fds": fds}


def completed(campaign: Path) -> int:
    from spabench.ledger import Ledger

    try:
        with Ledger.open(campaign, readonly=True) as ledger:
            return ledger.progress()["complete"]
    except Exception:   # the run may hold a write lock for a moment; the next sample reads it
        return -1


def flatness(samples: list[dict], total: int) -> dict:
    """Start/middle/end, quartile medians, change and slope per 100 trials of each quantity after warm-up."""
    warm = [s for s in samples if WARMUP * total <= s["trials"] < total and not s.get("stopping")]   # steady state
    out: dict = {"warmup_trials": math.ceil(WARMUP * total), "samples_after_warmup": len(warm)}
    if len(warm) < 4:
        return out
    lo, hi = warm[0]["trials"], warm[-1]["trials"]
    span = max(hi - lo, 1)
    first = [s for s in warm if s["trials"] <= lo + span / 4] or warm[:1]
    last = [s for s in warm if s["trials"] >= hi - span / 4] or warm[-1:]
    middle = min(warm, key=lambda s: abs(s["trials"] - (lo + hi) / 2))
    x = np.array([s["trials"] for s in warm], dtype=float)
    for q in QUANTITIES:
        y = np.array([s[q] for s in warm], dtype=float)
        slope = float(np.polyfit(x, y, 1)[0]) * 100 if np.ptp(x) > 0 else float("nan")
        q1, q4 = median([s[q] for s in first]), median([s[q] for s in last])
        change = q4 - q1
        if q == "rss_mb":
            flat = 100 * change / q1 < RSS_GROWTH_MAX
        else:
            flat = change <= COUNT_GROWTH_MAX and slope < 0.5
        out[q] = {"start": warm[0][q], "middle": middle[q], "end": warm[-1][q], "min": float(y.min()),
                  "max": float(y.max()), "first_quartile_median": q1, "last_quartile_median": q4,
                  "change": change, "change_pct": 100 * change / q1 if q1 else float("nan"),
                  "slope_per_100_trials": slope, "flat": bool(flat)}
    out["flat"] = all(out[q]["flat"] for q in QUANTITIES)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="50 trials (for `make bench`)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--timer", type=float, default=2.0, help="rollout timer per trial, seconds")
    parser.add_argument("--every", type=int, default=None, help="a table row every N trials (50; 10 with --quick)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="stop the run (SIGINT, as an operator would) after this long and report what ran")
    args = parser.parse_args()
    trials = 50 if args.quick else args.trials
    every = args.every or (10 if args.quick else 50)

    from tests.support import multibench

    root = Path(tempfile.mkdtemp(prefix="spabench-soak-"))
    campaign = root / "campaign"
    multibench.plan(campaign, None, overrides(trials))
    from spabench.ledger import Ledger

    with Ledger.open(campaign, readonly=True) as ledger:
        total = ledger.progress()["trials"]
    print(f"soak: {total} twin trials in one `spabench run` (bench=sim_demo, operator=auto, {args.timer} s "
          f"timers), scripted stand-in policies (not VLAs); sampling every {args.interval} s", flush=True)
    samples: list[dict] = []
    rows: list[tuple] = []
    header = ("trials", "elapsed s", "RSS MB", "threads", "fds")
    result: dict = {"planned_trials": total, "timer_s": args.timer, "interval_s": args.interval,
                    "bench": "sim_demo", "policies": "scripted stand-ins (not VLAs)", "finished": False,
                    "machine_note": f"{os.cpu_count()} cores, shared with other work while measured"}
    stopped_early = False
    try:
        with multibench.stand_ins() as ports:
            t0 = time.monotonic()
            proc = multibench.start_bench(campaign, "soak", ports, timer_s=args.timer, log=root / "run.log")
            next_row, last_trials = every, 0
            while proc.poll() is None:
                sample = proc_sample(proc.pid)
                n = completed(campaign)
                if sample is not None:
                    last_trials = n if n >= 0 else last_trials
                    samples.append({"t": time.monotonic() - t0, "trials": last_trials, "stopping": stopped_early,
                                    **sample})
                    if next_row <= last_trials < total:   # rows while trials run (not the teardown)
                        s = samples[-1]
                        rows.append((last_trials, round(s["t"]), f"{s['rss_mb']:.1f}", s["threads"], s["fds"]))
                        print(table(rows[-1:], header).splitlines()[-1] if len(rows) > 1 else table(rows, header),
                              flush=True)
                        next_row = (last_trials // every + 1) * every
                        result.update(samples=samples, table=rows, flatness=flatness(samples, total))
                        write_result("soak", result)
                if args.max_minutes and time.monotonic() - t0 > 60 * args.max_minutes and not stopped_early:
                    proc.send_signal(2)
                    stopped_early = True
                time.sleep(args.interval)
            proc.wait(timeout=120)
            elapsed = time.monotonic() - t0
        done = completed(campaign)
        if proc.returncode and not stopped_early:
            raise RuntimeError(f"spabench run failed ({proc.returncode}):\n{(root / 'run.log').read_text()[-3000:]}")
        flat = flatness(samples, done)
        result.update(finished=not stopped_early, stopped_early=stopped_early, trials=done, duration_s=elapsed,
                      s_per_trial=elapsed / max(done, 1), samples=samples, table=rows, flatness=flat)
        print(f"\n{done} trials in {elapsed:.0f} s ({elapsed / max(done, 1):.2f} s per trial, process start-up "
              f"included); {len(samples)} samples; after warm-up ({flat['warmup_trials']} trials):")
        summary = [(q, *(f"{flat[q][k]:.1f}" for k in ("start", "middle", "end", "first_quartile_median",
                                                     "last_quartile_median", "change_pct", "slope_per_100_trials")),
                    "flat" if flat[q]["flat"] else "GROWS") for q in QUANTITIES if q in flat]
        print(table(summary, ("", "start", "middle", "end", "Q1 median", "Q4 median", "change %",
                              "slope /100 trials", "verdict")))
        print(f"(machine: {os.cpu_count()} cores, shared with other work while measured)")
    finally:
        if os.environ.get("SOAK_KEEP"):
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    path = write_result("soak", result)
    print(f"wrote {path}")
    return 0 if result["flatness"].get("flat") else 1


if __name__ == "__main__":
    raise SystemExit(main())
