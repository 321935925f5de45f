"""Per-step cost of the MuJoCo twin with the default cameras (conf/bench/sim.yaml: five at 320x240,
no shadows, no anti-aliasing), headless (MUJOCO_GL=egl).

Measured on a suite scene (five objects by default), each figure the median over --runs runs of
--steps control steps (each run's figure is its per-step mean):
  physics       one control period: `substeps` mj_step calls (1/fps s of sim time)
  render:<cam>  one frame of one camera
  privileged    building the privileged payload (object poses, contacts)
  get_observation + send_action   the robot's whole step as the bench sees it (all five cameras)
Also the same whole step at 640x480 (the real bench's resolution) for comparison.

    python benchmarks/bench_sim_step.py [--runs 5] [--steps 60] [--scene ID] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from _common import median, table, write_result  # noqa: E402


def _per_step(fn, steps: int) -> float:
    t0 = time.perf_counter()
    for i in range(steps):
        fn(i)
    return (time.perf_counter() - t0) / steps


def _robot(suite, scene, width: int, height: int):
    from spabench.sim.config_sim_robot import SimCameraConfig, SimRobotConfig
    from spabench.sim.sim_robot import SimRobot
    from spabench.suite.vocabulary import CAMERAS

    cams = {c: SimCameraConfig(width, height) for c in CAMERAS}
    robot = SimRobot(SimRobotConfig(id="bench", cameras=cams), objects=suite.objects,
                     geometry=suite.geometry, suite=suite)
    robot.connect()
    robot.load_scene(scene)
    return robot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--scene", default=None, help="scene id (default: the first 5-object ID scene)")
    ap.add_argument("--quick", action="store_true", help="2 runs x 20 steps (a smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.steps = 2, 20

    from spabench.paths import repo_root
    from spabench.suite.loader import load_suite
    from spabench.suite.vocabulary import CAMERAS, JOINTS

    root = repo_root()
    suite = load_suite(root / "tasks", root / "hardware")
    scene = suite.scene(args.scene) if args.scene else next(
        s for s in sorted(suite.scenes.values(), key=lambda s: s.scene_id)
        if s.condition == "id" and len(s.objects) >= 5)

    robot = _robot(suite, scene, 320, 240)
    world = robot.world
    obs = robot.get_observation()
    base = np.array([obs[f"{j}.pos"] for j in JOINTS])
    # a gentle sinusoidal sweep so the arm really moves while we time
    wave = lambda i: base + np.array([15, 10, -10, 10, 20, 20]) * np.sin(i / 15.0)  # noqa: E731
    action = lambda i: {f"{j}.pos": float(v) for j, v in zip(JOINTS, wave(i), strict=True)}  # noqa: E731

    results: dict[str, list[float]] = {k: [] for k in
                                       ["physics", *[f"render:{c}" for c in CAMERAS], "privileged",
                                        "get_observation+send_action", "get_observation+send_action@640x480"]}
    for _ in range(args.runs):
        results["physics"].append(_per_step(lambda i: world.step(), args.steps))
        for cam in CAMERAS:
            robot._images()                       # renderers exist
            results[f"render:{cam}"].append(_per_step(lambda i, c=cam: robot._rig.render(world.data, c), args.steps))
        results["privileged"].append(_per_step(lambda i: robot.privileged_state(), args.steps))

        def whole(i):
            robot.get_observation()
            robot.send_action(action(i))
        results["get_observation+send_action"].append(_per_step(whole, args.steps))
    robot.disconnect()

    big = _robot(suite, scene, 640, 480)
    for _ in range(args.runs):
        def whole_big(i):
            big.get_observation()
            big.send_action(action(i))
        results["get_observation+send_action@640x480"].append(_per_step(whole_big, args.steps))
    substeps = big.world.built.substeps
    timestep = big.world.model.opt.timestep
    big.disconnect()

    rows = []
    summary = {}
    for name, values in results.items():
        ms = [v * 1e3 for v in values]
        summary[name] = {"median_ms": median(ms), "min_ms": min(ms), "max_ms": max(ms),
                         "stdev_ms": statistics.pstdev(ms)}
        rows.append((name, median(ms), min(ms), max(ms)))
    whole_ms = summary["get_observation+send_action"]["median_ms"]
    print(f"scene {scene.scene_id} ({len(scene.objects)} objects); {substeps} physics steps of "
          f"{timestep * 1e3:.3f} ms per control step; runs={args.runs} x steps={args.steps}")
    print(table(rows, ("part (per control step)", "median ms", "min ms", "max ms")))
    print(f"-> the twin runs at {1000.0 / whole_ms:.1f} steps/s with the default cameras "
          f"({1000.0 / whole_ms / 30:.2f}x real time at 30 fps)")
    path = write_result("bench_sim_step", {
        "scene": scene.scene_id, "objects": len(scene.objects), "substeps": substeps,
        "timestep_s": timestep, "runs": args.runs, "steps": args.steps,
        "mujoco_gl": os.environ.get("MUJOCO_GL"), "results": summary})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
