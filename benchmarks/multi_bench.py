"""Several benches on one shared PostgreSQL ledger: claim throughput and end-to-end twin throughput.

1. Claims per second: K claimers (K = 1, 2, 3; each its own connection, as benches are) work a
   synthetic 300-set campaign dry: claim a scene set (row lock, SKIP LOCKED), begin and finish its two
   attempts, release; repeat until nothing is left. Reported: whole-set cycles per second and the
   median claim transaction. Anchor: the same loop, one claimer, on the SQLite ledger.
2. End-to-end: 1, 2 and 3 twin benches (`spabench run` processes, bench=sim_demo, the scripted
   stand-ins, 1 s rollouts) run one tiny campaign (10 trials, 5 scene sets) together; trials per minute
   of wall time from the first start to the last exit, and the ratio to one bench. Process start-up
   (imports, twin build, policy connect) is included: it is what a lab pays per bench.

Medians of --runs runs. Both parts start a throwaway PostgreSQL server (Debian's postgresql).

    python benchmarks/multi_bench.py [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from _common import median, table, write_result  # noqa: E402


def _rows(n_sets: int):
    from spabench.ledger import TrialRow

    rows, order = [], 0
    for i in range(n_sets):
        for policy, alias in (("pi05", "P1"), ("vla0", "P2")):
            order += 1
            rows.append(TrialRow(
                trial_id=f"E{i:04d}-{alias}", evaluation_id=f"E{i:04d}", policy=policy, card=policy, alias=alias,
                task="counting", condition="ood", scene_id=f"counting-ood-{i:03d}", scene_condition="ood",
                matched_group=None, cell="goal_1_by_removal|counting", withheld=True, instruction="count",
                instruction_variant="original", timer_s=60.0, order=order))
    return rows


def claim_rate(folder: Path, claimers: int) -> tuple[float, float]:
    """(set cycles per second, median claim transaction in ms) with `claimers` concurrent connections."""
    from spabench.ledger import Ledger

    ledgers = [Ledger.open(folder) for _ in range(claimers)]
    claim_ms: list[float] = []
    cycles = [0] * claimers
    barrier = threading.Barrier(claimers)

    def work(k: int) -> None:
        led, bench = ledgers[k], f"bench{k}"
        barrier.wait()
        while True:
            t0 = time.perf_counter()
            eid = led.claim_scene_set(bench, 60)
            claim_ms.append(1000 * (time.perf_counter() - t0))
            if eid is None:
                return
            while (trial := led.next_trial(eid)) is not None:
                a = led.begin_attempt(trial.trial_id, bench_id=bench)
                led.finish_attempt(a, "complete", "timer")
            led.release_claim(bench, eid)
            cycles[k] += 1

    threads = [threading.Thread(target=work, args=(k,)) for k in range(claimers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for led in ledgers:
        led.close()
    return sum(cycles) / elapsed, statistics.median(claim_ms)


def twin_throughput(root: Path, url: str, benches: int) -> float:
    from tests.support import multibench

    from spabench.ledger import Ledger

    campaign = root / f"campaign-{benches}-{time.monotonic_ns()}"
    multibench.plan(campaign, url, multibench.campaign_overrides(id_=2, ood=2, direct=1))
    folders = multibench.bench_copies(campaign, benches)
    with multibench.stand_ins() as ports:
        t0 = time.perf_counter()
        procs = [multibench.start_bench(f, f"bench{i}", ports) for i, f in enumerate(folders, 1)]
        for p in procs:
            p.wait(timeout=1800)
        elapsed = time.perf_counter() - t0
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a bench failed: {[(f, (f / 'run.log').read_text()[-1500:]) for f in folders]}")
    with Ledger.open(campaign, readonly=True) as ledger:
        n = ledger.progress()["complete"]
    for f in (campaign, *folders):
        shutil.rmtree(f, ignore_errors=True)
    return 60.0 * n / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sets", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="one run, 100 sets")
    parser.add_argument("--no-twin", action="store_true", help="claims only")
    args = parser.parse_args()
    runs, sets = (1, 100) if args.quick else (args.runs, args.sets)

    from tests.support.pg_cluster import start_cluster

    from spabench.ledger import Ledger

    cluster = start_cluster(durable=True)   # fsync on, like SQLite's synchronous=FULL
    os.environ["PGPASSWORD"] = cluster.password
    root = Path(tempfile.mkdtemp(prefix="spabench-multibench-"))
    result: dict = {"runs": runs, "sets": sets, "claims": {}, "twin": {}}
    try:
        rows = _rows(sets)
        configs = [("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 3)]
        measured: dict[tuple[str, int], list[tuple[float, float]]] = {c: [] for c in configs}
        for r in range(runs):
            for backend, k in configs:
                folder = root / f"claims-{backend}-{k}-{r}"
                Ledger.create(folder, rows, "0" * 64, {"campaign": "bench"},
                              url=cluster.url() if backend == "postgresql" else None).close()
                measured[(backend, k)].append(claim_rate(folder, k))
        anchor = median([m[0] for m in measured[("sqlite", 1)]])
        claim_rows = []
        for (backend, k), values in measured.items():
            rate, ms = median([v[0] for v in values]), median([v[1] for v in values])
            result["claims"][f"{backend}-{k}"] = {"sets_per_s": rate, "claim_ms_p50": ms}
            claim_rows.append((backend, k, rate, ms, rate / anchor))
        print(f"claims: {sets} scene sets of 2 trials, each set claimed, both attempts begun and finished, "
              f"released; medians of {runs} run(s)")
        print(table(claim_rows, ("ledger", "claimers", "sets/s", "claim ms p50", "x sqlite-1")))
        if not args.no_twin:
            tpm: dict[int, list[float]] = {1: [], 2: [], 3: []}
            for _ in range(runs):
                for k in tpm:
                    tpm[k].append(twin_throughput(root, cluster.url(), k))
            base = median(tpm[1])
            twin_rows = []
            for k, values in tpm.items():
                result["twin"][str(k)] = {"trials_per_min": median(values), "runs": values}
                twin_rows.append((k, median(values), median(values) / base))
            print(f"\ntwin end to end: 10 trials (5 scene sets), bench=sim_demo, 1 s rollouts, process start-up "
                  f"included; medians of {runs} run(s)")
            print(table(twin_rows, ("benches", "trials/min", "x 1 bench")))
        print(f"\n(machine: {os.cpu_count()} cores, shared with other work while measured)")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    path = write_result("multi_bench", result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
