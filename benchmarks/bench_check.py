"""`spabench bench check`'s own cost on the emulated bench: wall time per part.

Real stack: LeRobot's FeetechMotorsBus on the emulated SO-101 (tests/support/feetech_bus.py), the five
replay cameras of conf/bench/so101_emulated.yaml, one openpi server on loopback (the integration
harness's WaveServer) timed over `requests` inferences. The anchor, run side by side (A B A B), is what
a session pays at its start for the same bench: `SO101Bench.connect()` + `disconnect()` (the bus with
its calibration check and torque, and the five cameras). Reported: the median seconds of each part and
of the anchor, and each part's ratio to the anchor.

    python benchmarks/bench_check.py [--runs N] [--camera-s S] [--requests N] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
import time
from pathlib import Path

from _common import ROOT, median, table, write_result


def check_once(workdir: Path, port: str, policy_port: int, camera_s: float, requests: int, n: int) -> dict:
    from spabench.cli.main import main

    out = workdir / f"check{n}"
    args = ["bench", "check", "bench=so101_emulated", f"bench.port={port}",
            f"bench.calibration_dir={workdir / 'calibration'}", f"out={out}", f"camera_s={camera_s}",
            f"requests={requests}", "policy=pi05", f"policy.port={policy_port}", "policy.horizon=10",
            "policy.execute_steps=10", f"camera_references={workdir / 'references'}"]
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = main(args)
    total = time.perf_counter() - started
    report = json.loads((out / "report.json").read_text())
    if code != 0:
        raise SystemExit(f"the bench check failed on the emulated bench:\n{said.getvalue()}")
    return {**report["timings_s"], "total": round(total, 3)}


def connect_once(workdir: Path, port: str) -> float:
    """The anchor: the session's own connect and disconnect of the same bench."""
    import yaml

    from spabench.bench.config import BenchConfig

    data = yaml.safe_load((ROOT / "conf" / "bench" / "so101_emulated.yaml").read_text())
    data.update(port=port, calibration_dir=str(workdir / "calibration"))
    bench = BenchConfig.from_mapping(data).make_bench()
    started = time.perf_counter()
    bench.connect()
    bench.disconnect()
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--camera-s", type=float, default=3.0)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="2 runs, 1 s of cameras, 5 requests")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.camera_s, args.requests = 2, 1.0, 5
    from tests.integration.harness import WaveServer
    from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE, EmulatedBus

    workdir = Path(tempfile.mkdtemp(prefix="spabench_bench_check_"))
    (workdir / "calibration").mkdir()
    shutil.copy(DEFAULT_CALIBRATION_FILE, workdir / "calibration" / "spabench_follower.json")
    checks, anchors = [], []
    try:
        with EmulatedBus() as bus, WaveServer() as server:
            connect_once(workdir, bus.port)   # warm-up, not counted: the first of each pays the imports
            check_once(workdir, bus.port, server.port, args.camera_s, args.requests, -1)
            for i in range(args.runs):
                anchors.append(connect_once(workdir, bus.port))
                checks.append(check_once(workdir, bus.port, server.port, args.camera_s, args.requests, i))
                print(f"run {i + 1}/{args.runs}: anchor {anchors[-1]:.2f} s, check {checks[-1]['total']:.2f} s "
                      f"({', '.join(f'{k} {v:.2f}' for k, v in checks[-1].items() if k != 'total')})", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    anchor = median(anchors)
    parts = {k: median([c[k] for c in checks]) for k in checks[0]}
    rows = [("anchor: SO101Bench connect + disconnect", round(anchor, 3), 1.0)]
    rows += [(f"bench check: {k}", round(v, 3), round(v / anchor, 2)) for k, v in parts.items()]
    print(f"\nmedian of {args.runs} runs (A B A B), camera_s={args.camera_s:g}, requests={args.requests}")
    print(table(rows, ("what", "seconds", "x anchor")))
    path = write_result("bench_check", {"loadavg_1min_at_end": __import__("os").getloadavg()[0],
                                        "runs": args.runs, "camera_s": args.camera_s, "requests": args.requests,
                                        "anchor_s": anchor, "parts_s": parts, "checks": checks, "anchors": anchors})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
