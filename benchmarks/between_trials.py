"""Operator dead time between trials: from a saved score to the next scene checklist (issue 39).

A real `run` in this process: the terminal operator (answers scripted on its stdin: scene ready,
success, no note), LeRobot's SO101Follower on the emulated Feetech bus (pty), five spabench_replay
cameras at 640x480, the Recorder, an openpi server on loopback. The campaign pairs its trials on a
scene (the protocol's two policies on one placement), so the transitions alternate between the same
scene and a new one, whose rendered reference (twin views and placement diagram) the session draws
ahead in a background process.

Per transition: wall time and this process's CPU time from the ledger's score write returning to the
operator's checklist having been shown and answered (the answer is scripted, so no think time): the next
trial's staging, health reads, ledger, the scene's rendered reference and the checklist itself.
Medians over the transitions of each kind. Target (issue 39): under 1 s on both.

    python benchmarks/between_trials.py [--quick] [--pairs N] [--timer S]
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
import time
from pathlib import Path

from _common import emulated_calibration, median, pct, ramp_infer, table, write_result

HORIZON = 10


def campaign(workdir: Path, pairs: int, timer_s: float) -> Path:
    from spabench.ledger import Ledger
    from spabench.ledger.schema import TrialRow

    rows = []
    for i in range(pairs):
        for k in range(2):   # two evaluations placed on one scene, one after the other
            rows.append(TrialRow(
                trial_id=f"E{2 * i + k:04d}-P1", evaluation_id=f"E{2 * i + k:04d}", policy="bench", card="bench",
                alias="P1",
                task="object_state", condition="id", scene_id=f"object_state-id-{i % 12 + 1:03d}",
                scene_condition="id", matched_group=None, cell="upside_down|white_cup", withheld=False,
                instruction="Place the closed white cup in the bowl.", instruction_variant="original",
                timer_s=timer_s, order=2 * i + k))
    folder = workdir / "campaign"
    folder.mkdir()
    Ledger.create(folder / "ledger.sqlite", rows, "between-trials", {"campaign": "between-trials"}).close()
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 pairs instead of 21")
    ap.add_argument("--pairs", type=int, default=None, help="scene pairs (transitions: pairs same, pairs-1 new)")
    ap.add_argument("--timer", type=float, default=1.0, help="rollout timer (s)")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    args = ap.parse_args()
    pairs = args.pairs or (5 if args.quick else 21)

    from tests.integration.harness import run_config
    from tests.support.feetech_bus import EmulatedBus

    import spabench.rollout.session as session_module
    from spabench.operator.terminal import TerminalOperator
    from spabench.rollout.commands import run
    from spabench.serve.openpi_server import OpenPiServer
    from spabench.suite.vocabulary import CAMERAS

    marks: list[tuple[str, str, float, float]] = []   # (event, scene, wall, cpu)
    real_score, real_wait = session_module.Session._score, TerminalOperator.wait_scene_ready

    def score(self, trial, *a, **k):
        out = real_score(self, trial, *a, **k)
        marks.append(("scored", trial.scene_id, time.perf_counter(), time.process_time()))
        return out

    def wait(self, trial, scene, text):   # its answer is scripted: returning = the checklist was shown and read
        ready = real_wait(self, trial, scene, text)
        marks.append(("checklist", trial.scene_id, time.perf_counter(), time.process_time()))
        return ready

    session_module.Session._score = score
    TerminalOperator.wait_scene_ready = wait
    workdir = Path(tempfile.mkdtemp(prefix="spabench-between-"))
    try:
        folder = campaign(workdir, pairs, args.timer)
        calib = emulated_calibration(workdir)
        with EmulatedBus() as bus, OpenPiServer(ramp_infer(HORIZON), {"horizon": HORIZON}, port=0) as server:
            cfg = run_config({   # the card goes into a lab folder next to the campaign (run reads cards by name)
                "campaign_dir": str(folder),
                "bench": {"type": "so101", "port": bus.port, "robot_id": "spabench_follower",
                          "calibration_dir": str(calib), "fps": 30, "max_relative_target": 10.0,
                          "home_speed_deg_s": 120.0,
                          "cameras": {c: {"type": "spabench_replay", "index_or_path": "pattern", "width": args.width,
                                          "height": args.height, "fps": 30} for c in CAMERAS}},
                "operator": {"type": "terminal", "keys": False, "status_line": False, "rater": "bench",
                             "wait_videos_s": 60, "console": {"alignment_threshold": 0.0}},
                "policy": {"name": "bench", "protocol": "openpi", "host": "127.0.0.1", "port": server.port,
                           "horizon": HORIZON, "execute_steps": HORIZON, "control_hz": 30, "timer_s": args.timer,
                           "timeout_s": 3.0, "request_threshold": 2,
                           "cameras": {"observation/image": "middle", "observation/wrist_image": "wrist"}},
                "suite": {"root": "tasks", "hardware": "hardware"},
                "accept_cameras": True,
            })
            out = io.StringIO()
            started = time.perf_counter()
            code = run(cfg, out=out, stdin=io.StringIO("\ny\n\n" * (2 * pairs)))
            total = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"run ended with {code}:\n{out.getvalue()[-3000:]}")
    finally:
        session_module.Session._score, TerminalOperator.wait_scene_ready = real_score, real_wait
        shutil.rmtree(workdir, ignore_errors=True)

    kinds: dict[str, dict[str, list[float]]] = {"same scene": {"wall": [], "cpu": []},
                                                "new scene": {"wall": [], "cpu": []}}
    for (e1, s1, w1, c1), (e2, s2, w2, c2) in zip(marks, marks[1:], strict=False):
        if e1 == "scored" and e2 == "checklist":
            kind = kinds["same scene" if s1 == s2 else "new scene"]
            kind["wall"].append(w2 - w1)
            kind["cpu"].append(c2 - c1)
    rows = [(k, len(v["wall"]), median(v["wall"]), pct(v["wall"], 90), max(v["wall"]), median(v["cpu"]))
            for k, v in kinds.items() if v["wall"]]
    print(f"\nSaved score -> next checklist, {2 * pairs} trials of {args.timer:g} s, five cameras "
          f"{args.width}x{args.height}; run {total:.1f} s")
    print(table(rows, ("transition", "n", "median_s", "p90_s", "max_s", "cpu_median_s")))
    import os

    path = write_result("between_trials", {"loadavg_1min_at_end": os.getloadavg()[0], "pairs": pairs,
                                           "timer_s": args.timer, "width": args.width, "height": args.height,
                                           "run_s": total, "transitions": kinds})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
