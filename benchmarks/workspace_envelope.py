"""Per-target cost of the safety envelope with the Cartesian workspace check (bench/safety.py).

Side by side in one process, alternating, each figure the median over --runs runs of the per-target
mean over --targets targets: the joint-only envelope (the anchor: joint box + step bound), + the
gripper-only Cartesian check (the gripper's and moving jaw's 5 collision geoms by FK, what the
envelope checked before issue 34) and + the whole-arm check (all 12 collision geoms of the six links
of hardware/sim/so101.xml) against hardware/bench.yaml's arm_envelope, for targets inside the
envelope (one FK), targets into the table (cut back along the step: 3 more batched FKs) and targets
cut at a keep-out box under the gripper (the separating-axis test runs). Also the share of a 30 Hz
control period.

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

    from dataclasses import replace

    from spabench.bench.config import DEFAULT_HOME_POSE, DEFAULT_JOINT_LIMITS
    from spabench.bench.kinematics import GRIPPER_BODIES, arm_model
    from spabench.bench.safety import SafetyEnvelope, WorkspaceEnvelope
    from spabench.paths import repo_root
    from spabench.suite.loader import load_geometry
    from spabench.suite.model import Box
    from spabench.suite.vocabulary import JOINTS

    spec = load_geometry(repo_root() / "hardware" / "bench.yaml").arm_envelope
    workspace = WorkspaceEnvelope(spec, arm_model())
    joint_only = SafetyEnvelope(DEFAULT_JOINT_LIMITS, 10.0)
    checks = {"gripper only": GRIPPER_BODIES, "whole arm": None}
    full = {name: SafetyEnvelope(DEFAULT_JOINT_LIMITS, 10.0, workspace=WorkspaceEnvelope(spec, arm_model(), links))
            for name, links in checks.items()}

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
    # a lamp on the table under the gripper at `low`: its top plus margin (1.3 cm) above the table's
    # floor (0.5 cm), so the descending targets are cut at the keep-out box first
    pts = arm_model().gripper_points_units(low) * 100.0
    x, y = pts[int(np.argmin(pts[:, 2]))][:2]
    lamp = replace(spec, keep_out={**spec.keep_out, "lamp": Box((x - 5.0, x + 5.0), (y - 5.0, y + 5.0), (0.0, 0.3))},
                   keep_out_margin_cm=1.0)
    lamped = {name: SafetyEnvelope(DEFAULT_JOINT_LIMITS, 10.0, workspace=WorkspaceEnvelope(lamp, arm_model(), links))
              for name, links in checks.items()}
    assert all(env.workspace.violation(low)[0] == 0.0 for env in lamped.values())
    assert all(env.workspace.violation(down[0])[1] == "keep_out:lamp" for env in lamped.values())

    cases = {"inside: joint only": (joint_only, inside, home),
             **{f"inside: + {name}": (full[name], inside, home) for name in checks},
             "into table: joint only": (joint_only, down, low),
             **{f"into table: + {name}": (full[name], down, low) for name in checks},
             **{f"at a keep-out box: + {name}": (lamped[name], down, low) for name in checks}}
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
    for name in checks:
        print(f"{name} check adds {out[f'inside: + {name}'] - out['inside: joint only']:.1f} us per target "
              f"inside, {out[f'into table: + {name}'] - out['into table: joint only']:.1f} us per cut target "
              f"({args.runs} runs x {args.targets} targets)")
    write_result("workspace_envelope", {"runs": args.runs, "targets": args.targets, "us_per_target": out})


if __name__ == "__main__":
    main()
