"""Seeded generator of the frozen scene specifications (tasks/<task>/scenes/*.yaml) and the manifest.

Deterministic: one `random.Random` per (seed, task, condition), positions on a 0.5 cm grid and yaw in
15 degree steps, so the same seed writes byte-identical files. The generated suite is checked against
every design contract before anything is written; a failure is a DataError, and no file changes.

Layout rules used here are stricter than the contracts (wider gaps, clearer margins) so that small
hand edits of a generated scene do not immediately break a contract.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import shutil
from pathlib import Path
from typing import Callable, Sequence

from spabench.errors import DataError
from spabench.suite import resolvers as R
from spabench.suite.contracts import GOAL_REGION_OFFSET_CM, expected_scene_counts, validate_suite
from spabench.suite.geometry import (
    DIRECTION_VECTORS,
    Footprint,
    between_excess,
    distance,
    footprint,
    point_footprint_distance,
    footprints_apart,
    relation_offset,
    y_interval,
)
from spabench.suite.loader import load_geometry, load_objects, load_task, resolve_path
from spabench.suite.model import (
    BenchGeometry,
    Cell,
    Goal,
    Instructions,
    ObjectSpec,
    ObjectState,
    PlacedObject,
    SceneSpec,
)
from spabench.suite.scene_io import dump_scene_file
from spabench.suite.spec import Suite, SuiteManifest, TaskSpec
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


class _Retry(Exception):
    """This attempt at a scene failed; draw again."""


def _grid(v: float) -> float:
    return round(v / GRID_CM) * GRID_CM


class Layout:
    """Places objects one by one on the table: inside the workspace, clear of each other and the bowl."""

    def __init__(self, rng: random.Random, objects: dict[str, ObjectSpec], geometry: BenchGeometry) -> None:
        self.rng, self.objects, self.geometry = rng, objects, geometry
        self.placed: list[PlacedObject] = []
        self.prints: dict[str, Footprint] = {}

    def copy(self) -> "Layout":
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


class TaskGenerator:
    """Shared machinery; one subclass per task builds Drafts for its conditions."""

    conditions: tuple[str, ...] = ()

    def __init__(self, task: TaskSpec, objects: dict[str, ObjectSpec], geometry: BenchGeometry) -> None:
        self.task, self.objects, self.geometry = task, objects, geometry

    # helpers
    def layout(self, rng: random.Random) -> Layout:
        return Layout(rng, self.objects, self.geometry)

    def state_for(self, oid: str, rng: random.Random, *, pose: str | None = None, lid: str | None = None) -> ObjectState:
        spec = self.objects[oid]
        if spec.can_invert and pose is None:
            pose = "upright"
        if spec.has_lid and lid is None:
            lid = "closed"
        return ObjectState(lid=lid if spec.has_lid else None, pose=pose if spec.can_invert else None)

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        raise NotImplementedError

    def build(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        last = ""
        for _ in range(MAX_TRIES):
            try:
                return self.draft(rng, cell, condition)
            except _Retry as exc:
                last = str(exc)
        raise DataError(f"tasks/{self.task.name}/matrix.yaml",
                        f"cannot lay out a {condition} scene for cell {cell.key} within the workspace ({last})",
                        field=cell.key)

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "ood":
            return self.task.withheld_cells
        return self.task.observed

    def generate(self, rng_for: Callable[[str], random.Random], counts: dict[str, int]) -> dict[str, list[SceneSpec]]:
        out: dict[str, list[SceneSpec]] = {}
        for condition in self.conditions:
            n = counts.get(condition, 0)
            if n == 0:
                continue
            rng = rng_for(condition)
            cells = list(self.cells_for(condition))
            if condition != "ood":
                rng.shuffle(cells)
            drafts = [self.build(rng, cells[i % len(cells)], condition) for i in range(n)]
            out[condition] = self.finish(drafts, condition, rng, counts)
        return out

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


class ObjectStateGenerator(TaskGenerator):
    conditions = ("id", "ood", "novel_object", "no_intervention")

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "novel_object":
            return self.task.controls
        return super().cells_for(condition)

    def _state(self, oid: str, concept: str, rng: random.Random, *, match: bool | None) -> ObjectState:
        """A state that does (match=True), does not (False) or may (None) show the concept."""
        for _ in range(50):
            pose = "upright" if rng.random() < 0.6 else "upside_down"
            state = ObjectState(lid=rng.choice(("open", "closed")), pose=pose)
            if match is False and concept in R.LID_CONCEPTS and state.lid == concept:
                continue  # an upside-down cup with the named lid state would invite a dispute
            if match is None or R.state_matches(state, concept) == match:
                return state
        raise _Retry("no state")

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        concept, members = cell.concept, self.task.arguments[cell.argument].objects
        groups = [a.objects for k, a in self.task.arguments.items()
                  if a.objects and not any(self.objects[o].novel for o in a.objects)]
        others = [o for g in groups if set(g) != set(members) for o in g]
        lay = self.layout(rng)
        if condition == "no_intervention":
            present = rng.sample(list(members), rng.randint(1, len(members)))
            for oid in present:
                lay.place(oid, self._state(oid, concept, rng, match=False))
            targets: tuple[str, ...] = ()
            n_distractors = rng.randint(2, 4 - len(present) + 1)
        else:
            target = rng.choice(list(members))
            lay.place(target, self._state(target, concept, rng, match=True))
            targets = (target,)
            n_distractors = rng.randint(2, 4)
        distractors = rng.sample(others, n_distractors)
        for k, oid in enumerate(distractors):
            # the first distractor shows the concept, so the state word alone never picks the target
            lay.place(oid, self._state(oid, concept, rng, match=True if k == 0 else None))
        rng.shuffle(lay.placed)
        goal = Goal(kind="no_motion") if condition == "no_intervention" else Goal(kind="in_bowl", objects=targets)
        return Draft(cell=cell, objects=lay.placed, targets=targets, goal=goal)


# -- Relative Size ----------------------------------------------------------------------------------


class RelativeSizeGenerator(TaskGenerator):
    conditions = ("id", "ood", "cross_task")

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        target = self.task.arguments[cell.argument].objects[0]
        pool = self.task.cross_task_objects if condition == "cross_task" else self.task.pool
        volume = {o: R.size_metric(self.objects[o]) for o in (*pool, target)}
        m = R.SIZE_RATIO_MARGIN
        if cell.concept == "smallest":
            eligible = [o for o in pool if o != target and volume[o] >= volume[target] * m]
        else:
            eligible = [o for o in pool if o != target and volume[o] * m <= volume[target]]
        other_end = "largest" if cell.concept == "smallest" else "smallest"
        chosen: list[str] | None = None
        for n in range(min(rng.randint(3, 5), len(eligible) + 1), 1, -1):
            for _ in range(30):
                sample = rng.sample(eligible, n - 1)
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


# -- Relational Placement ---------------------------------------------------------------------------


class RelationalPlacementGenerator(TaskGenerator):
    conditions = ("id", "ood", "cross_task", "no_movement")

    def generate(self, rng_for, counts):
        out = super().generate(rng_for, counts)
        if "no_movement" in out and counts.get("movement_required"):
            rng = rng_for("movement_required")
            scenes = []
            for nm in out["no_movement"][: counts["movement_required"]]:
                draft = self._build_movement_required(rng, nm)
                scene = dataclasses.replace(
                    nm, scene_id=nm.scene_id.replace("-no_movement-", "-movement_required-"),
                    condition="movement_required", objects=tuple(draft.objects), goal=draft.goal,
                    notes=f"matched to {nm.scene_id}: same objects, the target moved out of the relation")
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

    @staticmethod
    def _clearly_apart(t_xy, r_xy, direction) -> bool:
        dist, angle = relation_offset(t_xy, r_xy, direction)
        return dist >= RELATION_RADIUS_CM + 2.0 or angle >= RELATION_HALF_ANGLE_DEG + 15.0

    def _goal(self, cell: Cell, condition: str) -> Goal:
        target, reference, direction = self._pair(cell)
        kind = "no_motion" if condition == "no_movement" else "relation"
        return Goal(kind=kind, objects=(target,), reference=reference, direction=direction)

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        target, reference, direction = self._pair(cell)
        lay = self.layout(rng)
        ref = lay.place(reference, self.state_for(reference, rng),
                        accept=lambda x, y, poly: self._spot_ok(lay, self._spot(
                            PlacedObject(reference, x, y), direction), ignore=()))
        if condition == "no_movement":
            for _ in range(100):
                d = rng.uniform(4.5, 6.5)
                phi = math.radians(rng.uniform(-25.0, 25.0))
                ux, uy = DIRECTION_VECTORS[direction]
                vx, vy = ux * math.cos(phi) - uy * math.sin(phi), ux * math.sin(phi) + uy * math.cos(phi)
                x, y, yaw = _grid(ref.x_cm + d * vx), _grid(ref.y_cm + d * vy), lay.random_yaw(target)
                dist, angle = relation_offset((x, y), (ref.x_cm, ref.y_cm), direction)
                if dist > RELATION_RADIUS_CM - 1.5 or angle > RELATION_HALF_ANGLE_DEG - 15.0:
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
                      where=lambda x, y: self._clearly_apart((x, y), (ref.x_cm, ref.y_cm), direction),
                      accept=lambda x, y, poly: point_footprint_distance(spot, poly) >= GEN_SPOT_CLEAR_CM)
        if condition == "cross_task":
            pool, k = list(self.task.cross_task_objects), rng.randint(1, 2)
        else:
            pool, k = [o for o in self.task.pool if o not in (target, reference)], rng.randint(0, 2)
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
            try:
                lay.place(target, old.state,
                          where=lambda x, y: self._clearly_apart((x, y), (ref.x_cm, ref.y_cm), direction),
                          accept=lambda x, y, poly: point_footprint_distance(spot, poly) >= GEN_SPOT_CLEAR_CM)
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
        return {k: a.objects for k, a in self.task.arguments.items()}

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        members = list(self.task.arguments[cell.argument].objects)
        between = cell.concept == "between"
        if condition == "cross_task":
            ref_pool = list(self.task.cross_task_objects)
        else:
            ref_pool = list(self.task.references)
        refs = rng.sample(ref_pool, 2 if between else 1)
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
        if condition == "cross_task":
            pool, k = [o for o in self.task.cross_task_objects if o not in refs], rng.randint(0, 1)
        else:
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
            return self.task.controls
        return super().cells_for(condition)

    def _instance(self, identity: str, rng: random.Random) -> str:
        return rng.choice(list(self.task.arguments[identity].objects))

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        k, n = R.ordinal_position(cell.concept)
        identities = [a for a, spec in self.task.arguments.items() if spec.objects]
        if condition == "no_intervention":
            row = [self._instance(i, rng) for i in rng.sample(identities, n)]
            targets: tuple[str, ...] = ()
        else:
            target = self._instance(cell.argument, rng)
            if condition == "cross_task":
                others = rng.sample(list(self.task.cross_task_objects), n - 1)
            else:
                others = [self._instance(i, rng) for i in rng.sample([i for i in identities if i != cell.argument],
                                                                     n - 1)]
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
            for oid, yaw in zip(row, yaws):
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
                for i, (oid, yaw) in enumerate(zip(row, yaws)):
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
    conditions = ("id", "ood", "cross_task", "no_intervention")

    def cells_for(self, condition: str) -> tuple[Cell, ...]:
        if condition == "no_intervention":
            return self.task.controls
        return super().cells_for(condition)

    def draft(self, rng: random.Random, cell: Cell, condition: str) -> Draft:
        goal = R.goal_count(cell.concept)
        pool = list(self.task.cross_task_objects if condition == "cross_task" else self.task.pool)
        capacity = 4  # objects that fit in the bowl together
        if cell.argument == "removal":
            start = 2 if condition == "ood" else rng.randint(goal + 1, min(capacity, len(pool)))
        elif cell.argument == "addition":
            start = 2 if condition == "ood" else rng.randint(0, goal - 1)
        else:
            start = goal
        total = rng.randint(max(start, goal, 2) + (1 if start == goal else 0), min(5, len(pool)))
        chosen = rng.sample(pool, total)
        in_bowl, on_table = chosen[:start], chosen[start:]
        if cell.argument == "removal":
            targets = tuple(rng.sample(in_bowl, start - goal))
        elif cell.argument == "addition":
            targets = tuple(rng.sample(on_table, goal - start))
        else:
            targets = ()
        lay = self.layout(rng)
        for oid in on_table:
            lay.place(oid, self.state_for(oid, rng))
        placed = [PlacedObject(object_id=oid, x_cm=x, y_cm=y, state=self.state_for(oid, rng), location="bowl")
                  for oid, (x, y) in zip(in_bowl, bowl_slots(len(in_bowl), self.geometry))]
        objects = placed + lay.placed
        rng.shuffle(objects)
        if condition == "no_intervention":
            goal_record = Goal(kind="no_motion", count=goal)
        else:
            goal_record = Goal(kind="count_in_bowl", count=goal)
        notes = f"start: {start} in the bowl; goal: {goal}"
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


def build_suite(seed: int, source_root: Path, hardware_root: Path) -> Suite:
    """The generated suite in memory (not yet written, not yet validated)."""
    objects = load_objects(source_root / "objects.yaml")
    geometry = load_geometry(hardware_root / "bench.yaml")
    names = [t for t in TASKS if (source_root / t / "matrix.yaml").is_file()]
    if not names:
        raise DataError(source_root, "no task folders with a matrix.yaml", allowed=TASKS)
    tasks = {name: load_task(source_root / name, name, objects) for name in names}
    counts = {name: expected_scene_counts(name) for name in names}
    scenes: dict[str, SceneSpec] = {}
    for name in names:
        gen = GENERATORS[name](tasks[name], objects, geometry)

        def rng_for(condition: str, _name: str = name) -> random.Random:
            return random.Random(f"spabench/{seed}/{_name}/{condition}")

        for condition_scenes in gen.generate(rng_for, counts[name]).values():
            for scene in condition_scenes:
                scenes[scene.scene_id] = scene
    manifest = SuiteManifest(name=SUITE_NAME, version=SUITE_VERSION, protocol="spa-bench", seed=seed,
                             tasks=tuple(names), counts=counts)
    return Suite(objects=objects, tasks=tasks, scenes=scenes, geometry=geometry, manifest=manifest,
                 root=str(source_root))


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
                   hardware_root: str | os.PathLike = "hardware") -> Suite:
    """Generate every task's scenes for `seed` and write a complete suite folder to `out_root`.

    `source_root` holds the hand-written inputs (objects.yaml, <task>/matrix.yaml, prompts.yaml);
    by default it is `out_root` itself. When they differ, the inputs are copied so that `out_root`
    loads on its own. Scene files the generator did not write are removed from the tasks it generates.
    """
    out = resolve_path(out_root)
    source = resolve_path(source_root) if source_root is not None else out
    hardware = resolve_path(hardware_root)
    suite = build_suite(seed, source, hardware)
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
