"""Fixtures for the suite tests: the committed suite, and broken copies of it in tmp_path."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from spabench.suite import load_suite

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
HARDWARE = REPO / "hardware"


@pytest.fixture(scope="session")
def suite():
    return load_suite(TASKS, HARDWARE)


class SuiteCopy:
    """A copy of the committed tasks/ folder whose YAML files a test may rewrite."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(TASKS, root)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def read(self, rel: str):
        return yaml.load(self.path(rel).read_text(), Loader=_LOADER)

    def write(self, rel: str, data) -> None:
        self.path(rel).write_text(yaml.dump(data, Dumper=_DUMPER, sort_keys=False, width=10_000))

    def edit(self, rel: str, change: Callable) -> None:
        data = self.read(rel)
        result = change(data)
        self.write(rel, data if result is None else result)

    def edit_scene(self, task: str, condition: str, scene_id: str, change: Callable[[dict], None]) -> None:
        def apply(scenes):
            (scene,) = [s for s in scenes if s["scene_id"] == scene_id]
            change(scene)
        self.edit(f"{task}/scenes/{condition}.yaml", apply)

    def load(self):
        return load_suite(self.root, HARDWARE)


@pytest.fixture
def suite_copy(tmp_path) -> SuiteCopy:
    return SuiteCopy(tmp_path / "tasks")
