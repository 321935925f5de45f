"""Seeded generator of the frozen scene specifications (tasks/<task>/scenes/*.yaml) and the manifest.

Deterministic: one `random.Random` per (seed, task, condition), positions on a 0.5 cm grid and yaw in
15 degree steps, so the same seed writes byte-identical files. The generated suite is checked against
every design contract before anything is written; a failure is a DataError, and no file changes.

Layout rules used here are stricter than the contracts (wider gaps, clearer margins) so that small
hand edits of a generated scene do not immediately break a contract.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from spabench.errors import DataError
from spabench.suite import resolvers as R
from spabench.suite.contracts import GOAL_REGION_OFFSET_CM, expected_scene_counts, validate_suite
from spabench.suite.geometry import (
    DIRECTION_VECTORS,
    Footprint,
    between_excess,
    distance,
    edge_gap_cm,
    footprint,
    footprints_apart,
    half_width_cm,
    point_footprint_distance,
    relation_offset,
    y_interval,
)
from spabench.suite.loader import load_geometry, load_objects, load_task, resolve_path
from spabench.suite.model import (
    BenchGeometry,
    Cell,
    Goal,
    Instructions,
    Lid,
    ObjectSpec,
    ObjectState,
    PlacedObject,
    Pose,
    SceneSpec,
)
from spabench.suite.scene_io import dump_scene_file
from spabench.suite.spec import Suite, SuiteManifest, TaskSpec
from spabench.suite.success import DEFAULT_RELATION_RULE, RelationRule
from spabench.suite.vocabulary import RELATION_HALF_ANGLE_DEG, RELATION_RADIUS_CM, TASKS
from spabench.suite.wording import renderings
from spabench.suite.yamlio import dump_yaml, write_text_atomic

DEFAULT_SEED = 20261130
SUITE_NAME = "spa-bench"
SUITE_VERSION = "1.0"

GRID_CM = 0.5
YAW_STEP_DEG = 15
GEN_GAP_CM = 1.5            # contracts: 1.0
GEN_BOWL_CLEAR_CM = 2.0     # contracts: 1.0
GEN_SPOT_CLEAR_CM = 3.5     # contracts: 2.5
GEN_DISTANCE_MARGIN_CM = R.DISTANCE_MARGIN_CM + 1.0
GEN_ORDINAL_GAP_CM = (2.5, 4.5)
MAX_TRIES = 400
# Relational Placement: a no-movement target meets the suite's rule, any other start misses it,
# each by these margins (the contracts ask for 1 cm / 10 deg)
HOLD_MARGIN_CM, HOLD_MARGIN_DEG = 1.5, 15.0
APART_MARGIN_CM, APART_MARGIN_DEG = 2.0, 15.0
NO_MOVEMENT_DISTANCE_CM = (4.5, 6.5)   # paper bound: centre distances a no-movement target is drawn from


class _Retry(Exception):
    """This attempt at a scene failed; draw again."""


def _count_of(concept: str) -> int:
    """The count a counting concept asks for ('goal_3' -> 3): the suite's cells are all such."""
    goal = R.goal_count(concept)
    if goal is None:
        raise ValueError(f"{concept!r} is not a counting concept")
    return goal


def _position_of(concept: str) -> tuple[int, int]:
    """(k, n) of an ordinal concept ('position_2_of_4'): the suite's cells are all such."""
    kn = R.ordinal_position(concept)
    if kn is None:
        raise ValueError(f"{concept!r} is not an ordinal-position concept")
    return kn


def _grid(v: float) -> float:
    return round(v / GRID_CM) * GRID_CM


class Layout:
    """Places objects one by one on the table: inside the workspace, clear of each other and the bowl."""

    def __init__(self, rng: random.Random, objects: dict[str, ObjectSpec], geometry: BenchGeometry) -> None:
        self.rng, self.objects, self.geometry = rng, objects, geometry
        self.placed: list[PlacedObject] = []
        self.prints: dict[str, Footprint] = {}

    def copy(self) -> Layout:
        other = Layout(self.rng, self.objects, self.geometry)
        other.placed, other.prints = list(self.placed), dict(self.prints)
        return other

    def is_round(self, oid: str) -> bool:
        return self.objects[oid].footprint_radius_cm > 0

    def random_yaw(self, oid: str) -> float:
        return 0.0 if self.is_round(oid) else float(self.rng.randrange(0, 180, YAW_STEP_DEG))

    def in_workspace(self, x: float, y: float) -> bool:
        (x_lo, x_hi), (y_lo, y_hi) = self.geometry.workspace_x_cm, self.geometry.workspace_y_cm
        return x_lo <= x <= x_hi and y_lo <= y <= y_hi

    def fits(self, oid: str, x: float, y: float, yaw: float, *, ignore: Sequence[str] = ()) -> Footprint | None:
        if not self.in_workspace(x, y):
            return None
        poly = footprint(self.objects[oid], x, y, yaw)
        g = self.geometry
        if point_footprint_distance(g.bowl_xy_cm, poly) - g.bowl_outer_radius_cm < GEN_BOWL_CLEAR_CM:
            return None
        for other, other_poly in self.prints.items():
            if other not in ignore and not footprints_apart(poly, other_poly, GEN_GAP_CM):
                return None
        return poly

    def add(self, oid: str, x: float, y: float, yaw: float, state: ObjectState, poly: Footprint) -> PlacedObject:
        placed = PlacedObject(object_id=oid, x_cm=x, y_cm=y, yaw_deg=yaw, state=state)
        self.placed.append(placed)
        self.prints[oid] = poly
        return placed

    def place(self, oid: str, state: ObjectState, accept: Callable[[float, float, Footprint], bool] | None = None,
              tries: int = 200, where: Callable[[float, float], bool] | None = None) -> PlacedObject:
        """Draw poses until one fits; `where` (cheap, position only) and `accept` (footprint) add conditions."""
        (x_lo, x_hi), (y_lo, y_hi) = self.geometry.workspace_x_cm, self.geometry.workspace_y_cm
        for _ in range(tries):
            x, y = _grid(self.rng.uniform(x_lo, x_hi)), _grid(self.rng.uniform(y_lo, y_hi))
            yaw = self.random_yaw(oid)
            if where is not None and not where(x, y):
                continue
            poly = self.fits(oid, x, y, yaw)
            if poly is not None and (accept is None or accept(x, y, poly)):
                return self.add(oid, x, y, yaw, state, poly)
        raise _Retry(f"no room for {oid}")

    def place_at(self, oid: str, x: float, y: float, yaw: float, state: ObjectState) -> PlacedObject:
        x, y = _grid(x), _grid(y)
        poly = self.fits(oid, x, y, yaw)
        if poly is None:
            raise _Retry(f"{oid} does not fit at ({x}, {y})")
        return self.add(oid, x, y, yaw, state, poly)


def bowl_slots(n: int, geometry: BenchGeometry) -> list[tuple[float, float]]:
    """Where n objects sit inside the bowl (documentation for the operator; the twin packs its own)."""
    bx, by = geometry.bowl_xy_cm
    if n == 1:
        return [(bx, by)]
    radius = min(3.0, geometry.bowl_inner_radius_cm / 2)
    return [(_grid(bx + radius * math.cos(math.pi / 2 + 2 * math.pi * i / n)),
             _grid(by + radius * math.sin(math.pi / 2 + 2 * math.pi * i / n))) for i in range(n)]


# -- scene assembly ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Draft:
    """A scene before ids and instructions: what the task builders return."""

    cell: Cell
    objects: list[PlacedObject]
    targets: tuple[str, ...]
    goal: Goal
    references: tuple[str, ...] = ()
    notes: str = ""
    family: str | None = None


class TaskGenerator:
    """Shared machinery; one subclass per task builds Drafts for its conditions."""

    conditions: tuple[str, ...] = ()

    def __init__(self, task: TaskSpec, objects: dict[str, ObjectSpec], geometry: BenchGeometry,
                 relation_rule: RelationRule | None = None) -> None:
        self.task, self.objects, self.geometry = task, objects, geometry
        self.relation_rule = relation_rule or DEFAULT_RELATION_RULE

    # helpers
    def layout(self, rng: random.Random) -> Layout:
        return Layout(rng, self.objects, self.geometry)

    def state_for(self, oid: str, rng: random.Random, *, pose: Pose | None = None, lid: Lid | None = None) -> ObjectState:
        spec = self.objects[oid]
        if spec.can_invert and pose is None:
            pose = "upright"
        if spec.has_lid and lid is None:
            lid = "closed"
        return ObjectState(lid=lid if spec.has_lid else None, pose=pose if spec.can_invert else None)

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        raise NotImplementedError

    def build(self, rng: random.Random, cell: Cell, condition: str,
              maker: Callable[[], Draft] | None = None) -> Draft:
        last = ""
        for _ in range(MAX_TRIES):
            try:
                return maker() if maker is not None else self.draft(rng, cell, condition)
            except _Retry as exc:
                last = str(exc)
        raise DataError(f"tasks/{self.task.name}/matrix.yaml",
                        f"cannot lay out a {condition} scene for cell {cell.key} within the workspace ({last})",
                        field=cell.key)

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "ood":
            return self.task.withheld_cells
        return self.task.observed

    def planned(self, rng_for: Callable[[str], random.Random], counts: dict[str, int]):
        """(condition, scene count, its own seeded rng) for each condition with scenes to generate."""
        for condition in self.conditions:
            if counts.get(condition, 0):
                yield condition, counts[condition], rng_for(condition)

    def generate(self, rng_for: Callable[[str], random.Random], counts: dict[str, int]) -> dict[str, list[SceneSpec]]:
        out: dict[str, list[SceneSpec]] = {}
        for condition, n, rng in self.planned(rng_for, counts):
            if condition == "cross_task":
                drafts = self.cross_task_pairs(rng, n)
            else:
                cells = list(self.cells_for(condition))
                if condition != "ood":
                    rng.shuffle(cells)
                drafts = [self.build(rng, cells[i % len(cells)], condition) for i in range(n)]
            out[condition] = self.finish(drafts, condition, rng, counts)
        return out

    # cross-task: pairs of a scene where the transferred object is the target and a counterfactual
    # partner where the same object is present in another role (reference or distractor)
    def cross_task_cells(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.task.controls
                     if set(self.task.arguments[c.argument].objects) & set(self.task.cross_task_objects))

    def counterfactual(self, rng: random.Random, like: Cell, transferred: str) -> Draft:
        raise NotImplementedError

    def transferred_in(self, draft: Draft) -> str:
        return next(t for t in draft.targets if t in self.task.cross_task_objects)

    def cross_task_pairs(self, rng: random.Random, n: int) -> list[Draft]:
        cells = list(self.cross_task_cells())
        rng.shuffle(cells)
        drafts: list[Draft] = []
        for i in range((n + 1) // 2):
            cell = cells[i % len(cells)]
            family = f"{self.task.name}-cross_task-p{i + 1:02d}"
            first = self.build(rng, cell, "cross_task")
            transferred = self.transferred_in(first)
            second = self.build(rng, cell, "cross_task",
                                maker=functools.partial(self.counterfactual, rng, cell, transferred))
            first.family = second.family = family
            drafts += [first, second]
        return drafts[:n]

    def finish(self, drafts: list[Draft], condition: str, rng: random.Random,
               counts: dict[str, int]) -> list[SceneSpec]:
        matched: dict[int, str] = {}
        paraphrase: set[int] = set()
        if condition == "ood":
            picked = _spread(drafts, counts.get("matched", 0), rng, range(len(drafts)))
            matched = {i: f"{self.task.name}-m{k + 1:02d}" for k, i in enumerate(sorted(picked))}
            paraphrase = set(_spread(drafts, counts.get("paraphrase", 0), rng, sorted(picked)))
        scenes = []
        for i, d in enumerate(drafts):
            scene = SceneSpec(
                scene_id=f"{self.task.name}-{condition}-{i + 1:03d}",
                task=self.task.name,
                condition=condition,
                cell=d.cell,
                withheld=d.cell.key in self.task.withheld,
                objects=tuple(d.objects),
                instructions=Instructions(spatial=""),
                goal=d.goal,
                targets=d.targets,
                references=d.references,
                matched_group=matched.get(i),
                paraphrase=i in paraphrase,
                notes=d.notes,
                family=d.family,
            )
            scenes.append(dataclasses.replace(scene, instructions=self.instructions(scene, rng)))
        return scenes

    def instructions(self, scene: SceneSpec, rng: random.Random) -> Instructions:
        def pick(kind: str) -> str:
            return rng.choice(renderings(self.task, kind, scene, self.objects))

        spatial = pick("spatial")
        if not scene.matched_group:
            return Instructions(spatial=spatial)
        direct = pick("direct")
        if not scene.paraphrase:
            return Instructions(spatial=spatial, direct=direct)
        return Instructions(spatial=spatial, direct=direct, paraphrase_spatial=pick("paraphrase_spatial"),
                            paraphrase_direct=pick("paraphrase_direct"))


def _spread(drafts: list[Draft], n: int, rng: random.Random, among: Sequence[int]) -> list[int]:
    """n indices from `among`, spread over cells round-robin (seeded choice within a cell)."""
    queues: dict[str, list[int]] = {}
    for i in among:
        queues.setdefault(drafts[i].cell.key, []).append(i)
    for q in queues.values():
        rng.shuffle(q)
    picked: list[int] = []
    while len(picked) < n and any(queues.values()):
        for key in list(queues):
            if queues[key] and len(picked) < n:
                picked.append(queues[key].pop())
    return picked


# -- Object State -----------------------------------------------------------------------------------


def _flipped(state: ObjectState, concept: str) -> ObjectState:
    """The same state with the queried axis turned over (the non-queried axis kept)."""
    if concept in R.LID_CONCEPTS:
        return ObjectState(lid="closed" if state.lid == "open" else "open", pose=state.pose)
    return ObjectState(lid=state.lid, pose="upright" if state.pose == "upside_down" else "upside_down")


class ObjectStateGenerator(TaskGenerator):
    """ID/OOD scenes hold both A/B twins of the named kind, differing only on the queried axis; matched
    OOD scenes get a declared direct variant (the non-target twin removed, category-only wording)."""

    conditions = ("id", "ood", "novel_object", "no_intervention")

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "novel_object":
            return self.task.controls
        return super().cells_for(condition)

    def _state(self, oid: str, concept: str, rng: random.Random, *, match: bool | None) -> ObjectState:
        """A state that does (match=True), does not (False) or may (None) show the concept."""
        for _ in range(50):
            pose: Pose = "upright" if rng.random() < 0.6 else "upside_down"
            state = ObjectState(lid=rng.choice(("open", "closed")), pose=pose)
            if match is True and concept in R.LID_CONCEPTS:
                state = ObjectState(lid=state.lid, pose="upright")  # a lid state shows on an upright cup
            if match is False and concept in R.LID_CONCEPTS and state.lid == concept:
                continue  # an upside-down cup with the named lid state would invite a dispute
            if match is None or R.state_matches(state, concept) == match:
                return state
        raise _Retry("no state")

    def _kinds(self, exclude: Sequence[str]) -> list[str]:
        return [o for k, a in self.task.arguments.items() if a.objects
                and not any(self.objects[m].novel for m in a.objects) and not set(a.objects) & set(exclude)
                for o in a.objects]

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        concept, members = cell.concept, list(self.task.arguments[cell.argument].objects)
        others = self._kinds(members)
        lay = self.layout(rng)
        targets: tuple[str, ...] = ()
        if condition == "no_intervention":
            present = rng.sample(members, rng.randint(1, len(members)))
            for oid in present:
                lay.place(oid, self._state(oid, concept, rng, match=False))
            n_distractors = rng.randint(2, 4 - len(present) + 1)
        elif condition == "novel_object":
            # one black cup exists: the nearest two-candidate scene pairs it with a familiar cup in the
            # opposite state on the queried axis (the other axis equal)
            (target,) = members
            state = self._state(target, concept, rng, match=True)
            lay.place(target, state)
            cups = [o for o in others if self.objects[o].family == "cup"]
            lay.place(rng.choice(cups), _flipped(state, concept))
            targets, n_distractors = (target,), rng.randint(0, 2)
        else:
            target = rng.choice(members)
            twin = next(m for m in members if m != target)
            state = self._state(target, concept, rng, match=True)
            lay.place(target, state)
            lay.place(twin, _flipped(state, concept))
            targets, n_distractors = (target,), rng.randint(0, 3)
        placed_kinds = {self.objects[p.object_id].display_name for p in lay.placed}
        pool = [o for o in others if condition != "novel_object"
                or self.objects[o].display_name not in placed_kinds]
        pool = [o for o in pool if o not in {p.object_id for p in lay.placed}]
        for oid in rng.sample(pool, min(n_distractors, len(pool), 5 - len(lay.placed))):
            lay.place(oid, self._state(oid, concept, rng, match=None))
        rng.shuffle(lay.placed)
        goal = Goal(kind="no_motion") if condition == "no_intervention" else Goal(kind="in_bowl", objects=targets)
        return Draft(cell=cell, objects=lay.placed, targets=targets, goal=goal)

    def generate(self, rng_for, counts):
        out = super().generate(rng_for, counts)
        if "ood" in out and counts.get("direct"):
            out["direct"] = [self._direct_variant(scene, k + 1)
                             for k, scene in enumerate(s for s in out["ood"] if s.matched_group)]
        return out

    def instructions(self, scene: SceneSpec, rng: random.Random) -> Instructions:
        """OOD scenes keep the spatial wording; the direct wording lives on the direct variant."""
        full = super().instructions(scene, rng)
        return Instructions(spatial=full.spatial, paraphrase_spatial=full.paraphrase_spatial)

    def _direct_variant(self, ood: SceneSpec, number: int) -> SceneSpec:
        """The OOD scene with the non-target twin removed, as a declared scene of its own."""
        members = set(self.task.arguments[ood.cell.argument].objects)
        kept = tuple(p for p in ood.objects if p.object_id not in members - set(ood.targets))
        scene = dataclasses.replace(ood, scene_id=f"{self.task.name}-direct-{number:03d}", condition="direct",
                                    objects=kept, partner=ood.scene_id,
                                    notes=f"direct control of {ood.scene_id}: the same scene with the "
                                          f"non-target twin removed")
        rng = random.Random(f"direct/{ood.scene_id}")

        def pick(kind: str) -> str:
            return rng.choice(renderings(self.task, kind, scene, self.objects))

        return dataclasses.replace(scene, instructions=Instructions(
            spatial=ood.instructions.spatial, direct=pick("direct"),
            paraphrase_direct=pick("paraphrase_direct") if ood.paraphrase else None))


# -- Relative Size ----------------------------------------------------------------------------------


class RelativeSizeGenerator(TaskGenerator):
    conditions = ("id", "ood", "cross_task")

    def draft(self, rng: random.Random, cell: Cell, condition: str, *, force: str | None = None) -> Draft:
        target = self.task.arguments[cell.argument].objects[0]
        pool = list(self.task.pool)
        if condition == "cross_task" and target not in pool:
            pool.append(target)
        if force is not None:
            pool.append(force)
        volume = {o: R.size_metric(self.objects[o]) for o in (*pool, target)}
        m = R.SIZE_RATIO_MARGIN
        if cell.concept == "smallest":
            eligible = [o for o in pool if o != target and volume[o] >= volume[target] * m]
        else:
            eligible = [o for o in pool if o != target and volume[o] * m <= volume[target]]
        if force is not None and force not in eligible:
            raise _Retry(f"{force} cannot sit beside {target} as a distractor")
        other_end = "largest" if cell.concept == "smallest" else "smallest"
        chosen: list[str] | None = None
        for n in range(min(rng.randint(3, 5), len(eligible) + 1), 1, -1):
            for _ in range(30):
                rest = [o for o in eligible if o != force]
                k = n - 1 - (force is not None)
                if k < 0 or k > len(rest):
                    continue
                sample = rng.sample(rest, k) + ([force] if force else [])
                if len(R.extreme({o: volume[o] for o in sample}, largest=other_end == "largest", ratio=m)) == 1:
                    chosen = sample
                    break
            if chosen:
                break
        if not chosen:
            raise _Retry(f"no object set where {target} is the unique {cell.concept}")
        lay = self.layout(rng)
        for oid in [target, *chosen]:
            lay.place(oid, self.state_for(oid, rng))
        rng.shuffle(lay.placed)
        return Draft(cell=cell, objects=lay.placed, targets=(target,), goal=Goal(kind="in_bowl", objects=(target,)))

    def counterfactual(self, rng: random.Random, like: Cell, transferred: str) -> Draft:
        cells = [c for c in self.task.observed]
        return self.draft(rng, rng.choice(cells), "cross_task", force=transferred)


# -- Relational Placement ---------------------------------------------------------------------------


OPPOSITE = {"left": "right", "right": "left", "front": "behind", "behind": "front"}


class RelationalPlacementGenerator(TaskGenerator):
    """Scenes in four-instruction families over one pair: A dir B, A opposite B, B dir A, B opposite A."""

    conditions = ("id", "ood", "cross_task", "no_movement")

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "cross_task":
            return self.task.controls
        return super().cells_for(condition)

    def families(self, condition: str) -> list[list[Cell]]:
        """The condition's cells grouped into four-instruction families (pair x direction axis)."""
        groups: dict[tuple, list[Cell]] = {}
        for cell in self.cells_for(condition):
            pair = tuple(sorted(cell.argument.split("/")))
            axis = tuple(sorted((cell.concept, OPPOSITE[cell.concept])))
            groups.setdefault((pair, axis), []).append(cell)
        return [cells for cells in groups.values() if len(cells) == 4]

    def generate(self, rng_for, counts):
        out: dict[str, list[SceneSpec]] = {}
        for condition, n, rng in self.planned(rng_for, counts):
            families = self.families(condition)
            if condition != "ood":
                rng.shuffle(families)
            drafts: list[Draft] = []
            for j in range((n + 3) // 4):
                cells = list(families[j % len(families)])
                rng.shuffle(cells)
                for cell in cells[: n - len(drafts)]:
                    d = self.build(rng, cell, condition)
                    d.family = f"{self.task.name}-{condition}-f{j + 1:02d}"
                    drafts.append(d)
            out[condition] = self.finish(drafts, condition, rng, counts)
        if "no_movement" in out and counts.get("movement_required"):
            rng = rng_for("movement_required")
            scenes = []
            for nm in out["no_movement"][: counts["movement_required"]]:
                draft = self._build_movement_required(rng, nm)
                scene = dataclasses.replace(
                    nm, scene_id=nm.scene_id.replace("-no_movement-", "-movement_required-"),
                    condition="movement_required", objects=tuple(draft.objects), goal=draft.goal,
                    partner=nm.scene_id, family=(nm.family or "").replace("-no_movement-", "-movement_required-"),
                    notes=f"matched to {nm.scene_id}: same objects and instruction, the target in the "
                          f"opposite sector, outside the success gap")
                scenes.append(dataclasses.replace(scene, instructions=self.instructions(scene, rng)))
            out["movement_required"] = scenes
        return out

    def _pair(self, cell: Cell) -> tuple[str, str, str]:
        arg = self.task.arguments[cell.argument]
        return arg.objects[0], arg.references[0], cell.concept

    def _spot(self, ref: PlacedObject, direction: str) -> tuple[float, float]:
        ux, uy = DIRECTION_VECTORS[direction]
        return ref.x_cm + GOAL_REGION_OFFSET_CM * ux, ref.y_cm + GOAL_REGION_OFFSET_CM * uy

    def _spot_ok(self, lay: Layout, spot, ignore: Sequence[str]) -> bool:
        g = self.geometry
        if not lay.in_workspace(*spot):
            return False
        if distance(spot, g.bowl_xy_cm) - g.bowl_outer_radius_cm < GEN_SPOT_CLEAR_CM:
            return False
        return all(point_footprint_distance(spot, poly) >= GEN_SPOT_CLEAR_CM
                   for oid, poly in lay.prints.items() if oid not in ignore)

    def _gap(self, t_xy, r_xy, target: str, reference: str) -> float:
        return edge_gap_cm(t_xy, r_xy, self.objects[target], self.objects[reference])

    @staticmethod
    def _opposite_sector(t_xy, r_xy, direction) -> bool:
        """Movement-required start: inside the opposite sector, outside the success distance."""
        dist, angle = relation_offset(t_xy, r_xy, OPPOSITE[direction])
        return RELATION_RADIUS_CM + 2.0 <= dist <= 20.0 and angle <= RELATION_HALF_ANGLE_DEG - 10.0

    def _clearly_apart(self, t_xy, r_xy, direction, target: str, reference: str) -> bool:
        """Start of a scene that needs movement: the suite's rule fails by 2 cm / 15 deg at least."""
        dist, angle = relation_offset(t_xy, r_xy, direction)
        return self.relation_rule.clearly_fails(dist, angle, self._gap(t_xy, r_xy, target, reference),
                                                APART_MARGIN_CM, APART_MARGIN_DEG)

    def _no_movement_distances(self, target: str, reference: str) -> tuple[float, float]:
        """Centre distances a no-movement target is drawn from: the paper's bound samples 4.5-6.5 cm;
        the sheet's bound, the edge-gap range inside its margins plus both half-widths."""
        rule = self.relation_rule
        if rule.bound == "paper":
            return NO_MOVEMENT_DISTANCE_CM
        widths = half_width_cm(self.objects[target]) + half_width_cm(self.objects[reference])
        return (rule.min_edge_gap_cm + HOLD_MARGIN_CM + widths, rule.max_edge_gap_cm - HOLD_MARGIN_CM + widths)

    def _goal(self, cell: Cell, condition: str) -> Goal:
        target, reference, direction = self._pair(cell)
        return Goal(kind="no_motion" if condition == "no_movement" else "relation", objects=(target,), reference=reference, direction=direction)

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        target, reference, direction = self._pair(cell)
        lay = self.layout(rng)
        def room_opposite(x: float, y: float) -> bool:
            # no-movement scenes need room in the opposite sector for their movement-required partner
            ux, uy = DIRECTION_VECTORS[direction]
            return condition != "no_movement" or lay.in_workspace(x - 12.0 * ux, y - 12.0 * uy)

        ref = lay.place(reference, self.state_for(reference, rng), where=room_opposite,
                        accept=lambda x, y, poly: self._spot_ok(lay, self._spot(
                            PlacedObject(reference, x, y), direction), ignore=()))
        if condition == "no_movement":
            low, high = self._no_movement_distances(target, reference)
            for _ in range(100):
                d = rng.uniform(low, high)
                phi = math.radians(rng.uniform(-25.0, 25.0))
                ux, uy = DIRECTION_VECTORS[direction]
                vx, vy = ux * math.cos(phi) - uy * math.sin(phi), ux * math.sin(phi) + uy * math.cos(phi)
                x, y, yaw = _grid(ref.x_cm + d * vx), _grid(ref.y_cm + d * vy), lay.random_yaw(target)
                dist, angle = relation_offset((x, y), (ref.x_cm, ref.y_cm), direction)
                gap = self._gap((x, y), (ref.x_cm, ref.y_cm), target, reference)
                if not self.relation_rule.clearly_holds(dist, angle, gap, HOLD_MARGIN_CM, HOLD_MARGIN_DEG):
                    continue
                poly = lay.fits(target, x, y, yaw)
                if poly is not None:
                    lay.add(target, x, y, yaw, self.state_for(target, rng), poly)
                    break
            else:
                raise _Retry("no room next to the reference")
        else:
            spot = self._spot(ref, direction)
            lay.place(target, self.state_for(target, rng),
                      where=lambda x, y: self._clearly_apart((x, y), (ref.x_cm, ref.y_cm), direction, target,
                                                             reference),
                      accept=lambda x, y, poly: point_footprint_distance(spot, poly) >= GEN_SPOT_CLEAR_CM)
        pool = [o for o in self.task.pool if o not in (target, reference)]
        if condition == "cross_task":
            pool += [o for o in self.task.cross_task_objects if o not in (target, reference)]
        k = rng.randint(0, 2)
        spot = self._spot(ref, direction)
        for oid in rng.sample(pool, k):
            lay.place(oid, self.state_for(oid, rng),
                      accept=lambda x, y, poly: point_footprint_distance(spot, poly) >= GEN_SPOT_CLEAR_CM)
        rng.shuffle(lay.placed)
        return Draft(cell=cell, objects=lay.placed, targets=(target,), goal=self._goal(cell, condition),
                     references=(reference,))

    def _build_movement_required(self, rng: random.Random, nm: SceneSpec) -> Draft:
        target, reference, direction = self._pair(nm.cell)
        for _ in range(MAX_TRIES):
            lay = self.layout(rng)
            for p in nm.objects:
                if p.object_id != target:
                    lay.add(p.object_id, p.x_cm, p.y_cm, p.yaw_deg, p.state,
                            footprint(self.objects[p.object_id], p.x_cm, p.y_cm, p.yaw_deg))
            ref = next(p for p in nm.objects if p.object_id == reference)
            spot = self._spot(ref, direction)
            if not self._spot_ok(lay, spot, ignore=(reference,)):
                break
            old = next(p for p in nm.objects if p.object_id == target)
            ref_xy = (ref.x_cm, ref.y_cm)
            try:
                # lay.place calls both only within this iteration, so the loop's ref_xy and spot are current
                lay.place(target, old.state, tries=600,
                          where=lambda x, y: self._opposite_sector((x, y), ref_xy, direction),  # noqa: B023
                          accept=lambda x, y, poly: point_footprint_distance(spot, poly) >= GEN_SPOT_CLEAR_CM)  # noqa: B023
            except _Retry:
                continue
            order = {p.object_id: i for i, p in enumerate(nm.objects)}
            lay.placed.sort(key=lambda p: order[p.object_id])
            return Draft(cell=nm.cell, objects=lay.placed, targets=(target,),
                         goal=self._goal(nm.cell, "movement_required"), references=(reference,))
        raise DataError(f"tasks/{self.task.name}/matrix.yaml",
                        f"cannot move the target of {nm.scene_id} out of its relation", field=nm.cell.key)


# -- Referential Description ------------------------------------------------------------------------


class ReferentialDescriptionGenerator(TaskGenerator):
    conditions = ("id", "ood", "cross_task", "no_intervention")

    def _families(self) -> dict[str, tuple[str, ...]]:
        """Candidate families of the task's own pool (the cross-task block family excluded)."""
        return {k: a.objects for k, a in self.task.arguments.items()
                if a.objects and set(a.objects) <= set(self.task.pool)}

    def counterfactual(self, rng: random.Random, like: Cell, transferred: str) -> Draft:
        """The transferred object as the reference of an observed closest/furthest cell."""
        cells = [c for c in self.task.observed if c.concept != "between"]
        return self.draft(rng, rng.choice(cells), "cross_task", reference=transferred)

    def draft(self, rng: random.Random, cell: Cell, condition: str, *, reference: str | None = None) -> Draft:
        members = list(self.task.arguments[cell.argument].objects)
        between = cell.concept == "between"
        refs = [reference] if reference else rng.sample(list(self.task.references), 2 if between else 1)
        lay = self.layout(rng)
        self._place_references(lay, rng, refs, between)
        targets: tuple[str, ...] = ()
        if condition == "no_intervention":
            pass
        elif between:
            targets = (self._place_between(lay, rng, members, refs),)
        else:
            targets = (self._place_by_distance(lay, rng, members, refs[0], cell.concept),)
        # distractors of other families (never the cell's family, never sharing a reference's name)
        pool = [o for fam, objs in self._families().items() if fam != cell.argument for o in objs]
        k = rng.randint(2, 3) if condition == "no_intervention" else rng.randint(0, 1)
        k = min(k, 5 - len(lay.placed))
        for oid in rng.sample(pool, k):
            lay.place(oid, self.state_for(oid, rng))
        resolved = R.resolve_targets(self._probe(cell, lay, refs), _ProbeSuite(self))
        if resolved != set(targets):
            raise _Retry(f"resolved {resolved} instead of {targets}")
        rng.shuffle(lay.placed)
        goal = Goal(kind="no_motion") if condition == "no_intervention" else Goal(kind="in_bowl", objects=targets)
        return Draft(cell=cell, objects=lay.placed, targets=targets, goal=goal, references=tuple(refs))

    def _probe(self, cell: Cell, lay: Layout, refs) -> SceneSpec:
        return SceneSpec(scene_id="probe", task=self.task.name, condition="id", cell=cell, withheld=False,
                         objects=tuple(lay.placed), instructions=Instructions(spatial=""),
                         goal=Goal(kind="no_motion"), references=tuple(refs))

    def _place_references(self, lay: Layout, rng: random.Random, refs: list[str], between: bool) -> None:
        if not between:
            lay.place(refs[0], self.state_for(refs[0], rng))
            return
        for _ in range(100):
            x1, y1 = _grid(rng.uniform(*self.geometry.workspace_x_cm)), _grid(rng.uniform(*self.geometry.workspace_y_cm))
            sep = rng.uniform(14.0, 20.0)
            theta = math.radians(rng.uniform(-90 - 30, -90 + 30))  # mostly across y, the long side
            x2, y2 = _grid(x1 + sep * math.cos(theta)), _grid(y1 + sep * math.sin(theta))
            perpendicular = (math.degrees(theta) + 90.0) % 180.0
            yaws = [0.0 if lay.is_round(r) else float(round(perpendicular / YAW_STEP_DEG) * YAW_STEP_DEG % 180)
                    for r in refs]
            p1 = lay.fits(refs[0], x1, y1, yaws[0])
            if p1 is None:
                continue
            trial = lay.copy()
            trial.add(refs[0], x1, y1, yaws[0], self.state_for(refs[0], rng), p1)
            p2 = trial.fits(refs[1], x2, y2, yaws[1])
            if p2 is None:
                continue
            lay.add(refs[0], x1, y1, yaws[0], self.state_for(refs[0], rng), p1)
            lay.add(refs[1], x2, y2, yaws[1], self.state_for(refs[1], rng), p2)
            return
        raise _Retry("no room for two references")

    def _place_between(self, lay: Layout, rng: random.Random, members: list[str], refs: list[str]) -> str:
        target = rng.choice(members)
        r1, r2 = [next(p for p in lay.placed if p.object_id == r) for r in refs]
        for _ in range(60):
            t = rng.uniform(0.42, 0.58)
            off = rng.uniform(-0.8, 0.8)
            dx, dy = r2.x_cm - r1.x_cm, r2.y_cm - r1.y_cm
            norm = math.hypot(dx, dy)
            x = r1.x_cm + t * dx - off * dy / norm
            y = r1.y_cm + t * dy + off * dx / norm
            yaw = 0.0 if lay.is_round(target) else float(round(math.degrees(math.atan2(dy, dx)) / YAW_STEP_DEG)
                                                          * YAW_STEP_DEG % 180)
            poly = lay.fits(target, _grid(x), _grid(y), yaw)
            if poly is not None:
                lay.add(target, _grid(x), _grid(y), yaw, self.state_for(target, rng), poly)
                break
        else:
            raise _Retry("no room between the references")
        r1_xy, r2_xy = (r1.x_cm, r1.y_cm), (r2.x_cm, r2.y_cm)
        for other in members:
            if other != target:
                lay.place(other, self.state_for(other, rng),
                          where=lambda x, y: between_excess((x, y), r1_xy, r2_xy)
                          >= R.BETWEEN_MAX_EXCESS_CM + GEN_DISTANCE_MARGIN_CM)
        return target

    def _place_by_distance(self, lay: Layout, rng: random.Random, members: list[str], ref_id: str,
                           concept: str) -> str:
        target = rng.choice(members)
        ref = next(p for p in lay.placed if p.object_id == ref_id)
        ref_xy = (ref.x_cm, ref.y_cm)
        lay.place(target, self.state_for(target, rng))
        d_target = distance((lay.placed[-1].x_cm, lay.placed[-1].y_cm), ref_xy)
        sign = 1.0 if concept == "closest" else -1.0
        for other in members:
            if other != target:
                lay.place(other, self.state_for(other, rng),
                          where=lambda x, y: sign * (distance((x, y), ref_xy) - d_target) >= GEN_DISTANCE_MARGIN_CM)
        return target


class _ProbeSuite:
    """The little of a Suite the resolvers read, for checking drafts before the suite exists."""

    def __init__(self, gen: TaskGenerator) -> None:
        self.objects = gen.objects
        self.tasks = {gen.task.name: gen.task}


# -- Ordinal Position -------------------------------------------------------------------------------


class OrdinalPositionGenerator(TaskGenerator):
    conditions = ("id", "ood", "cross_task", "no_intervention")

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "no_intervention":
            return tuple(c for c in self.task.controls if not self.task.arguments[c.argument].objects)
        return super().cells_for(condition)

    def _instance(self, identity: str, rng: random.Random) -> str:
        return rng.choice(list(self.task.arguments[identity].objects))

    def counterfactual(self, rng: random.Random, like: Cell, transferred: str) -> Draft:
        """An observed cell of the same row length with the transferred object in a non-target slot."""
        n = _position_of(like.concept)[1]
        cells = [c for c in self.task.observed if _position_of(c.concept)[1] == n]
        return self.draft(rng, rng.choice(cells), "cross_task", extra=transferred)

    def draft(self, rng: random.Random, cell: Cell, condition: str, *, extra: str | None = None) -> Draft:
        k, n = _position_of(cell.concept)
        identities = [a for a, spec in self.task.arguments.items()
                      if spec.objects and set(spec.objects) <= set(self.task.pool)]
        if condition == "no_intervention":
            row = [self._instance(i, rng) for i in rng.sample(identities, n)]
            targets: tuple[str, ...] = ()
        else:
            target = self._instance(cell.argument, rng)
            free = [i for i in identities if i != cell.argument]
            others = [self._instance(i, rng) for i in rng.sample(free, n - 1 - (extra is not None))]
            if extra is not None:
                others.insert(rng.randrange(len(others) + 1), extra)
            row = others[: k - 1] + [target] + others[k - 1:]
            targets = (target,)
        lay = self._row(rng, row)
        rng.shuffle(lay.placed)  # file order says nothing about the row order
        goal = Goal(kind="no_motion") if condition == "no_intervention" else Goal(kind="in_bowl", objects=targets)
        return Draft(cell=cell, objects=lay.placed, targets=targets, goal=goal)

    def _row(self, rng: random.Random, row: list[str]) -> Layout:
        """Lay the objects side by side from the robot's left (+y) to its right, with clear gaps."""
        (x_lo, x_hi), (y_lo, y_hi) = self.geometry.workspace_x_cm, self.geometry.workspace_y_cm
        for _ in range(60):
            lay = self.layout(rng)
            yaws = [0.0 if lay.is_round(o) else float(rng.choice((0, 180))) for o in row]
            widths = []
            for oid, yaw in zip(row, yaws, strict=True):
                lo, hi = y_interval(footprint(self.objects[oid], 0.0, 0.0, yaw))
                widths.append(hi - lo)
            gaps = [rng.uniform(*GEN_ORDINAL_GAP_CM) for _ in row[1:]]
            total = sum(widths) + sum(gaps)
            top_lo, top_hi = y_lo + total - widths[-1] / 2, y_hi + widths[0] / 2
            if top_lo > top_hi:
                continue
            top = rng.uniform(top_lo, top_hi)
            x_row = rng.uniform(x_lo + 3.0, x_hi - 1.0)
            try:
                edge = top
                for i, (oid, yaw) in enumerate(zip(row, yaws, strict=True)):
                    centre = edge - widths[i] / 2
                    x = x_row + rng.uniform(-1.0, 1.0)
                    lay.place_at(oid, x, centre, yaw, self.state_for(oid, rng))
                    edge = centre - widths[i] / 2 - (gaps[i] if i < len(gaps) else 0.0)
            except _Retry:
                continue
            # grid rounding may eat into a gap: re-check the row's clearances
            intervals = [y_interval(lay.prints[o]) for o in row]
            if all(intervals[i][0] - intervals[i + 1][1] >= R.ORDINAL_GAP_CM + 0.25 for i in range(len(row) - 1)):
                return lay
        raise _Retry(f"no room for a row of {row}")


# -- Counting ---------------------------------------------------------------------------------------


class CountingGenerator(TaskGenerator):
    """ID scenes are single-object transitions of observed cells (every demonstration moves one object)."""

    conditions = ("id", "ood", "cross_task", "no_intervention")
    CROSS_TASK_CELLS = ("goal_2|addition", "goal_0|removal")

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "no_intervention":
            return self.task.controls
        return super().cells_for(condition)

    def cross_task_cells(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.task.observed if c.key in self.CROSS_TASK_CELLS)

    def transferred_in(self, draft: Draft) -> str:
        return draft.targets[0]

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        goal = _count_of(cell.concept)
        pool = list(self.task.pool)
        if condition == "cross_task":
            # the transferred object is the only one that can move the count towards the goal
            transferred = rng.choice(list(self.task.cross_task_objects))
            own = rng.sample(pool, rng.randint(1, 3))
            if cell.argument == "addition":
                return self._assemble(cell, in_bowl=own[:1], on_table=[transferred], targets=(transferred,), rng=rng)
            return self._assemble(cell, in_bowl=[transferred], on_table=own, targets=(transferred,), rng=rng)
        if cell.argument == "removal":
            start = 2 if condition == "ood" else goal + 1
        elif cell.argument == "addition":
            start = 2 if condition == "ood" else goal - 1
        else:
            start = goal
        total = rng.randint(max(start, goal, 2) + (1 if start == goal and start < len(pool) else 0), len(pool))
        chosen = rng.sample(pool, total)
        in_bowl, on_table = chosen[:start], chosen[start:]
        if cell.argument == "removal":
            targets = tuple(rng.sample(in_bowl, start - goal))
        elif cell.argument == "addition":
            targets = tuple(rng.sample(on_table, goal - start))
        else:
            targets = ()
        return self._assemble(cell, in_bowl, on_table, targets, rng, no_motion=condition == "no_intervention")

    def counterfactual(self, rng: random.Random, like: Cell, transferred: str) -> Draft:
        """The same cell with the transferred object where it must not move."""
        own = rng.sample(list(self.task.pool), rng.randint(2, 3))
        if like.argument == "addition":   # 1 -> 2: the transferred object already sits in the bowl
            return self._assemble(like, in_bowl=[transferred], on_table=own, targets=(own[0],), rng=rng)
        # 1 -> 0: a task object is in the bowl, the transferred object stays on the table
        return self._assemble(like, in_bowl=own[:1], on_table=[transferred, *own[1:]], targets=(own[0],), rng=rng)

    def _assemble(self, cell: Cell, in_bowl: Sequence[str], on_table: Sequence[str], targets: tuple[str, ...],
                  rng: random.Random, no_motion: bool = False) -> Draft:
        goal = _count_of(cell.concept)
        lay = self.layout(rng)
        for oid in on_table:
            lay.place(oid, self.state_for(oid, rng))
        placed = [PlacedObject(object_id=oid, x_cm=x, y_cm=y, state=self.state_for(oid, rng), location="bowl")
                  for oid, (x, y) in zip(in_bowl, bowl_slots(len(in_bowl), self.geometry), strict=True)]
        objects = placed + lay.placed
        rng.shuffle(objects)
        goal_record = Goal(kind="no_motion", count=goal) if no_motion else Goal(kind="count_in_bowl", count=goal)
        notes = f"start: {len(in_bowl)} in the bowl; goal: {goal}"
        return Draft(cell=cell, objects=objects, targets=targets, goal=goal_record, notes=notes)


GENERATORS: dict[str, type[TaskGenerator]] = {
    "object_state": ObjectStateGenerator,
    "relative_size": RelativeSizeGenerator,
    "relational_placement": RelationalPlacementGenerator,
    "referential_description": ReferentialDescriptionGenerator,
    "ordinal_position": OrdinalPositionGenerator,
    "counting": CountingGenerator,
}


# -- the suite --------------------------------------------------------------------------------------


def build_suite(seed: int, source_root: Path, hardware_root: Path,
                relation_rule: RelationRule | None = None) -> Suite:
    """The generated suite in memory (not yet written, not yet validated), its Relational scenes
    placed for `relation_rule` (default: the paper's bound)."""
    relation_rule = relation_rule or DEFAULT_RELATION_RULE
    objects = load_objects(source_root / "objects.yaml")
    geometry = load_geometry(hardware_root / "bench.yaml")
    names = [t for t in TASKS if (source_root / t / "matrix.yaml").is_file()]
    if not names:
        raise DataError(source_root, "no task folders with a matrix.yaml", allowed=TASKS)
    tasks = {name: load_task(source_root / name, name, objects) for name in names}
    counts = {name: expected_scene_counts(name) for name in names}
    scenes: dict[str, SceneSpec] = {}
    for name in names:
        gen = GENERATORS[name](tasks[name], objects, geometry, relation_rule)

        def rng_for(condition: str, _name: str = name) -> random.Random:
            return random.Random(f"spabench/{seed}/{_name}/{condition}")

        for condition_scenes in gen.generate(rng_for, counts[name]).values():
            for scene in condition_scenes:
                scenes[scene.scene_id] = scene
    manifest = SuiteManifest(name=SUITE_NAME, version=SUITE_VERSION, protocol="spa-bench", seed=seed,
                             tasks=tuple(names), counts=counts)
    return Suite(objects=objects, tasks=tasks, scenes=scenes, geometry=geometry, manifest=manifest,
                 root=str(source_root), relation_rule=relation_rule)


def manifest_text(manifest: SuiteManifest) -> str:
    header = ("Spa-Bench suite manifest. Written by `spabench suite generate`; the counts are scenes per\n"
              "task and scene condition (matched: OOD scenes with a direct control; paraphrase: matched scenes\n"
              "that also carry paraphrases) and must equal the protocol's.")
    from spabench.suite.yamlio import Flow

    data = {
        "name": manifest.name,
        "version": manifest.version,
        "protocol": manifest.protocol,
        "generator_seed": manifest.seed,
        "tasks": list(manifest.tasks),
        "counts": {t: Flow(manifest.counts[t]) for t in manifest.tasks},
    }
    return dump_yaml(data, header=header)


def generate_suite(seed: int = DEFAULT_SEED, out_root: str | os.PathLike = "tasks", *,
                   source_root: str | os.PathLike | None = None,
                   hardware_root: str | os.PathLike = "hardware", relation_rule: RelationRule | None = None) -> Suite:
    """Generate every task's scenes for `seed` and write a complete suite folder to `out_root`.

    `source_root` holds the hand-written inputs (objects.yaml, <task>/matrix.yaml, prompts.yaml);
    by default it is `out_root` itself. When they differ, the inputs are copied so that `out_root`
    loads on its own. Scene files the generator did not write are removed from the tasks it generates.
    """
    out = resolve_path(out_root)
    source = resolve_path(source_root) if source_root is not None else out
    hardware = resolve_path(hardware_root)
    suite = build_suite(seed, source, hardware, relation_rule)
    violations = validate_suite(suite)
    if violations:
        listing = "\n".join(f"  - {v}" for v in violations[:50])
        raise DataError(source, f"the generated suite breaks {len(violations)} design contract(s) "
                                f"(nothing written):\n{listing}")
    files: dict[Path, str] = {out / "suite.yaml": manifest_text(suite.manifest)}  # type: ignore[arg-type]
    for name in suite.manifest.tasks:  # type: ignore[union-attr]
        for condition in sorted({s.condition for s in suite.scenes.values() if s.task == name}):
            files[out / name / "scenes" / f"{condition}.yaml"] = dump_scene_file(
                suite.scenes_for(name, condition), name, condition, seed)
    if out.resolve() != source.resolve():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / "objects.yaml", out / "objects.yaml")
        for name in suite.manifest.tasks:  # type: ignore[union-attr]
            (out / name).mkdir(parents=True, exist_ok=True)
            for fname in ("matrix.yaml", "prompts.yaml"):
                shutil.copyfile(source / name / fname, out / name / fname)
    for name in suite.manifest.tasks:  # type: ignore[union-attr]
        folder = out / name / "scenes"
        if folder.is_dir():
            for stale in folder.glob("*.yaml"):
                if stale not in files:
                    stale.unlink()
    for path, text in files.items():
        write_text_atomic(path, text)
    return dataclasses.replace(suite, root=str(out))


__all__ = ["generate_suite", "build_suite", "DEFAULT_SEED", "Layout"]
