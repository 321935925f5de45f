"""A synthetic suite with the protocol's scene counts, built from real SceneSpec records.

Stands in for `spabench.suite.load_suite` so the planner's tests control the scene counts exactly; it
offers what the planner reads of `spabench.suite.spec.Suite`: `.tasks`, `.scenes`, `.scenes_for()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from spabench.suite.model import Cell, Goal, Instructions, PlacedObject, SceneSpec
from spabench.suite.vocabulary import TASKS

# Scenes per task and scene condition (the protocol: 20 ID, 50 OOD of which 20 matched and 10 of
# those paraphrased, 20 cross-task or novel-object, 20 no-intervention or 20+20 relational controls).
SCENE_COUNTS: dict[str, dict[str, int]] = {
    task: {
        "id": 20,
        "ood": 50,
        **({"novel_object": 20} if task == "object_state" else {"cross_task": 20}),
        **({} if task == "relative_size"
           else {"no_movement": 20, "movement_required": 20} if task == "relational_placement"
           else {"no_intervention": 20}),
    }
    for task in TASKS
}


@dataclass
class SyntheticSuite:
    scenes: dict[str, SceneSpec]
    tasks: dict[str, object] = field(default_factory=dict)

    def scenes_for(self, task: str, condition: str) -> list[SceneSpec]:
        return sorted((s for s in self.scenes.values() if s.task == task and s.condition == condition),
                      key=lambda s: s.scene_id)

    def scene(self, scene_id: str) -> SceneSpec:
        return self.scenes[scene_id]


def _scene(task: str, condition: str, i: int) -> SceneSpec:
    scene_id = f"{task}-{condition}-{i:03d}"
    withheld = condition == "ood"
    n_cells = 4 if condition in ("id", "ood") else 2
    cell = Cell(concept=f"{'w' if withheld else 'o'}concept{i % n_cells}", argument=f"arg{i % n_cells}")
    matched = condition == "ood" and i % 5 in (0, 2)          # 20 of 50, spread over the list
    paraphrase = matched and i % 5 == 0                       # 10 of those 20
    no_motion = condition in ("no_intervention", "no_movement")
    return SceneSpec(
        scene_id=scene_id,
        task=task,
        condition=condition,
        cell=cell,
        withheld=withheld,
        objects=(PlacedObject("red_block", 20.0 + i % 5, -5.0 + i % 3),
                 PlacedObject("green_pen", 25.0, 6.0)),
        instructions=Instructions(
            spatial=f"spatial instruction of {scene_id}",
            direct=f"direct instruction of {scene_id}" if matched else None,
            paraphrase_spatial=f"paraphrased spatial instruction of {scene_id}" if paraphrase else None,
            paraphrase_direct=f"paraphrased direct instruction of {scene_id}" if paraphrase else None,
        ),
        goal=Goal(kind="no_motion") if no_motion else Goal(kind="in_bowl", objects=("red_block",)),
        targets=() if no_motion else ("red_block",),
        matched_group=f"{task}-mg{i:03d}" if matched else None,
        paraphrase=paraphrase,
    )


def make_suite(tasks=TASKS, scale: float = 1.0, drop: dict | None = None) -> SyntheticSuite:
    """A suite with SCENE_COUNTS (times `scale`) scenes; `drop={(task, condition): n}` removes scenes."""
    scenes: dict[str, SceneSpec] = {}
    for task in tasks:
        for condition, n in SCENE_COUNTS[task].items():
            n = int(round(n * scale)) - (drop or {}).get((task, condition), 0)
            for i in range(n):
                s = _scene(task, condition, i)
                scenes[s.scene_id] = s
    return SyntheticSuite(scenes, {t: SimpleNamespace(name=t) for t in tasks})


def strip_instruction(suite: SyntheticSuite, scene_id: str, field_name: str) -> SyntheticSuite:
    scenes = dict(suite.scenes)
    s = scenes[scene_id]
    scenes[scene_id] = replace(s, instructions=replace(s.instructions, **{field_name: None}))
    return SyntheticSuite(scenes, suite.tasks)


def write_suite_files(root: Path) -> Path:
    """A repo-shaped folder (conf/config.yaml, tasks/, hardware/bench.yaml) whose files feed the hash."""
    (root / "conf").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "config.yaml").write_text("defaults: []\n")
    for task in TASKS:
        d = root / "tasks" / task / "scenes"
        d.mkdir(parents=True, exist_ok=True)
        (root / "tasks" / task / "matrix.yaml").write_text(f"task: {task}\n")
        for condition in SCENE_COUNTS[task]:
            (d / f"{condition}.yaml").write_text(f"scenes: [{task}-{condition}]\n")
    (root / "tasks" / "suite.yaml").write_text("tasks: all\n")
    (root / "hardware").mkdir(exist_ok=True)
    (root / "hardware" / "bench.yaml").write_text("table_size_cm: [120, 80]\n")
    return root


@pytest.fixture(scope="session")
def full_suite() -> SyntheticSuite:
    return make_suite()


@pytest.fixture
def repo_like(tmp_path) -> Path:
    return write_suite_files(tmp_path / "repo")


REPO = Path(__file__).resolve().parents[2]
CAMPAIGN_DIR = REPO / "conf" / "campaign"


@pytest.fixture(scope="session")
def suite_factory():
    """make_suite(tasks=..., scale=..., drop={(task, condition): n}) -> SyntheticSuite."""
    return make_suite


@pytest.fixture(scope="session")
def without_instruction():
    """without_instruction(suite, scene_id, field) -> a copy of suite with that instruction removed."""
    return strip_instruction


@pytest.fixture(scope="session")
def campaign_yaml():
    """campaign_yaml(name) -> the plain dict of conf/campaign/<name>.yaml."""
    import yaml

    def load(name: str) -> dict:
        return yaml.safe_load((CAMPAIGN_DIR / f"{name}.yaml").read_text())

    return load
