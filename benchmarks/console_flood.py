"""The control loop while an attacker floods the browser console: period error side by side with a
quiet console.

Real stack as in console_loop.py (LeRobot SO101Follower on the emulated Feetech bus, five replay
cameras recording HDF5 + MP4, an openpi server on loopback, the console's uvicorn thread in the
loop's process with the FramePublisher observing). The attacker runs in its own process
(tests/support/console_attack.py, loopback only, bounded): 1,100 idle connections reopened as the
server closes them, a 300 MB POST (with the page's CSRF token, so only the size limit stops it) and
N live-view pollers. Runs alternate quiet / flooded (A B A B ...), medians reported.

    python benchmarks/console_flood.py [--quick] [--runs N] [--seconds S] [--stream N] [--nice N]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, rollout_args, rollout_plan, table, write_result
from console_loop import Rig, medians, period_stats, shutdown, start_console

ATTACK = ROOT / "tests" / "support" / "console_attack.py"


def flooded(rig: Rig, port: int, csrf: str, seconds: float, stream: int, publisher, nice: int) -> tuple[dict, dict]:
    proc = subprocess.Popen([sys.executable, str(ATTACK), str(port), "--idle", "1100", "--post-mb", "300",
                             "--stream", str(stream), "--seconds", str(seconds + 5), "--csrf", csrf],
                            stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.nice(nice))
    try:
        json.loads(proc.stdout.readline())  # the idle sockets are open, the POST is on its way
        stats = period_stats(rig.rollout(seconds, [publisher])[1])
        attack = json.loads(proc.stdout.readline() or "{}")
    finally:
        proc.kill()
        proc.wait(10)
    return stats, attack


def main() -> None:
    ap = rollout_args(__doc__.splitlines()[0])
    ap.add_argument("--stream", type=int, default=200, help="live-view pollers of the attacker")
    ap.add_argument("--nice", type=int, default=0, help="niceness of the attacker's process (10: its own CPU use "
                    "yields to the loop, so what remains is the console's cost)")
    args = ap.parse_args()
    seconds, runs = rollout_plan(args)
    workdir = Path(tempfile.mkdtemp(prefix="spabench_flood_"))
    (workdir / "campaign").mkdir()
    rig = Rig(workdir, args.width, args.height)
    server, channel, publisher, card = start_console(workdir)
    csrf = server.csrf
    quiet, flood, attacks = [], [], []
    try:
        rig.rollout(3.0)  # warm-up: not measured
        channel.set_phase("rollout", card=card)
        for run in range(runs):
            order = ("quiet", "flood") if run % 2 == 0 else ("flood", "quiet")
            for kind in order:
                if kind == "quiet":
                    quiet.append(period_stats(rig.rollout(seconds, [publisher])[1]))
                else:
                    stats, attack = flooded(rig, server.port, csrf, seconds, args.stream, publisher, args.nice)
                    flood.append(stats)
                    attacks.append(attack)
            print(f"run {run + 1}/{runs}: p99 period error quiet {quiet[-1]['period_err_p99_ms']:.2f} ms, "
                  f"flooded {flood[-1]['period_err_p99_ms']:.2f} ms (max {flood[-1]['period_err_max_ms']:.1f} ms)",
                  flush=True)
    finally:
        shutdown(server, publisher, rig, workdir)
    a, b = medians(quiet), medians(flood)
    rows = [(k, a[k], b[k], b[k] / a[k] if a[k] else float("nan")) for k in a]
    print(f"\nControl loop at 30 Hz, {seconds:g} s, five {args.width}x{args.height} cameras recording; median of "
          f"{runs} runs each (load average {os.getloadavg()[0]:.1f} at the end)")
    print(table(rows, ("metric", "quiet console", "flooded console", "ratio")))
    print("\nattacker (last run):", json.dumps(attacks[-1]))
    path = write_result("console_flood", {"loadavg_1min_at_end": os.getloadavg()[0], "seconds": seconds, "runs": runs,
                                          "width": args.width, "height": args.height, "stream_clients": args.stream, "attacker_nice": args.nice,
                                          "quiet": a, "flooded": b, "runs_quiet": quiet, "runs_flooded": flood,
                                          "attacks": attacks, "time_unix": time.time()})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
