"""The unmodified LeRobot SO101Follower stack, driven through the Bench, against the emulated bus."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spabench.bench import BenchFault, NonFiniteTarget, make_bench
from spabench.bench.so101 import SO101Bench
from spabench.errors import DataError, SafetyError
from spabench.suite.vocabulary import CAMERAS, JOINTS
from tests.bench.conftest import ROBOT_ID
from tests.support.feetech_bus import INST_PING, INST_SYNC_READ, REG, EmulatedBus

TICK_DEG = 360.0 / 4095  # one encoder tick in LeRobot degrees


def goals_deg(bus: EmulatedBus) -> np.ndarray:
    return np.array([bus.goal_deg(j) for j in JOINTS])


def present_deg(bus: EmulatedBus) -> np.ndarray:
    return np.array([bus.present_deg(j) for j in JOINTS])


def test_connect_observe_act_round_trip(bus, make_cfg):
    bench = make_bench(make_cfg(bus))
    assert isinstance(bench, SO101Bench)
    with bench:
        assert bench.robot.is_connected and bench.robot.is_calibrated
        assert all(bus.torque_enabled(j) for j in JOINTS)
        # LeRobot configured the motors the way SOFollower does
        assert bus.register("gripper", "Max_Torque_Limit") == 500
        assert bus.register("elbow_flex", "Return_Delay_Time") == 0

        obs = bench.observe()
        assert obs.state.dtype == np.float64 and obs.state.shape == (6,)
        np.testing.assert_allclose(obs.state, present_deg(bus), atol=1e-9)
        assert sorted(obs.images) == sorted(CAMERAS)
        assert all(img.shape == (32, 48, 3) and img.dtype == np.uint8 for img in obs.images.values())

        target = obs.state + np.array([5.0, -4.0, 3.0, -2.0, 1.0, 6.0])
        result = bench.act(target)
        assert result.clamps == []
        np.testing.assert_allclose(result.sent, target)
        np.testing.assert_allclose(goals_deg(bus), target, atol=TICK_DEG)
        np.testing.assert_allclose(bench.observe().state, target, atol=TICK_DEG)
        assert bench.fps == 30 and bench.calibration_id.startswith(f"{ROBOT_ID}@sha256:")
    assert not bench.robot.bus.is_connected
    assert not any(bus.torque_enabled(j) for j in JOINTS)  # disable_torque_on_disconnect
    bench.disconnect()  # idempotent


def test_disconnect_keeps_torque_when_configured(bus, make_cfg):
    with make_bench(make_cfg(bus, disable_torque_on_disconnect=False)) as bench:
        bench.act(bench.observe().state)
    assert not bench.robot.bus.is_connected
    assert all(bus.torque_enabled(j) for j in JOINTS)


def test_clamps_to_limits_and_step_bound_are_reported_and_sent(bus, make_cfg):
    with make_bench(make_cfg(bus, max_relative_target=4)) as bench:  # int: converted, LeRobot needs float
        obs = bench.observe()
        target = obs.state.copy()
        target[0] += 30.0      # too big a step
        target[5] = 150.0      # beyond the gripper's limit, and too big a step
        result = bench.act(target)
        reasons = {(c.joint, c.reason) for c in result.clamps}
        assert reasons == {("shoulder_pan", "max_relative_target"), ("gripper", "joint_limit"),
                           ("gripper", "max_relative_target")}
        expected = obs.state.copy()
        expected[0] += 4.0
        expected[5] += 4.0
        np.testing.assert_allclose(result.sent, expected)
        np.testing.assert_allclose(goals_deg(bus), expected, atol=TICK_DEG)


def test_one_clamp_one_bus_read_per_tick_nothing_printed(bus, make_cfg, capfd):
    """Issue 9 (measured on main): LeRobot applied max_relative_target a second time, reading
    Present_Position again inside send_action and printing every clip to stderr. Now the envelope
    (relative to the observed state) is the only clamp: one SYNC_READ per observe+act, silence."""
    with make_bench(make_cfg(bus)) as bench:
        assert bench.robot.config.max_relative_target is None
        obs = bench.observe()
        bus.move_by_hand("wrist_flex", obs.state[3] + 20.0)  # the arm moved after the observation
        capfd.readouterr()
        reads = bus.instruction_counts.get(INST_SYNC_READ, 0)
        for _ in range(5):
            obs = bench.observe()
            target = obs.state.copy()
            target[3] += 30.0  # too big a step: the envelope clamps it, nobody else does
            result = bench.act(target)
            assert [c.reason for c in result.clamps] == ["max_relative_target"]
            assert result.sent[3] == pytest.approx(obs.state[3] + 10.0)
        assert bus.instruction_counts.get(INST_SYNC_READ, 0) - reads == 5  # observe only
        captured = capfd.readouterr()
        assert "clamped" not in captured.err + captured.out


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_target_never_reaches_the_bus(bus, make_cfg, bad):
    with make_bench(make_cfg(bus)) as bench:
        bench.act(bench.observe().state + 3.0)
        before = [bus.goal_ticks(j) for j in JOINTS]
        n_writes = len(bus.goal_writes())
        target = bench.observe().state + 1.0
        target[1] = bad
        with pytest.raises(NonFiniteTarget, match=r"shoulder_lift") as err:
            bench.act(target)
        assert isinstance(err.value, SafetyError) and err.value.joints == ["shoulder_lift"]
        # the hold wrote the present positions back: registers unchanged, no other value sent
        assert [bus.goal_ticks(j) for j in JOINTS] == before
        assert all(w.ticks == before[w.motor_id - 1] for w in bus.goal_writes()[n_writes:])
        bench.act(bench.observe().state)  # the bench keeps working afterwards


def test_hold_stops_a_moving_arm(make_cfg):
    with (
        EmulatedBus(rate_ticks_per_s=40.0) as bus,  # 9 deg (~100 ticks) takes ~2.5 s
        make_bench(make_cfg(bus)) as bench,
    ):
        start = [bus.present_ticks(j) for j in JOINTS]
        target = bench.observe().state + 9.0
        bench.act(target)
        target_ticks = [bus.goal_ticks(j) for j in JOINTS]
        held = bench.hold()
        goals = [bus.goal_ticks(j) for j in JOINTS]
        present = [bus.present_ticks(j) for j in JOINTS]
        for s0, tt, g, p in zip(start, target_ticks, goals, present, strict=True):
            assert abs(tt - s0) > 60                    # the arm had far to go
            assert abs(g - s0) < abs(tt - s0) - 20      # the goal is now short of the target
            assert abs(p - g) <= 10                     # and the arm stays where it was stopped
        assert held.clamps == [] and held.sent.shape == (6,)


def test_calibration_mismatch_refuses_and_disconnects(bus, make_cfg, calib_dir):
    bus.set_stored_calibration("elbow_flex", homing_offset=-1000)
    bench = make_bench(make_cfg(bus))
    with pytest.raises(SafetyError) as err:
        bench.connect()
    text = str(err.value)
    assert "calibration mismatch" in text and str(calib_dir / f"{ROBOT_ID}.json") in text
    assert "elbow_flex.homing_offset file -1278 vs motor -1000" in text
    assert f"lerobot-calibrate --robot.type=so101_follower --robot.port={bus.port} --robot.id={ROBOT_ID}" in text
    assert not bench.is_connected and not bench.robot.bus.is_connected
    assert not any(bus.torque_enabled(j) for j in JOINTS)
    # Issue 9 (measured on main: Torque_Enable=1 at +1.757 s, 0 at +1.760 s): torque never enabled
    writes = bus.register_writes("Torque_Enable")
    assert all(value == 0 for _, _, value in writes), writes
    assert not bus.goal_writes()  # and no goal was ever sent


def test_matching_calibration_enables_torque_after_the_check(bus, make_cfg):
    """The write log of a good connect: calibration registers read, then configure, then torque on."""
    with make_bench(make_cfg(bus)):
        writes = bus.register_writes("Torque_Enable")
    enabled = [t for t, _, v in writes if v == 1]
    assert len({i for _, i, v in writes if v == 1}) == 6 and enabled


def test_missing_calibration_file_refuses_before_touching_the_bus(bus, make_cfg, calib_dir):
    (calib_dir / f"{ROBOT_ID}.json").unlink()
    bench = make_bench(make_cfg(bus))
    with pytest.raises(SafetyError) as err:
        bench.connect()
    text = str(err.value)
    assert "is missing" in text and str(calib_dir / f"{ROBOT_ID}.json") in text
    assert f"--robot.calibration_dir={calib_dir}" in text
    assert not bench.is_connected
    assert sum(bus.instruction_counts.values()) == 0


def test_malformed_calibration_file_names_the_field(bus, make_cfg, calib_dir):
    path = calib_dir / f"{ROBOT_ID}.json"
    data = json.loads(path.read_text())
    data["wrist_roll"]["range_max"] = "4095"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"field 'wrist_roll\.range_max'"):
        make_bench(make_cfg(bus)).connect()


def test_missing_motor_is_a_clear_fault(bus, make_cfg):
    bus.remove_motor(3)
    bench = make_bench(make_cfg(bus, connect_retries=1))
    with pytest.raises(BenchFault) as err:
        bench.connect()
    assert bus.instruction_counts[INST_PING] == 2 * 6  # one retry of the whole handshake, no more
    text = str(err.value)
    assert "Missing motor IDs" in text and "- 3 (expected model: 777)" in text
    assert bus.port in text and err.value.component == "bus"
    assert not bench.robot.bus.is_connected
    assert not any(bus.torque_enabled(j) for j in JOINTS)


def test_wrong_model_number_is_a_clear_fault(bus, make_cfg):
    bus.set_model_number("wrist_roll", 2825)  # an STS3250 where an STS3215 belongs
    with pytest.raises(BenchFault, match=r"5 \(wrist_roll\): expected 777, found 2825"):
        make_bench(make_cfg(bus)).connect()


def test_missing_port_is_a_clear_fault(make_cfg):
    bus = EmulatedBus()  # never started: no pty
    bus.port = "/dev/does-not-exist-spabench"
    with pytest.raises(BenchFault, match="does not exist.*lerobot-find-port"):
        make_bench(make_cfg(bus)).connect()


def test_bus_going_silent_mid_session(bus, make_cfg):
    bench = make_bench(make_cfg(bus, num_read_retries=2))
    bench.connect()
    bench.act(bench.observe().state)
    bus.go_silent()
    reads_before = bus.instruction_counts.get(INST_SYNC_READ, 0)
    with pytest.raises(BenchFault, match="stopped answering during observe") as err:
        bench.observe()
    assert err.value.component == "bus"
    assert bus.instruction_counts[INST_SYNC_READ] - reads_before == 3  # bounded: 1 + num_read_retries
    with pytest.raises(BenchFault, match="stopped answering"):
        bench.act(np.zeros(6))
    bench.disconnect()  # never raises on a dead bus, but releases the port
    assert bench.last_disconnect_error is not None
    assert not bench.robot.bus.is_connected and not bench.is_connected


def test_lost_camera_mid_session(bus, make_cfg):
    with make_bench(make_cfg(bus)) as bench:
        bench.observe()
        bench.robot.cameras["middle"].stop()
        with pytest.raises(BenchFault, match="camera 'middle'") as err:
            bench.observe()
        assert err.value.component == "camera:middle"
        bench.act(bench.measure())  # the arm is still controllable: the rollout can hold and end
    assert not bench.robot.bus.is_connected


def test_camera_that_cannot_be_opened_is_named_as_a_camera_fault(bus, make_cfg):
    """Measured on main: with no USB camera plugged in, the error blamed the arm's power supply and
    serial cable and named no camera. A real LeRobot OpenCVCamera on a device that does not exist."""
    from tests.bench.conftest import small_cameras

    cameras = small_cameras()
    cameras["wrist"] = {"type": "opencv", "index_or_path": "/dev/video97", "width": 640, "height": 480, "fps": 30}
    bench = make_bench(make_cfg(bus, cameras=cameras))
    with pytest.raises(BenchFault) as err:
        bench.connect()
    text = str(err.value)
    assert err.value.component == "camera:wrist"
    assert text.startswith("camera 'wrist' (opencv device /dev/video97) could not be opened")
    assert "camera problem, not the arm" in text and "power supply" not in text
    assert not bench.is_connected and bench._robot is None  # refused before the arm was touched
    # a device index LeRobot cannot open: the same naming, from the driver's own error
    cameras["wrist"] = {**cameras["wrist"], "index_or_path": 97}
    bench = make_bench(make_cfg(bus, cameras=cameras, connect_retries=2))
    with pytest.raises(BenchFault) as err:
        bench.connect()
    assert err.value.component == "camera:wrist", str(err.value)
    assert str(err.value).startswith("camera 'wrist' (opencv device 97) could not be opened")
    assert not bench.is_connected and not bench.robot.bus.is_connected  # the port is released


def test_go_home_bounded_speed(make_cfg):
    start = {"shoulder_pan": 40.0, "shoulder_lift": 0.0, "elbow_flex": 0.0, "wrist_flex": 20.0,
             "wrist_roll": -30.0, "gripper": 60.0}
    with EmulatedBus(initial_deg=start) as bus:
        cfg = make_cfg(bus, home_speed_deg_s=240.0, fps=30)  # 8 deg per tick
        with make_bench(cfg) as bench:
            steps = bench.go_home()
            writes = bus.goal_writes()
            home = np.array([cfg.home_pose[j] for j in JOINTS])
            np.testing.assert_allclose(bench.measure(), home, atol=cfg.home_tolerance_deg)
            step = 240.0 / 30
            assert len(steps) >= int(60.0 / step)  # the largest move (shoulder_lift, 60 deg) took steps
            for joint in JOINTS:
                ticks = [w.ticks for w in writes if w.motor_id == JOINTS.index(joint) + 1]
                path = [start[joint]] + [bus.ticks_to_deg(joint, t) for t in ticks]
                deltas = np.abs(np.diff(path))
                unit = 1.0 if joint != "gripper" else 100.0 / 1417  # one tick in the joint's unit
                assert deltas.max() <= step + 1.5 * (TICK_DEG if joint != "gripper" else unit), joint
            assert all(c.reason != "joint_limit" for s in steps for c in s.clamps)


def test_go_home_times_out_when_the_arm_cannot_move(make_cfg):
    with (
        EmulatedBus(rate_ticks_per_s=0.0) as bus,  # motors powered but stuck
        make_bench(make_cfg(bus, home_speed_deg_s=600.0)) as bench,
        pytest.raises(BenchFault, match="did not reach the home pose"),
    ):
        bench.go_home(timeout_s=0.3)


def test_go_home_stops_within_a_step_of_an_estop_and_holds(make_cfg):
    """An e-stop from another thread (the console's, a key reader's) while the arm goes home: the
    bench sends at most one more step, holds, and the arm rests short of home."""
    import threading
    import time

    from spabench.bench.errors import MotionStopped
    from spabench.rollout.controls import StopControl

    start = {"shoulder_pan": 40.0, "shoulder_lift": 0.0, "elbow_flex": 0.0, "wrist_flex": 20.0,
             "wrist_roll": -30.0, "gripper": 60.0}
    with EmulatedBus(initial_deg=start) as bus:
        cfg = make_cfg(bus, home_speed_deg_s=60.0, fps=30)  # 2 deg per step: home is 30 steps away
        home = np.array([cfg.home_pose[j] for j in JOINTS])
        with make_bench(cfg) as bench:
            controls = StopControl()
            pan = "shoulder_pan"
            n0 = len(bus.goal_writes(pan))

            def press_after_five_steps():
                deadline = time.monotonic() + 20
                while len(bus.goal_writes(pan)) < n0 + 5 and time.monotonic() < deadline:
                    time.sleep(0.002)
                controls.request("estop", "test")

            threading.Thread(target=press_after_five_steps, daemon=True).start()
            with pytest.raises(MotionStopped) as stopped:
                bench.go_home(should_stop=controls.estopped)
            done = len(bus.goal_writes(pan))
            time.sleep(0.3)
            assert len(bus.goal_writes(pan)) == done        # nothing moves it after the stop
            measured = bench.measure()
        # measured from the latch's own time (not from the pressing thread's, which a loaded machine
        # delays): at most the step already under way when it latched, then the hold
        latched_at = controls.estop_latched_at()
        steps = stopped.value.steps
        before = [s for s in steps if s.t <= latched_at]
        after = [s for s in steps if s.t > latched_at]
        assert len(before) >= 5 and len(after) <= 1, (len(before), len(after))
        np.testing.assert_allclose(goals_deg(bus), present_deg(bus), atol=2 * TICK_DEG)  # held
        short_at_latch = np.max(np.abs(before[-1].sent - home))
        assert np.max(np.abs(measured - home)) >= short_at_latch - 2.0 - 0.5  # one more 2-deg step at most
        assert np.max(np.abs(measured - home)) > 1.0                            # stopped short of home


def test_act_before_connect_is_refused(bus, make_cfg):
    bench = make_bench(make_cfg(bus))
    with pytest.raises(BenchFault, match="not connected"):
        bench.act(np.zeros(6))


def test_shipped_emulated_config_and_calibration_file_drive_the_emulator(bus):
    """conf/bench/so101_emulated.yaml + hardware/calibration/... as the CLI would compose them."""
    import yaml

    from spabench.bench.config import BenchConfig
    from spabench.paths import repo_root

    raw = yaml.safe_load((repo_root() / "conf" / "bench" / "so101_emulated.yaml").read_text())
    raw["port"] = bus.port
    cfg = BenchConfig.from_mapping(raw)
    with make_bench(cfg) as bench:
        assert bench.calibration_path == repo_root() / "hardware/calibration/so101_follower/spabench_follower.json"
        obs = bench.observe()
        assert {k: v.shape for k, v in obs.images.items()} == {c: (120, 160, 3) for c in CAMERAS}
        bench.go_home(speed_deg_s=600.0)
        np.testing.assert_allclose(present_deg(bus), [cfg.home_pose[j] for j in JOINTS],
                                   atol=cfg.home_tolerance_deg)


def test_the_so101_bench_neither_builds_scenes_nor_keeps_a_clock_nor_scores(bus, make_cfg):
    """The Bench defaults that the session, the rollout loop and the auto operator call on every
    bench (the twin overrides them): a person stages and scores, the rollout runs on the wall clock."""
    from spabench.operator.auto import AutoOperator
    from spabench.operator.config import OperatorConfig

    scene = object()   # a real bench never reads the scene
    with make_bench(make_cfg(bus)) as bench:
        before = bench.measure()
        assert bench.load_scene(scene) is False
        assert bench.lockstep_clock() is None
        bench.begin_episode()
        assert bench.evaluate(scene) is None
        np.testing.assert_allclose(bench.measure(), before, atol=0.2)   # nothing moved
        op = AutoOperator(OperatorConfig(type="auto"), bench=bench)
        assert op.wait_scene_ready(None, scene, "")
        assert op.score(None, None) is None   # left unscored, for `spabench score`


def test_a_late_answer_to_another_read_never_passes_for_the_joint_positions(bus, make_cfg):
    """A status packet that arrives after LeRobot's packet timeout stays in the serial input buffer
    (scservo_sdk's clearPort only flushes output), and scservo_sdk takes the first bytes of the next
    packet with the right id as the answer. A late health answer (Present_Load first, near 0 at rest)
    read as a position is a joint ~180 degrees away: found on a loaded machine as a goal below the
    table (tests/integration/test_workspace_envelope.py). The bench must skip it, for the state
    and for the hold that copies the present positions into the goals."""
    health = REG["Present_Current"][0] + REG["Present_Current"][1] - REG["Present_Load"][0]
    with make_bench(make_cfg(bus)) as bench:
        truth = present_deg(bus)
        bus.late_reply("shoulder_pan", "Present_Load", health)
        np.testing.assert_allclose(bench.measure(), truth, atol=TICK_DEG)
        bus.late_reply("elbow_flex", "Present_Load", health)
        bench.hold()
        np.testing.assert_allclose(goals_deg(bus), truth, atol=TICK_DEG)
        # a late answer of the same size (an earlier position read) is a true, older reading: taken
        bus.late_reply("wrist_flex", "Present_Position")
        np.testing.assert_allclose(bench.measure(), truth, atol=TICK_DEG)


@pytest.mark.parametrize("option", [None, 300])
def test_a_refused_torque_limit_write_is_read_back_and_refused_before_torque(bus, make_cfg, option):
    """Issue 34: a servo that acknowledged Max_Torque_Limit but kept 1000 was torqued anyway. Both
    LeRobot's own 500 and the configured gripper_max_torque_limit are read back with torque off."""
    bus.ignore_writes("gripper", "Max_Torque_Limit")
    bench = make_bench(make_cfg(bus, health={"gripper_max_torque_limit": option}))
    with pytest.raises(BenchFault) as err:
        bench.connect()
    written = 500 if option is None else option
    assert (f"motor 'gripper' did not take its torque limit: Max_Torque_Limit {written} was written and "
            "1000 read back") in str(err.value)
    assert not bench.is_connected and not bench.robot.bus.is_connected
    assert [v for _, i, v in bus.register_writes("Max_Torque_Limit") if i == 6][-1] == written   # it was sent
    assert all(value == 0 for _, _, value in bus.register_writes("Torque_Enable"))   # never torqued
    assert not any(bus.torque_enabled(j) for j in JOINTS) and not bus.goal_writes()


def test_torque_limits_are_read_back_before_torque_goes_on(bus, make_cfg):
    with make_bench(make_cfg(bus, health={"gripper_max_torque_limit": 300})):
        assert bus.register("gripper", "Max_Torque_Limit") == 300
        assert all(bus.torque_enabled(j) for j in JOINTS)
        limit_writes = [t for t, i, _ in bus.register_writes("Max_Torque_Limit") if i == 6]
        torque_on = [t for t, _, v in bus.register_writes("Torque_Enable") if v == 1]
    assert len(limit_writes) == 2 and max(limit_writes) < min(torque_on)   # LeRobot's 500, then 300
