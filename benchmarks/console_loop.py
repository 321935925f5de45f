"""The browser console against the control loop: period error with the console open and streaming
vs without (side by side), and browser-to-loop e-stop latency.

Real stack as in control_loop.py: LeRobot SO101Follower on the emulated Feetech bus (pty), five
spabench_replay cameras 640x480 @ 30 fps, an openpi server on loopback, the Recorder (HDF5 + five MP4
encoder processes). With the console as a session runs it: the ShelfPublisher observer (the loop's
process copies the newest frames into shared memory), the console process (its uvicorn server and
JPEG encoder) and a headless Chromium (its own process) showing the rollout page with all five live
views.

Runs alternate without / with (A B A B ...), medians reported; with --in-process a third variant
joins the rotation: the console inside the loop's process, as it ran before issue 39. The loop's
process CPU (all its threads, per second of rollout) is reported beside the period error. With --aa a
second variant without the console joins the rotation (an A/A control): its ratio to the first says
how far two identical variants differ on this machine at this time. At tens of microseconds (p99 here)
the loop's thread loses its core mid-spin without any context switch of its own (interrupts, or the
host of this virtual machine): single runs' A/A ratios ranged from below 0.1 to 36 (12 runs, 2026-12-07).
E-stop latency: Chromium presses Space at a random moment of a rollout; latency = the loop seeing the stop (its stop_requested event, wall
clock) minus Date.now() in the page's key handler. Target: < 100 ms.

    python benchmarks/console_loop.py [--quick] [--runs N] [--seconds S] [--estops N] [--in-process] [--aa]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import (
    ROOT,
    emulated_calibration,
    median,
    pct,
    ramp_infer,
    rollout_args,
    rollout_plan,
    table,
    write_result,
)

CAMS = ("wrist", "middle", "left", "right", "overhead")
AA = "without console, again (A/A)"
HORIZON = 30


class StopSeen:
    """Observer: wall-clock time at which the loop acted on a stop request."""

    def __init__(self):
        self.wall = None

    def on_episode_start(self, meta):
        self.wall = None

    def on_step(self, step):
        pass

    def on_event(self, event):
        if event.kind == "stop_requested" and self.wall is None:
            self.wall = time.time()

    def on_episode_end(self, result):
        pass


class Rig:
    """Bench, policy server, client and recorder, shared by every run."""

    def __init__(self, workdir: Path, width: int, height: int, realtime_priority: int):
        from tests.support.feetech_bus import EmulatedBus

        from spabench.bench.bench import make_bench
        from spabench.bench.config import BenchConfig
        from spabench.policy.broker import ActionBroker
        from spabench.policy.card import PolicyCard
        from spabench.policy.factory import make_client
        from spabench.record.recorder import Recorder
        from spabench.serve.openpi_server import OpenPiServer

        infer = ramp_infer(HORIZON)
        calib = emulated_calibration(workdir)
        self.bus = EmulatedBus().__enter__()
        self.server = OpenPiServer(infer, {"horizon": HORIZON}, port=0).__enter__()
        cfg = BenchConfig.from_mapping({
            "type": "so101", "port": self.bus.port, "robot_id": "spabench_follower", "calibration_dir": str(calib),
            "cameras": {c: {"type": "spabench_replay", "index_or_path": "pattern", "width": width, "height": height,
                            "fps": 30} for c in CAMS},
            "fps": 30, "max_relative_target": 10.0, "realtime_priority": realtime_priority})
        self.card = PolicyCard(name="bench", protocol="openpi", port=self.server.port, horizon=HORIZON, control_hz=30,
                               timer_s=10, ema_alpha=0.25, request_threshold=5,
                               cameras={"observation/image": "middle", "observation/wrist_image": "wrist"})
        self.bench = make_bench(cfg)
        self.bench.connect()
        self.client = make_client(self.card)
        self.client.connect()
        self.broker = ActionBroker(self.client, self.card)
        self.recorder = Recorder(workdir / "campaign")
        self.n = 0

    def rollout(self, seconds, extra_observers=(), controls=None):
        from spabench.operator.status import LoopStats
        from spabench.rollout.ema import EmaFilter
        from spabench.rollout.heap import heap_frozen_for_motion
        from spabench.rollout.loop import Rollout
        from spabench.rollout.types import EpisodeMeta

        self.n += 1
        r = Rollout(self.bench, self.broker, self.card, EmaFilter(self.card.ema_alpha), seconds,
                    [self.recorder, LoopStats(), *extra_observers], controls=controls, go_home_after=False,
                    realtime_priority=self.bench.cfg.realtime_priority)
        with heap_frozen_for_motion():   # as the session runs every rollout (rollout.heap)
            result = r.run(EpisodeMeta(attempt_id=f"b{self.n}", control_hz=30.0), "benchmark")
        self.scheduling = r.scheduling
        self.recorder.wait_idle(300)
        return result, self.recorder.episodes_dir / f"b{self.n}"

    def close(self):
        self.broker.stop()
        self.client.close()
        self.recorder.close()
        self.bench.disconnect()
        self.server.__exit__(None, None, None)
        self.bus.__exit__(None, None, None)


def start_console(workdir: Path, in_process: bool = False):
    """The console over a one-trial ledger, with a BenchChannel and the frames the loop publishes to:
    by default the console process as WebOperator starts it; `in_process`: the design before issue 39
    (uvicorn thread and JPEG encoder thread inside the loop's process), for the side-by-side."""
    from spabench.console.channel import BenchChannel
    from spabench.console.config import ConsoleConfig
    from spabench.ledger import Ledger

    row = {"trial_id": "E0000-P1", "evaluation_id": "E0000", "policy": "bench", "card": "bench", "alias": "P1",
           "task": "counting", "condition": "id", "scene_id": "counting-id-000", "scene_condition": "id",
           "matched_group": None, "cell": "two|cube", "withheld": False, "instruction": "Put two cubes in the bowl.",
           "instruction_variant": "original", "order": 0, "timer_s": 10.0, "control_hz": 30.0}
    if not Ledger.exists(workdir / "campaign"):
        Ledger.create(workdir / "campaign" / Ledger.FILENAME, [row], "bench", {"campaign": "console_bench"}).close()
    cfg = ConsoleConfig(port=0)
    channel = BenchChannel()
    if in_process:
        from spabench.console.app import ConsoleContext, build_app
        from spabench.console.frames import FramePublisher
        from spabench.console.server import ConsoleServer

        publisher = FramePublisher(cfg)
        ctx = ConsoleContext(campaign_dir=workdir / "campaign", cfg=cfg, channel=channel, publisher=publisher)
        server = ConsoleServer(build_app(ctx), cfg).start()
    else:
        from spabench.console.frames import ShelfPublisher
        from spabench.console.process import ConsoleProcess

        publisher = ShelfPublisher(cfg)
        server = ConsoleProcess(workdir / "campaign", cfg, channel, publisher.shelf.name).start()
    card = {"alias": "P1", "k": 1, "n": 1, "pending": 1, "task": "counting", "condition": "id", "scene_id": "-",
            "evaluation_id": "E0000", "instruction": "benchmark", "checklist": [], "time_left_s": None,
            "per_trial_s": None, "estimate_basis": "-", "failure_modes": []}
    return server, channel, publisher, card


def frames_out(publisher) -> int:
    """Frames the console got: copied into shared memory (console process) or encoded (in-process)."""
    shelf = getattr(publisher, "shelf", None)
    return shelf.puts if shelf is not None else publisher.encoded


def browser(url: str, mode: str, amount: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_browser.py"), url, mode, str(amount)],
                            stdout=subprocess.PIPE, text=True)
    assert json.loads(proc.stdout.readline()).get("ready")
    return proc


def shutdown(server, publisher, rig: Rig, workdir: Path) -> None:
    server.stop()
    publisher.close()
    shutdown_rig(rig, workdir)


def shutdown_rig(rig: Rig, workdir: Path) -> None:
    rig.close()
    shutil.rmtree(workdir, ignore_errors=True)


def medians(runs: list[dict]) -> dict:
    return {k: median([r[k] for r in runs]) for k, v in runs[0].items() if isinstance(v, (int, float))}


def period_stats(folder: Path) -> dict:
    from spabench.record.reader import EpisodeReader

    with EpisodeReader(folder) as ep:
        ts, period, work = ep.timestamps, ep.array("timing/period_s")[1:], ep.array("timing/work_s")
        events = ep.events()
    err = np.abs(period - 1 / 30) * 1e3
    worst = int(np.argmax(err)) + 1   # the tick that started late (row index)
    # what the worst tick and the one before it did, and the episode's stall/overrun events: the
    # recording is deleted with the workdir, so a stall is described here or not at all
    worst_tick = {"t_s": float(ts[worst]), "period_ms": float(period[worst - 1] * 1e3),
                  "work_before_ms": float(work[worst - 1] * 1e3), "work_ms": float(work[worst] * 1e3),
                  "events": [e for e in events if e.get("kind") in ("stall", "timing", "camera_gap", "fault")]}
    return {"rate_hz": (len(ts) - 1) / (ts[-1] - ts[0]), "period_err_p50_ms": pct(err, 50),
            "period_err_p99_ms": pct(err, 99), "period_err_max_ms": float(np.max(err)),
            "work_p50_ms": pct(work, 50) * 1e3, "work_p99_ms": pct(work, 99) * 1e3, "worst_tick": worst_tick}


def main() -> None:
    ap = rollout_args(__doc__.splitlines()[0])
    ap.add_argument("--estops", type=int, default=None)
    ap.add_argument("--in-process", action="store_true",
                    help="also the console inside the loop's process (the design before issue 39), alternating")
    ap.add_argument("--aa", action="store_true",
                    help="also a second variant without the console in the rotation (an A/A control): its ratio "
                         "to the first is this machine's own run-to-run spread, against which the console's "
                         "ratio is read")
    ap.add_argument("--realtime-priority", type=int, default=10,
                    help="bench.realtime_priority for the loop (10, as the shipped bench files; 0: normal scheduling)")
    args = ap.parse_args()
    seconds, runs = rollout_plan(args)
    estops = args.estops or (5 if args.quick else 20)
    workdir = Path(tempfile.mkdtemp(prefix="spabench_console_"))
    (workdir / "campaign").mkdir()
    rig = Rig(workdir, args.width, args.height, args.realtime_priority)
    consoles = {"console streaming": start_console(workdir)}
    if args.in_process:
        consoles["in-process console (before)"] = start_console(workdir, in_process=True)
    names = ["without console", *([AA] if args.aa else []), *consoles]
    results: dict[str, list[dict]] = {name: [] for name in names}
    latencies: dict[str, list[float]] = {name: [] for name in consoles}
    to_server: dict[str, list[float]] = {name: [] for name in consoles}
    try:
        from spabench.rollout.controls import StopControl

        rig.rollout(3.0)  # warm-up (encoder processes, first chunk): not measured

        def measured(observers=()) -> dict:
            cpu = time.process_time()
            started = time.monotonic()
            stats = period_stats(rig.rollout(seconds, observers)[1])
            stats["loop_process_cpu_pct"] = 100 * (time.process_time() - cpu) / (time.monotonic() - started)
            return stats

        def with_streaming(name: str) -> dict:
            server, channel, publisher, card = consoles[name]
            channel.set_phase("rollout", card=card)
            page = browser(f"http://127.0.0.1:{server.port}/bench", "stream", seconds + 30)
            time.sleep(3.0)  # the page is up and streaming
            out0 = frames_out(publisher)
            stats = measured([publisher])
            stats["frames_to_console_per_s"] = (frames_out(publisher) - out0) / seconds
            page.kill()
            page.wait()
            channel.set_phase("homing", card=card)
            return stats

        for run in range(runs):  # side by side, rotating which goes first
            for name in names[run % len(names):] + names[:run % len(names)]:
                results[name].append(measured() if name in ("without console", AA) else with_streaming(name))
            print(f"run {run + 1}/{runs}: p99 period error " + ", ".join(
                f"{name} {results[name][-1]['period_err_p99_ms']:.2f} ms" for name in names), flush=True)
            for name in names:
                if results[name][-1]["period_err_max_ms"] > 10.0:
                    print(f"  {name}: worst tick {results[name][-1]['worst_tick']}", flush=True)
        for name, (server, channel, publisher, card) in consoles.items():   # e-stops: Space in Chromium
            page = browser(f"http://127.0.0.1:{server.port}/bench", "estop", estops)
            for i in range(estops):
                controls = StopControl()
                seen = StopSeen()
                channel.controls = controls
                channel.stop_log.clear()
                channel.set_phase("rollout", card=card)
                result, _ = rig.rollout(30.0, [publisher, seen], controls=controls)
                channel.controls = None
                channel.set_phase("homing", card=card)
                line = json.loads(page.stdout.readline())
                assert result.stop_reason == "estop", result
                latencies[name].append(seen.wall * 1000 - line["t_ms"])
                to_server[name].append(channel.stop_log[0]["wall"] * 1000 - line["t_ms"])
                print(f"{name}: e-stop {i + 1}/{estops}: {latencies[name][-1]:.1f} ms "
                      f"(browser to session {to_server[name][-1]:.1f} ms)", flush=True)
            page.wait(60)
    finally:
        for server, _, publisher, _ in consoles.values():
            server.stop()
            publisher.close()
        shutdown_rig(rig, workdir)
    med = {name: medians(results[name]) for name in names}
    a = med["without console"]
    header: tuple[str, ...] = ("metric", "without console")
    compared = names[1:]
    for name in compared:
        header += (name, "ratio")
    keys = sorted({k for name in consoles for k in med[name]}, key=lambda k: list(med["console streaming"]).index(k)
                  if k in med["console streaming"] else 99)
    rows = [(k, a.get(k, float("nan")), *[v for name in compared for v in (
        med[name].get(k, float("nan")), med[name][k] / a[k] if k in a and a[k] and k in med[name] else float("nan"))])
        for k in keys]
    est = {name: {"estop_latency_p50_ms": pct(latencies[name], 50), "estop_latency_p95_ms": pct(latencies[name], 95),
                  "estop_latency_max_ms": float(max(latencies[name])),
                  "browser_to_session_p50_ms": pct(to_server[name], 50), "n": len(latencies[name])}
           for name in consoles}
    print(f"\nControl loop at 30 Hz, {seconds:g} s, five {args.width}x{args.height} cameras recording; "
          f"median of {runs} runs each (load average {os.getloadavg()[0]:.1f} at the end); loop thread: "
          f"{rig.scheduling}")
    print(table(rows, header))
    print(f"\nE-stop, browser key press to the control loop ({estops} presses each)")
    print(table([(k, *[est[name][k] for name in consoles]) for k in est["console streaming"]], ("metric", *consoles)))
    path = write_result("console_loop", {"loadavg_1min_at_end": os.getloadavg()[0], "seconds": seconds,
                                         "loop_scheduling": rig.scheduling,
                                         "runs": runs, "width": args.width, "height": args.height,
                                         "without_console": a, "with_console": med["console streaming"],
                                         "with_in_process_console": med.get("in-process console (before)"),
                                         "without_console_aa": med.get(AA),
                                         "estop": est, "runs_by_variant": results, "estop_ms": latencies})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
