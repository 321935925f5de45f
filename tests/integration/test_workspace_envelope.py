"""A stand-in policy that drives the gripper into the table, behind the Cartesian workspace envelope:
on the MuJoCo twin (the gripper's geoms, measured by MuJoCo, never sink below the plane minus the
margin) and through `run(cfg)` on the emulated Feetech bus with LeRobot's SO101Follower (no goal
position the servos receive puts a gripper point below the plane; each cut is a clamp event). And a
path that keeps the gripper above the table but lowers the wrist into it (issue 34), on the twin."""

from __future__ import annotations

import io
from collections import defaultdict

import numpy as np
import pytest

from spabench.bench.kinematics import GRIPPER_BODIES, arm_model
from spabench.ledger import Ledger
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK
from spabench.serve.openpi_server import OpenPiServer
from spabench.suite.vocabulary import JOINTS
from tests.integration.harness import HORIZON, WaveServer, make_campaign, make_cfg
from tests.sim.inventory import load_objects_and_geometry
from tests.support.feetech_bus import EmulatedBus

# shoulder forward and down, elbow and wrist bent: the gripper ~7 cm into the table top
INTO_TABLE = np.array([0.0, 40.0, 20.0, 70.0, 0.0, 10.0])
STEP_DEG = 3.0
SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)


def dive(state) -> np.ndarray:
    """A chunk from the measured state straight at INTO_TABLE, STEP_DEG per step per joint."""
    out, pose = [], np.asarray(state, float).copy()
    for _ in range(HORIZON):
        pose = pose + np.clip(INTO_TABLE - pose, -STEP_DEG, STEP_DEG)
        out.append(pose.copy())
    return np.array(out)


def lowest_cm(target) -> float:
    return float(arm_model().gripper_points_units(target)[:, 2].min()) * 100.0


def test_the_twin_never_puts_the_gripper_into_the_table():
    pytest.importorskip("mujoco")
    import mujoco

    from spabench.sim.bench import make_sim_bench

    objects, geometry = load_objects_and_geometry()
    env = geometry.arm_envelope
    plane, floor = env.table_z_cm, env.table_z_cm + env.table_margin_cm
    assert lowest_cm(INTO_TABLE) < plane - 5.0       # the stand-in's goal is well inside the table
    bench = make_sim_bench({"type": "sim", "cameras": {}, "sim": {"privileged": False}},
                           objects=objects, geometry=geometry)
    with bench:
        model, data = bench.robot.world.model, bench.robot.world.data
        geoms = [g for g in range(model.ngeom)
                 if mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.geom_bodyid[g]) in GRIPPER_BODIES
                 and model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX]
        assert len(geoms) * 8 == arm_model().gripper_point_count
        table = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "table")
        lo, hi, step = bench.envelope.lo, bench.envelope.hi, bench.envelope.max_relative_target
        measured_low, cuts, touching = np.inf, [], 0
        for _ in range(240):                          # 8 s of the twin at 30 Hz
            state = bench.observe().state
            target = dive(state)[0]
            result = bench.act(target)
            stepped = np.clip(np.clip(target, lo, hi), state - step, state + step)
            cut = [c for c in result.clamps if c.reason == "workspace"]
            # what was sent is above the floor; every target the envelope changed came back as one clamp
            assert lowest_cm(result.sent) >= floor - 1e-6, result
            if cut:
                (clamp,) = cut
                assert clamp.requested_target == tuple(stepped) and lowest_cm(stepped) < floor
                assert clamp.sent_target == tuple(result.sent) and clamp.rule == "table"
                cuts.append(clamp)
            else:
                np.testing.assert_allclose(result.sent, stepped, atol=1e-4)
            # MuJoCo's own geom poses after the physics step: the gripper's box corners
            corners = np.vstack([data.geom_xpos[g] + (SIGNS * model.geom_size[g]) @
                                 data.geom_xmat[g].reshape(3, 3).T for g in geoms])
            measured_low = min(measured_low, float(corners[:, 2].min()) * 100.0)
            touching += sum(1 for c in data.contact[:data.ncon]
                            if table in (c.geom1, c.geom2) and {c.geom1, c.geom2} & set(geoms))
        assert len(cuts) > 10, "the stand-in never reached the envelope"
        assert any(c.kept == 0.0 for c in cuts) or min(c.kept for c in cuts) < 0.05   # pressing on: held
        assert measured_low >= plane - env.table_margin_cm, measured_low
        assert measured_low < floor + 1.0, measured_low   # it did get down to the floor
        assert touching == 0       # no gripper box in contact with the table top


class DiveServer(WaveServer):
    """An openpi server whose every chunk heads for INTO_TABLE from the measured state."""

    def __init__(self):
        self.server = OpenPiServer(self.infer, {"policy": "table_diver", "horizon": HORIZON}, port=0)

    def infer(self, obs: dict) -> dict:
        chunk = dive(obs["observation/state"])
        return {"actions": chunk.astype(np.float32), "server_timing": {"infer_ms": 1.0}}


def test_the_emulated_so101_never_receives_a_goal_below_the_plane(tmp_path):
    campaign = make_campaign(tmp_path)
    env = load_objects_and_geometry()[1].arm_envelope
    plane, floor = env.table_z_cm, env.table_z_cm + env.table_margin_cm
    with EmulatedBus() as bus, DiveServer() as server:
        # the servos' goals before anything is written are where they stand: the replay starts there
        start = {n: bus.ticks_to_deg(n, bus.present_ticks(n)) for n in JOINTS}
        out = io.StringIO()
        code = run(make_cfg(campaign, bus.port, server.port, timer_s=3.0), out=out)
        assert code == EXIT_OK, out.getvalue()
        writes = bus.goal_writes()
        names = {i: n for n, i in bus.motor_ids.items()}
    # replay every Goal_Position the servos received, one sync write (same time stamp) at a time
    by_time: dict[float, dict[str, float]] = defaultdict(dict)
    for w in writes:
        by_time[w.t][names[w.motor_id]] = bus.ticks_to_deg(names[w.motor_id], w.ticks)
    goal = dict(start)
    lows = []
    for t in sorted(by_time):
        goal.update(by_time[t])
        lows.append((lowest_cm([goal[j] for j in JOINTS]), t, dict(goal), by_time[t]))
    assert len(lows) > 30
    # one encoder tick is 0.088 deg: a goal may sit a fraction of a millimetre under the cut's floor
    assert min(lows)[0] >= floor - 0.1, (min(lows), start)
    lows = [low for low, *_ in lows]
    assert min(lows) > plane
    assert min(lows) < floor + 1.0                # the stand-in did reach the floor

    ledger = Ledger.open(campaign / "ledger.sqlite")
    (attempt,) = ledger.attempts_for("E0000-P1")
    ledger.close()
    with EpisodeReader(campaign / attempt.episode_path) as ep:
        events = ep.events()
        sent = ep.executed_actions
        times = ep.timestamps
    cuts = [e for e in events if e["kind"] == "clamp" and e.get("reason") == "workspace"]
    assert len(cuts) > 5, "no workspace clamp was logged"
    for e in cuts:
        assert e["rule"] == "table" and e["depth_cm"] > 0 and 0.0 <= e["kept"] < 1.0
        assert lowest_cm(e["requested_target"]) < floor <= lowest_cm(e["sent_target"]) + 1e-6
        # the cut is what the episode records as executed at that tick
        i = int(np.searchsorted(times, e["t"], side="right")) - 1    # the tick the event was emitted in
        np.testing.assert_allclose(sent[i], e["sent_target"], atol=1e-3)
    executed = [a for a in sent if np.all(np.isfinite(a))]
    assert min(lowest_cm(a) for a in executed) >= floor - 1e-4


# issue 34's path: the gripper folded up (wrist_flex at its limit), then the shoulder lowers the
# forearm; the gripper stays above the table's margin all the way, the wrist bracket ends 3.6 cm into it
WRIST_PATH = (np.array([0.0, 0.0, 42.0, 95.0, 0.0, 10.0]), np.array([0.0, 97.0, 42.0, 95.0, 0.0, 10.0]))


def test_the_twin_stops_a_path_that_lowers_the_wrist_into_the_table():
    """Reproduction: only the gripper was checked, so the wrist bracket reached the table and the
    twin's contact stopped it (no cut, no clamp). Now the envelope holds the arm first: no arm geom
    touches the table, and every cut is a clamp naming the link."""
    pytest.importorskip("mujoco")
    import mujoco

    from spabench.sim.bench import make_sim_bench

    objects, geometry = load_objects_and_geometry()
    env = geometry.arm_envelope
    plane, floor = env.table_z_cm, env.table_z_cm + env.table_margin_cm
    assert min(lowest_cm(WRIST_PATH[0] + f * (WRIST_PATH[1] - WRIST_PATH[0]))
               for f in np.linspace(0.0, 1.0, 101)) > floor           # the premise: the gripper stays above
    bench = make_sim_bench({"type": "sim", "cameras": {}, "sim": {"privileged": False}},
                           objects=objects, geometry=geometry)
    with bench:
        model, data = bench.robot.world.model, bench.robot.world.data
        table = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "table")
        shoulder = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "shoulder")
        arm = [g for g in range(model.ngeom) if _below(model, int(model.geom_bodyid[g]), shoulder)]   # the links
        box, capsule = int(mujoco.mjtGeom.mjGEOM_BOX), int(mujoco.mjtGeom.mjGEOM_CAPSULE)
        links = [g for g in arm if int(model.geom_type[g]) in (box, capsule)
                 and mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.geom_bodyid[g]) not in GRIPPER_BODIES]
        waypoint, cuts, touching, measured_low = 0, [], [], np.inf
        for _ in range(300):                          # 10 s of the twin at 30 Hz
            state = bench.observe().state
            if waypoint + 1 < len(WRIST_PATH) and np.abs(WRIST_PATH[waypoint] - state).max() < 2.0:
                waypoint += 1
            target = state + np.clip(WRIST_PATH[waypoint] - state, -STEP_DEG, STEP_DEG)
            result = bench.act(target)
            cuts += [c for c in result.clamps if c.reason == "workspace"]
            touching += [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, c.geom1 + c.geom2 - table)
                         for c in data.contact[:data.ncon] if table in (c.geom1, c.geom2) and
                         ({c.geom1, c.geom2} & set(arm))]
            # MuJoCo's own poses of the links' boxes and capsules (not the gripper's) after the step
            for g in links:
                rot = data.geom_xmat[g].reshape(3, 3)
                if int(model.geom_type[g]) == box:
                    low = (data.geom_xpos[g] + (SIGNS * model.geom_size[g]) @ rot.T)[:, 2].min()
                else:
                    low = (data.geom_xpos[g] + np.outer([-1, 1], rot[:, 2]) * model.geom_size[g][1])[:, 2].min() \
                        - model.geom_size[g][0]
                measured_low = min(measured_low, float(low) * 100.0)
        assert len(links) == 7, links                 # shoulder, upper arm, forearm, wrist: 5 boxes, 2 capsules
        assert waypoint == 1, "the path never reached its second leg"
        assert touching == [], f"arm geoms touched the table: {sorted(set(touching))}"
        assert cuts, "the envelope never cut the path"
        for clamp in cuts:
            assert clamp.rule == "table" and clamp.link not in GRIPPER_BODIES, clamp
            assert clamp.geom.replace("_", " ") in clamp.message and "below the table margin" in clamp.message
            assert lowest_cm(clamp.requested_target) > floor           # the gripper alone would have passed
        assert any(c.kept == 0.0 for c in cuts)                         # pressing on: the arm held
        assert plane <= measured_low < floor + 1.0, measured_low         # down to the margin, not into the table


def _below(model, body: int, top: int) -> bool:
    """Whether `body` is `top` or hangs from it."""
    while body > 0 and body != top:
        body = int(model.body_parentid[body])
    return body == top
