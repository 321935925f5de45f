"""Typed records for the benchmark as data: objects, cells, scene specifications, bench geometry.

These are the contract between `suite` (loads and validates them), `plan` (turns scenes into
trials), `operator` (reset checklists) and `sim` (builds the twin's scene). Positions are in the
robot's workspace frame, centimetres: origin under the shoulder_pan axis on the table surface,
+x forward (away from the robot base), +y to the robot's left, +z up. Directions are the robot's:
left = +y, right = -y, front = -x (nearer the robot), behind = +x (further from the robot).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Lid = Literal["open", "closed"]
Pose = Literal["upright", "upside_down"]
Location = Literal["table", "bowl"]
GoalKind = Literal["in_bowl", "relation", "count_in_bowl", "no_motion"]


@dataclass(frozen=True)
class ObjectSpec:
    """One physical object instance of the inventory (tasks/objects.yaml)."""

    object_id: str                 # e.g. "white_cup_a", "red_block", "bowl"
    family: str                    # e.g. "cup", "block", "pen", "bowl"
    colour: str                    # e.g. "white", "yellow_white_striped"
    size_cm: tuple[float, float, float]  # approximate bounding box (length, width, height)
    display_name: str              # how instructions name it: "white cup", "crushed Coke can"
    category: str                  # same-category group for wrong-instance scoring, e.g. "cup"
    has_lid: bool = False          # cups/containers: can be open or closed
    can_invert: bool = False       # cups/containers: can be upright or upside-down
    size_rank: int | None = None   # training size ranks (1 = smallest) where the protocol gives one
    novel: bool = False            # the black cup: evaluation pilot only
    footprint_radius_cm: float = 0.0  # for overlap checks; derived from size_cm when 0


@dataclass(frozen=True)
class ObjectState:
    lid: Lid | None = None         # only for objects with has_lid
    pose: Pose | None = None       # only for objects with can_invert


@dataclass(frozen=True)
class PlacedObject:
    """An object as the operator must place it for a scene."""

    object_id: str
    x_cm: float
    y_cm: float
    yaw_deg: float = 0.0
    state: ObjectState = field(default_factory=ObjectState)
    location: Location = "table"   # "bowl": starts inside the bowl (counting scenes)


@dataclass(frozen=True)
class Cell:
    """One cell of a task's concept x argument matrix."""

    concept: str                   # e.g. "upside_down", "left", "furthest", "position_3_of_4", "goal_1_by_removal"
    argument: str                  # e.g. "white_cup", "green_pen/red_block", "airplane"

    @property
    def key(self) -> str:
        return f"{self.concept}|{self.argument}"


@dataclass(frozen=True)
class Goal:
    """What the success criterion checks at the end of the rollout.

    kind:
      in_bowl        - `objects` (exactly these, usually one) are in the bowl, nothing else moved in
      relation       - `objects[0]` ends within 7.62 cm of `reference` inside the `direction` sector
      count_in_bowl  - exactly `count` objects are in the bowl
      no_motion      - no arm or gripper motion (no-intervention / no-movement scenes)
    """

    kind: GoalKind
    objects: tuple[str, ...] = ()
    reference: str | None = None
    direction: str | None = None   # left | right | front | behind
    count: int | None = None


@dataclass(frozen=True)
class Instructions:
    spatial: str                   # the spatial instruction (id/ood/cross_task/no_intervention/...)
    direct: str | None = None      # names the target explicitly; only on matched OOD scenes
    paraphrase_spatial: str | None = None  # only on the paraphrase subset
    paraphrase_direct: str | None = None   # only on the paraphrase subset


@dataclass(frozen=True)
class SceneSpec:
    """A frozen scene specification: what the operator sets up, what the policy is told, what counts."""

    scene_id: str                  # stable id, e.g. "object_state-ood-007"
    task: str                      # one of vocabulary.TASKS
    condition: str                 # one of vocabulary.SCENE_CONDITIONS
    cell: Cell
    withheld: bool
    objects: tuple[PlacedObject, ...]
    instructions: Instructions
    goal: Goal
    targets: tuple[str, ...] = ()  # the valid target object(s) (empty for no-intervention)
    references: tuple[str, ...] = ()
    matched_group: str | None = None  # OOD scenes chosen for the direct control (and Object State's direct variants)
    paraphrase: bool = False          # matched scene also in the paraphrase subset
    notes: str = ""
    family: str | None = None         # scenes designed together: Relational four-instruction families,
                                      # cross-task target/counterfactual pairs
    partner: str | None = None        # movement_required: its no_movement scene; direct variant: its OOD scene


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in the workspace frame, centimetres: [low, high] per axis."""

    x_cm: tuple[float, float]
    y_cm: tuple[float, float]
    z_cm: tuple[float, float]

    def bounds_m(self) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """((x, y, z) low corner, (x, y, z) high corner) in metres, the arm model's unit."""
        return (tuple(v[0] / 100.0 for v in (self.x_cm, self.y_cm, self.z_cm)),  # type: ignore[return-value]
                tuple(v[1] / 100.0 for v in (self.x_cm, self.y_cm, self.z_cm)))


# The reference bench's Cartesian envelope (hardware/bench.yaml `arm_envelope:` documents each field):
# the table's footprint (x -8..72, y -30..30) widened a little, up to 60 cm above the table top.
DEFAULT_ARM_BOX = Box(x_cm=(-10.0, 60.0), y_cm=(-35.0, 35.0), z_cm=(0.0, 60.0))


@dataclass(frozen=True)
class ArmEnvelope:
    """Where the arm may go (hardware/bench.yaml `arm_envelope:`; checked by bench/safety.py on
    every arm target): every link's collision geometry at least table_margin_cm above the table top
    (table_z_cm), inside `box`, and at least keep_out_margin_cm clear of every `keep_out` box (camera
    mounts and the like)."""

    table_z_cm: float = 0.0
    table_margin_cm: float = 0.5
    box: Box = DEFAULT_ARM_BOX
    keep_out: dict[str, Box] = field(default_factory=dict)
    keep_out_margin_cm: float = 1.0


@dataclass(frozen=True)
class BenchGeometry:
    """Fixed bench facts (hardware/bench.yaml): table, workspace, bowl, camera mounts."""

    table_size_cm: tuple[float, float]
    workspace_x_cm: tuple[float, float]
    workspace_y_cm: tuple[float, float]
    bowl_xy_cm: tuple[float, float]
    bowl_inner_radius_cm: float
    bowl_outer_radius_cm: float
    bowl_height_cm: float
    cameras: dict[str, dict]       # name -> {"pos_cm": [x,y,z], "look_at_cm": [x,y,z], "fovy_deg": f, "mount": "fixed"|"gripper"}
    arm_envelope: ArmEnvelope = field(default_factory=ArmEnvelope)
