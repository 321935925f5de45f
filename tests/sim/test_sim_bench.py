"""The sim bench: spabench's Bench (envelope, observe/act/go_home) on the twin, plus its hooks."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from spabench.bench.config import BenchConfig
from spabench.errors import ConfigError
from spabench.sim.privileged import SCHEMA
from spabench.suite.vocabulary import CAMERAS, JOINTS
from tests.sim.inventory import ROOT


def sim_config(**sim) -> BenchConfig:
    raw = yaml.safe_load((ROOT / "conf" / "bench" / "sim.yaml").read_text())
    raw["cameras"] = {c: {"width": 80, "height": 60} for c in CAMERAS}
    raw["sim"].update(render_cameras=["middle", "wrist"], **sim)
    return BenchConfig.from_mapping(raw)


@pytest.fixture
def bench(suite):
    from spabench.bench import make_bench

    with make_bench(sim_config()) as b:          # the bench layer's own factory picks the twin
        yield b


def test_make_bench_builds_the_twin(bench):
    assert bench.kind == "sim" and type(bench.robot).__name__ == "SimRobot"
    obs = bench.observe()
    assert obs.state.shape == (6,) and set(obs.images) == set(CAMERAS)
    assert all(img.shape == (60, 80, 3) for img in obs.images.values())
    assert obs.images["middle"].std() > 5 and not obs.images["overhead"].any()   # not rendered
    home = np.array([bench.cfg.home_pose[j] for j in JOINTS])
    assert np.max(np.abs(obs.state - home)) < 2.0
    assert obs.extras["privileged"]["schema"] == SCHEMA


def test_act_goes_through_the_envelope(bench):
    obs = bench.observe()
    target = obs.state + np.array([25.0, 0, 0, 0, 0, 0])
    result = bench.act(target)
    assert result.sent[0] - obs.state[0] == pytest.approx(bench.cfg.max_relative_target)
    assert any(c.joint == "shoulder_pan" for c in result.clamps)
    for _ in range(10):
        bench.observe()
        bench.act(target)
    assert bench.measure()[0] == pytest.approx(target[0], abs=2.0)
    bench.go_home(speed_deg_s=600.0)
    home = np.array([bench.cfg.home_pose[j] for j in JOINTS])
    assert np.max(np.abs(bench.measure() - home)) <= bench.cfg.home_tolerance_deg


def test_scene_hooks_and_privileged_payload(bench, suite):
    scene = suite.scenes_for("counting", "ood")[0]
    bench.load_scene(scene)
    bench.begin_episode()
    payload = bench.observe().extras["privileged"]
    assert payload["scene"]["scene_id"] == scene.scene_id and payload["scene"]["task"] == "counting"
    assert "goal" not in payload["scene"] and "targets" not in payload["scene"]   # the policy must ground
    ids = [o["object_id"] for o in payload["objects"]]
    assert ids == [p.object_id for p in scene.objects]
    for o, p in zip(payload["objects"], scene.objects, strict=True):
        assert o["in_bowl"] == (p.location == "bowl")
        assert abs(o["pos_cm"][0] - p.x_cm) < 1.0 and abs(o["pos_cm"][1] - p.y_cm) < 1.0
        assert set(o["grasp"]) == {"offset_cm", "alt_offsets_cm", "axis", "width_cm", "symmetric"}
    assert payload["bowl"]["pos_cm"][:2] == list(suite.geometry.bowl_xy_cm)
    assert set(payload["gripper"]["contacts"]) == {"fixed", "moving", "arm"}
    for _ in range(20):
        bench.observe()
        bench.hold()
    assert bench.evaluate(scene) == (False, "no_action")    # nothing happened: count unchanged


def test_privileged_payload_crosses_the_wire_codec(bench, suite):
    from spabench.policy.codec_openpi import Packer, unpackb

    bench.load_scene(suite.scenes_for("object_state", "id")[0])
    payload = bench.privileged_state()
    assert unpackb(Packer().pack({"observation/privileged": payload}))["observation/privileged"] == payload


def test_unknown_sim_option_is_refused(suite):
    from spabench.sim.bench import make_sim_bench

    with pytest.raises(ConfigError, match="sim.colour_mode"):
        make_sim_bench(sim_config(colour_mode="sepia"))


def test_lockstep_clock_and_homing_is_not_scored(bench, suite):
    scene = suite.scenes_for("object_state", "no_intervention")[0]
    bench.load_scene(scene)
    bench.begin_episode()
    t0 = bench.sim_time()
    for _ in range(15):
        bench.observe()
        bench.hold()
    assert bench.sim_time() - t0 == pytest.approx(15 / bench.fps, rel=1e-6)   # one period per act
    assert bench.evaluate(scene) == (True, None)           # held still: no motion
    bench.go_home(speed_deg_s=600.0)                       # already home: the trace is frozen first
    obs = bench.observe()
    for _ in range(20):                                    # after the timer: not part of the episode
        bench.act(obs.state + np.array([0, 0, 0, 0, 0, 30.0]))
    assert bench.evaluate(scene) == (True, None)
    bench.begin_episode()                                  # a new episode scores motion again
    for _ in range(20):
        bench.act(obs.state)                               # the gripper goes back: motion
    assert bench.evaluate(scene) == (False, "unnecessary_intervention")


def test_the_twin_scores_by_the_rule_of_the_suite_it_is_handed(bench, suite):
    """Measured on main: the twin always scored Relational Placement by the paper's bound, whatever
    conf/suite said. The run session hands the twin its suite (`adopt_suite`); a start that the
    sheet bound counts as placed (edge gap <= 8 cm) but the paper's does not (> 7.62 cm) then scores
    as the configured rule says."""
    import dataclasses
    import math

    from spabench.suite import resolvers as R
    from spabench.suite.success import RelationRule

    scene = suite.scene("relational_placement-ood-040")
    target, reference, _ = R.requested_relation(scene, suite)
    by_id = {o.object_id: o for o in scene.objects}
    t, r = by_id[target], by_id[reference]
    # slide the target towards its reference to 8.6 cm centre to centre (edge gap about 6.5 cm)
    k = 8.6 / math.hypot(t.x_cm - r.x_cm, t.y_cm - r.y_cm)
    moved = dataclasses.replace(t, x_cm=r.x_cm + k * (t.x_cm - r.x_cm), y_cm=r.y_cm + k * (t.y_cm - r.y_cm))
    scene = dataclasses.replace(scene, objects=tuple(moved if o.object_id == target else o for o in scene.objects))
    bench.load_scene(scene)
    bench.begin_episode()
    for _ in range(5):
        bench.observe()
        bench.hold()
    # a recorded trajectory in which the arm moved (the objects stay where the scene put them)
    states = np.zeros((20, len(JOINTS)))
    states[5:, 0] = np.linspace(0.0, 10.0, 15)
    assert bench.evaluate(scene, states)[0] is False       # the twin's own suite: the paper's bound
    bench.adopt_suite(dataclasses.replace(suite, relation_rule=RelationRule(bound="sheet")))
    assert bench.evaluate(scene, states) == (True, None)
    bench.adopt_suite(suite)
    assert bench.evaluate(scene, states)[0] is False
