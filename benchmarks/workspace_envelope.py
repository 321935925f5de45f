"""Per-target cost of the safety envelope with the Cartesian workspace check (bench/safety.py).

Side by side in one process, alternating, each figure the median over --runs runs of the per-target
mean over --targets targets: the joint-only envelope (the anchor: joint box + step bound) and the
full envelope (+ the gripper's 40 points by FK against hardware/bench.yaml's arm_envelope), for
targets inside the envelope (one FK) and targets into the table (cut back by bisection, 12 more FKs).
Also the share of a 30 Hz control period.

    python benchmarks/workspace_envelope.py [--runs 7] [--targets 2000] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _common import median, table, write_result  # also puts the repo root on sys.path


def _per_target(envelope, targets, current, last) -> float:
    t0 = time.perf_counter()
    for target in targets:
        envelope.check_target(target, current, last)
    return (time.perf_counter() - t0) / len(targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--targets", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="3 runs x 300 targets (a smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.targets = 3, 300

    from spabench.bench.config import DEFAULT_HOME_POSE, DEFAULT_JOINT_LIMITS
    from spabench.bench.kinematics import arm_model
    from spabench.bench.safety import SafetyEnvelope, WorkspaceEnvelope
    from spabench.paths import repo_root
    from spabench.suite.loader import load_geometry
    from spabench.suite.vocabulary import JOINTS

    spec = load_geometry(repo_root() / "hardware" / "bench.yaml").arm_envelope
    workspace = WorkspaceEnvelope(spec, arm_model())
    joint_only = SafetyEnvelope(DEFAULT_JOINT_LIMITS, 10.0)
    full = SafetyEnvelope(DEFAULT_JOINT_LIMITS, 10.0, workspace=workspace)

    rng = np.random.default_rng(0)
    home = np.array([DEFAULT_HOME_POSE[j] for j in JOINTS])
    inside = home + rng.uniform(-5.0, 5.0, (args.targets, 6))           # small moves around home
    assert all(workspace.violation(t)[0] == 0.0 for t in inside[:50])
    # from a pose 1 cm above the floor, a step of up to 10 deg down and forward: into the table
    low = np.array([0.0, -8.0, 32.0, 67.0, 0.0, 10.0])     # lowest gripper point 1.5 cm above the table
    down = low + np.array([0.0, 1.0, -0.3, 0.3, 0.0, 0.0]) * rng.uniform(5.0, 10.0, (args.targets, 1))
    assert workspace.violation(low)[0] == 0.0
    down = down[workspace.violations(down)[0] > 0.0]          # the targets the envelope must cut
    assert len(down) > 0.8 * args.targets, len(down)

    cases = {"inside: joint only": (joint_only, inside, home), "inside: + workspace": (full, inside, home),
             "into table: joint only": (joint_only, down, low), "into table: + workspace": (full, down, low)}
    costs: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.runs):
        for name, (env, targets, start) in cases.items():      # interleaved: load hits all alike
            costs[name].append(_per_target(env, targets, start, start))
    period_us = 1e6 / 30.0
    rows, out = [], {}
    for name, values in costs.items():
        us = median(values) * 1e6
        out[name] = us
        rows.append((name, f"{us:.1f}", f"{100.0 * us / period_us:.2f}%"))
    print(table(rows, ("envelope, per target", "us (median)", "of a 30 Hz period")))
    print(f"workspace check adds {out['inside: + workspace'] - out['inside: joint only']:.1f} us per target "
          f"inside, {out['into table: + workspace'] - out['into table: joint only']:.1f} us per cut target "
          f"({args.runs} runs x {args.targets} targets)")
    write_result("workspace_envelope", {"runs": args.runs, "targets": args.targets, "us_per_target": out})


if __name__ == "__main__":
    main()
