"""Success criteria and suggested failure modes, from hand-placed object poses."""

from __future__ import annotations

import numpy as np
import pytest

from spabench.errors import DataError
from spabench.sim.evaluator import EpisodeTrace, evaluate, in_bowl, relation_holds
from spabench.suite.model import Cell, Goal, Instructions, ObjectState, PlacedObject, SceneSpec
from spabench.suite.vocabulary import FAILURE_MODES

BOWL = (20.0, -19.0)
STILL = np.tile([0.0, -45.0, -45.0, 90.0, 0.0, 10.0], (60, 1))


def moving() -> np.ndarray:
    states = STILL.copy()
    states[20:, 1] += np.linspace(3, 40, 40)
    return states


def trace(initial: dict, final: dict, lift=None, held=(), states=None) -> EpisodeTrace:
    as_arr = lambda d: {k: np.asarray(v, float) for k, v in d.items()}  # noqa: E731
    return EpisodeTrace(as_arr(initial), as_arr(final), dict(lift or {}), frozenset(held),
                        moving() if states is None else states)


def scene(goal: Goal, task="object_state", ids=("a", "b")) -> SceneSpec:
    return SceneSpec("e-001", task, "id", Cell("c", "x"), False,
                     tuple(PlacedObject(i, 15.0, 0.0) for i in ids), Instructions("x"), goal)


@pytest.fixture
def geo(world_data):
    return world_data[1]


@pytest.fixture
def objs(world_data):
    return world_data[0]


def test_in_bowl_geometry(geo):
    assert in_bowl((*BOWL, 2.0), geo)
    assert in_bowl((BOWL[0] + 6.0, BOWL[1], 2.0), geo)
    assert not in_bowl((BOWL[0] + 7.0, BOWL[1], 2.0), geo)       # on the rim
    assert not in_bowl((*BOWL, 12.0), geo)                         # held above the bowl


@pytest.mark.parametrize("direction,offset,ok", [
    ("left", (0.0, 5.0), True), ("left", (0.0, -5.0), False), ("left", (4.0, 4.1), True),
    ("left", (4.1, 4.0), False), ("right", (1.0, -7.0), True), ("right", (0.0, -8.0), False),
    ("front", (-5.0, 1.0), True), ("front", (5.0, 0.0), False), ("behind", (6.0, -2.0), True),
    ("behind", (7.6, 0.0), True), ("behind", (7.65, 0.0), False), ("left", (0.0, 0.0), False),
])
def test_relation_sector(direction, offset, ok):
    ref = np.array([20.0, 0.0])
    assert relation_holds(ref + np.array(offset), ref, direction) is ok


def test_in_bowl_success_and_wrong_target(geo, objs):
    goal = Goal("in_bowl", ("white_cup_a",))
    sc = scene(goal, ids=("white_cup_a", "white_cup_b", "red_block"))
    start = {"white_cup_a": (15, 5, 3), "white_cup_b": (25, 5, 3), "red_block": (15, -5, 1.5)}
    ok = evaluate(sc, trace(start, {**start, "white_cup_a": (*BOWL, 3)}, {"white_cup_a": 9}), geo, objs)
    assert ok.success and ok.failure_mode is None and ok.in_bowl_final == ("white_cup_a",)
    both = evaluate(sc, trace(start, {**start, "white_cup_a": (*BOWL, 3), "red_block": (21, -18, 2)}), geo, objs)
    assert not both.success and both.failure_mode == "wrong_target"   # nothing else newly in the bowl
    twin = evaluate(sc, trace(start, {**start, "white_cup_b": (*BOWL, 3)}, {"white_cup_b": 9}), geo, objs)
    assert not twin.success and twin.failure_mode == "wrong_instance"  # same category, Object State
    other = scene(goal, task="relative_size", ids=("white_cup_a", "white_cup_b", "red_block"))
    assert evaluate(other, trace(start, {**start, "white_cup_b": (*BOWL, 3)}), geo, objs).failure_mode == "wrong_target"


def test_already_in_bowl_objects_do_not_count_as_new(geo, objs):
    start = {"a": (*BOWL, 2), "b": (15, 5, 2)}
    sc = scene(Goal("in_bowl", ("b",)))
    assert evaluate(sc, trace(start, {"a": (*BOWL, 2), "b": (21, -20, 2)}, {"b": 8}), geo, objs).success


@pytest.mark.parametrize("final,lift,held,mode", [
    ((15, 5, 3), {}, (), "no_action"),                             # nothing moved, arm still
    ((15, 5, 3), {}, (), "timeout_or_incomplete"),                 # arm moved, target untouched
    ((19, 8, 3), {}, (), "grasp_failure"),                         # pushed, never lifted
    ((26, -4, 3), {"t": 10.0}, (), "premature_release_or_drop"),  # lifted, dropped off target
    ((20, -19, 11), {"t": 10.0}, ("t",), "timeout_or_incomplete"),  # still in the gripper
])
def test_in_bowl_failure_modes(geo, objs, final, lift, held, mode):
    start = {"t": (15, 5, 3), "o": (25, 10, 3)}
    states = STILL if mode == "no_action" else None
    ev = evaluate(scene(Goal("in_bowl", ("t",)), ids=("t", "o")),
                  trace(start, {**start, "t": final}, lift, held, states), geo, objs)
    assert not ev.success and ev.failure_mode == mode and mode in FAILURE_MODES


def test_relation_success_and_failures(geo, objs):
    goal = Goal("relation", ("pen",), reference="block", direction="left")
    sc = scene(goal, task="relational_placement", ids=("pen", "block"))
    start = {"pen": (25, -5, 0.6), "block": (20, 0, 1.5)}
    placed = evaluate(sc, trace(start, {**start, "pen": (20.5, 5.5, 0.6)}, {"pen": 9}), geo, objs)
    assert placed.success
    wrong_side = evaluate(sc, trace(start, {**start, "pen": (20, -5.5, 0.6)}, {"pen": 9}), geo, objs)
    assert wrong_side.failure_mode == "correct_target_incorrect_spatial_outcome"
    too_far = evaluate(sc, trace(start, {**start, "pen": (20, 8.5, 0.6)}, {"pen": 9}), geo, objs)
    assert too_far.failure_mode == "correct_target_incorrect_spatial_outcome"
    moved_ref = evaluate(sc, trace(start, {**start, "block": (28, 6, 1.5)}, {"block": 9}), geo, objs)
    assert moved_ref.failure_mode == "wrong_target"


def test_count_in_bowl(geo, objs):
    sc = scene(Goal("count_in_bowl", count=1), task="counting", ids=("a", "b", "c"))
    start = {"a": (*BOWL, 2), "b": (21, -17, 2), "c": (15, 8, 2)}
    removed = {**start, "b": (14, 1, 1.5)}
    assert evaluate(sc, trace(start, removed, {"b": 8}), geo, objs).success
    added = {**start, "c": (19, -21, 2)}
    ev = evaluate(sc, trace(start, added, {"c": 8}), geo, objs)
    assert not ev.success and ev.failure_mode == "wrong_target"     # 2 -> 3, asked for 1
    both = {**start, "a": (14, 1, 1.5), "b": (26, 3, 1.5)}
    assert evaluate(sc, trace(start, both, {"a": 8, "b": 8}), geo, objs).failure_mode == "wrong_target"
    assert evaluate(sc, trace(start, start, states=STILL), geo, objs).failure_mode == "no_action"


def test_no_motion(geo, objs):
    start = {"a": (15, 5, 2)}
    sc = scene(Goal("no_motion", ("a",)), ids=("a",))
    jitter = STILL + np.random.default_rng(0).uniform(-0.5, 0.5, STILL.shape)
    assert evaluate(sc, trace(start, start, states=jitter), geo, objs).success
    ev = evaluate(sc, trace(start, start, states=moving()), geo, objs)
    assert not ev.success and ev.failure_mode == "unnecessary_intervention" and ev.motion_onset == 20
    gripper_only = STILL.copy()
    gripper_only[30:, 5] = 30.0
    assert evaluate(sc, trace(start, start, states=gripper_only), geo, objs).failure_mode == "unnecessary_intervention"
    with pytest.raises(DataError, match="joint trajectory"):
        evaluate(sc, EpisodeTrace({"a": np.zeros(3)}, {"a": np.zeros(3)}), geo, objs)


def test_goal_naming_a_missing_object_is_a_clear_error(geo, objs):
    with pytest.raises(DataError, match="goal object 'ghost'"):
        evaluate(scene(Goal("in_bowl", ("ghost",)), ids=("a",)), trace({"a": (1, 1, 1)}, {"a": (1, 1, 1)}), geo, objs)


def test_twin_scores_hand_placed_poses(make_robot):
    """The robot's evaluate(): objects teleported to hand-picked poses, then scored."""
    robot = make_robot(cameras={})
    placed = (PlacedObject("green_pen", 25, -2, yaw_deg=90), PlacedObject("red_block", 20, 8),
              PlacedObject("white_cup_a", 15, 12, state=ObjectState("closed", "upright")))
    base = dict(scene_id="hand-001", task="relational_placement", condition="id",
                cell=Cell("left", "green_pen/red_block"), withheld=True, objects=placed,
                instructions=Instructions("Place the green pen to the left of the red block."))
    relation = SceneSpec(**base, goal=Goal("relation", ("green_pen",), reference="red_block", direction="left"))
    robot.load_scene(relation)
    assert robot.evaluate() == (False, "no_action")
    robot.world.set_object_pose("green_pen", (0.205, 0.135, 0.006))     # 5.5 cm left of the block
    robot.world.run(0.5)
    robot._track()
    assert robot.evaluate(relation)[0] is True
    bowl_goal = SceneSpec(**base, goal=Goal("in_bowl", ("white_cup_a",)))
    robot.world.set_object_pose("white_cup_a", (0.20, -0.19, 0.05))
    robot.world.run(0.7)
    robot._track()
    ok, mode = robot.evaluate(bowl_goal)
    assert ok and mode is None
    pos = robot.privileged_state()["objects"][2]
    assert pos["object_id"] == "white_cup_a" and pos["in_bowl"] is True
