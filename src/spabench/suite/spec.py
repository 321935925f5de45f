"""The loaded benchmark: tasks (matrix + prompts), the manifest, and the Suite that holds everything.

The records of single objects and scenes live in `model.py`; this module adds what a *task* and the
*suite* are, so that loader, generator, contracts and the planner share one shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spabench.errors import DataError
from spabench.suite.model import BenchGeometry, Cell, ObjectSpec, SceneSpec
from spabench.suite.success import RelationRule

AXES: tuple[str, ...] = ("attribute", "relation", "scene_structure")
INSTRUCTION_KINDS: tuple[str, ...] = ("spatial", "paraphrase_spatial", "direct", "paraphrase_direct")


@dataclass(frozen=True)
class ConceptSpec:
    """How a concept is worded: `words` in original instructions, `paraphrase` in paraphrases."""

    key: str
    words: str
    paraphrase: str


@dataclass(frozen=True)
class ArgumentSpec:
    """An argument of the matrix and the object instances that embody it."""

    key: str
    display: str                       # how spatial instructions name it ("white cup", "airplane")
    objects: tuple[str, ...] = ()      # instances that count as this argument (empty: counting/none)
    references: tuple[str, ...] = ()   # Relational Placement: the pair's reference object


@dataclass(frozen=True)
class TaskSpec:
    """One task folder: its concept x argument matrix, wording, templates and object pools."""

    name: str
    axis: str
    cells: tuple[Cell, ...]            # observed + withheld, in matrix order
    withheld: frozenset[str]           # cell keys
    templates: dict[str, list[str]]    # instruction kind -> templates
    success: str                       # the protocol's success criterion, as text
    concepts: dict[str, ConceptSpec] = field(default_factory=dict)
    arguments: dict[str, ArgumentSpec] = field(default_factory=dict)
    controls: tuple[Cell, ...] = ()    # cells used only by control conditions (novel object, no-intervention)
    pool: tuple[str, ...] = ()         # the task's own (training) objects
    cross_task_objects: tuple[str, ...] = ()  # familiar objects from other tasks (cross_task scenes)
    references: tuple[str, ...] = ()   # reference objects of ID/OOD scenes (Referential Description)

    @property
    def observed(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.key not in self.withheld)

    @property
    def withheld_cells(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.key in self.withheld)

    def cell_status(self, cell: Cell) -> str | None:
        """'observed', 'withheld', 'control' or None for a cell outside the matrix."""
        if cell.key in self.withheld:
            return "withheld"
        if any(c.key == cell.key for c in self.cells):
            return "observed"
        if any(c.key == cell.key for c in self.controls):
            return "control"
        return None


@dataclass(frozen=True)
class SuiteManifest:
    """tasks/suite.yaml: which tasks, which version, which generator seed, how many scenes."""

    name: str
    version: str
    protocol: str                      # "spa-bench": counts must equal the protocol's
    seed: int
    tasks: tuple[str, ...]
    counts: dict[str, dict[str, int]]  # task -> scene condition (+ "matched", "paraphrase") -> count


@dataclass
class Suite:
    """Everything the harness knows about the benchmark: objects, tasks, frozen scenes, bench geometry."""

    objects: dict[str, ObjectSpec]
    tasks: dict[str, TaskSpec]
    scenes: dict[str, SceneSpec]
    geometry: BenchGeometry
    manifest: SuiteManifest | None = None
    sources: dict[str, str] = field(default_factory=dict)  # scene_id -> file it came from
    root: str = ""                                         # the tasks folder it was loaded from
    # the Relational Placement success rule its scenes are built and scored for (conf/suite `relation`)
    relation_rule: RelationRule = field(default_factory=RelationRule)

    def scenes_for(self, task: str, condition: str) -> list[SceneSpec]:
        return sorted((s for s in self.scenes.values() if s.task == task and s.condition == condition),
                      key=lambda s: s.scene_id)

    def scene(self, scene_id: str) -> SceneSpec:
        try:
            return self.scenes[scene_id]
        except KeyError:
            raise DataError("suite", f"unknown scene id {scene_id!r}", field="scene_id") from None

    def object(self, object_id: str) -> ObjectSpec:
        try:
            return self.objects[object_id]
        except KeyError:
            raise DataError("tasks/objects.yaml", f"unknown object id {object_id!r}", field="object_id",
                            allowed=sorted(self.objects)) from None
