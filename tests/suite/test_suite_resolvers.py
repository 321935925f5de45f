"""The resolvers and geometry on hand-built scenes: the task semantics the twin's evaluator shares."""

from __future__ import annotations

import pytest

from spabench.suite.geometry import footprint, footprint_gap, footprints_apart, relation_holds
from spabench.suite.model import Cell, Goal, Instructions, ObjectState, PlacedObject, SceneSpec
from spabench.suite.resolvers import direct_goal, resolve_targets, state_matches


def _scene(task, cell, objects, references=(), targets=()):
    return SceneSpec(scene_id="t", task=task, condition="id", cell=Cell(*cell.split("|")), withheld=False,
                     objects=tuple(objects), instructions=Instructions(spatial="x"), goal=Goal(kind="no_motion"),
                     targets=tuple(targets), references=tuple(references))


def _at(oid, x, y, yaw=0.0, **state):
    return PlacedObject(object_id=oid, x_cm=x, y_cm=y, yaw_deg=yaw, state=ObjectState(**state))


@pytest.mark.parametrize("direction,dx,dy,holds", [
    ("left", 0, 5, True), ("left", 0, -5, False), ("right", 0, -5, True), ("front", -5, 0, True),
    ("behind", 5, 0, True), ("behind", -5, 0, False), ("left", 0, 7.6, True), ("left", 0, 7.7, False),
    ("left", 4.9, 5, True), ("left", 5.1, 5, False),  # the +-45 degree sector edge
])
def test_relation_sector_and_radius(direction, dx, dy, holds):
    assert relation_holds((20 + dx, 0 + dy), (20, 0), direction) is holds


def test_lid_concepts_need_an_upright_object():
    assert state_matches(ObjectState(lid="closed", pose="upright"), "closed")
    assert not state_matches(ObjectState(lid="closed", pose="upside_down"), "closed")
    assert state_matches(ObjectState(lid="closed", pose="upside_down"), "upside_down")


def test_ordinal_counts_from_plus_y(suite):
    row = [_at("yellow_pen", 20, 10), _at("blue_tape_ball", 20, 0), _at("green_highlighter", 20, -8)]
    first = _scene("ordinal_position", "position_1_of_3|yellow_pen", row)
    third = _scene("ordinal_position", "position_3_of_3|highlighter", row)
    assert resolve_targets(first, suite) == {"yellow_pen"}
    assert resolve_targets(third, suite) == {"green_highlighter"}
    crowded = [_at("yellow_pen", 20, 10), _at("blue_tape_ball", 20, 7), _at("green_highlighter", 20, -8)]
    assert resolve_targets(_scene("ordinal_position", "position_1_of_3|yellow_pen", crowded), suite) == \
        {"yellow_pen", "blue_tape_ball"}
    assert resolve_targets(_scene("ordinal_position", "position_4_of_3|none", row), suite) == set()


def test_referential_distance_needs_a_margin(suite):
    ref = _at("yellow_pen", 20, 0, yaw=90)
    clear = [ref, _at("red_pencil_sharpener", 20, 6), _at("green_pencil_sharpener", 20, 12)]
    near_tie = [ref, _at("red_pencil_sharpener", 20, 6), _at("green_pencil_sharpener", 20, -8)]
    scene = _scene("referential_description", "closest|pencil_sharpener", clear, references=["yellow_pen"])
    assert resolve_targets(scene, suite) == {"red_pencil_sharpener"}
    far = _scene("referential_description", "furthest|pencil_sharpener", clear, references=["yellow_pen"])
    assert resolve_targets(far, suite) == {"green_pencil_sharpener"}
    tie = _scene("referential_description", "closest|pencil_sharpener", near_tie, references=["yellow_pen"])
    assert resolve_targets(tie, suite) == {"red_pencil_sharpener", "green_pencil_sharpener"}


def test_between(suite):
    objs = [_at("yellow_pen", 20, 10), _at("pink_marker", 20, -6), _at("red_pencil_sharpener", 20.5, 2),
            _at("green_pencil_sharpener", 28, 12)]
    scene = _scene("referential_description", "between|pencil_sharpener", objs,
                   references=["yellow_pen", "pink_marker"])
    assert resolve_targets(scene, suite) == {"red_pencil_sharpener"}


def test_relative_size_ties_resolve_to_every_tied_object(suite):
    objs = [_at("green_block", 20, 0), _at("red_block", 20, 10), _at("juggling_ball", 14, 5)]
    assert resolve_targets(_scene("relative_size", "smallest|green_block", objs), suite) == {"green_block", "red_block"}
    assert resolve_targets(_scene("relative_size", "largest|juggling_ball", objs), suite) == {"juggling_ball"}


def test_counting_resolves_to_the_movable_objects(suite):
    objs = [PlacedObject("red_block", 20, -19, location="bowl"), PlacedObject("blue_block", 20, -19, location="bowl"),
            _at("green_block", 20, 5)]
    assert resolve_targets(_scene("counting", "goal_1|removal", objs), suite) == {"red_block", "blue_block"}
    assert resolve_targets(_scene("counting", "goal_3|addition", objs), suite) == {"green_block"}
    assert resolve_targets(_scene("counting", "goal_2|already_holds", objs), suite) == set()


def test_direct_goal_is_the_named_target_in_the_bowl(suite):
    scene = next(s for s in suite.scenes_for("relational_placement", "ood") if s.matched_group)
    assert direct_goal(scene) == Goal(kind="in_bowl", objects=scene.targets)
    counting = next(s for s in suite.scenes_for("counting", "ood") if s.matched_group)
    assert direct_goal(counting) == counting.goal


def test_footprints_rectangles_and_discs(suite):
    pen = suite.objects["green_pen"]
    ball = suite.objects["juggling_ball"]
    along_x = footprint(pen, 20, 0, 0)
    along_y = footprint(pen, 20, 0, 90)
    ball_fp = footprint(ball, 20, 5)
    # a pen along x is thin across y: the ball 5 cm to its left clears it; turned along y it does not
    assert footprint_gap(along_x, ball_fp) == pytest.approx(5 - 0.6 - 3.25)
    assert footprint_gap(along_y, ball_fp) == 0.0
    assert footprints_apart(along_x, ball_fp, 1.0) and not footprints_apart(along_y, ball_fp, 1.0)


def test_an_upside_down_cup_with_the_named_lid_state_is_disputable(suite):
    objs = [_at("white_cup_a", 20, 10, lid="closed", pose="upright"),
            _at("white_cup_b", 20, 0, lid="closed", pose="upside_down")]
    assert resolve_targets(_scene("object_state", "closed|white_cup", objs), suite) == {"white_cup_a", "white_cup_b"}
    assert resolve_targets(_scene("object_state", "upside_down|white_cup", objs), suite) == {"white_cup_b"}
    assert resolve_targets(_scene("object_state", "open|white_cup", objs), suite) == set()
