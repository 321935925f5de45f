"""Test fixtures' data: the suite's object inventory and bench geometry.

Uses spabench.suite.load_suite when the whole suite loads; otherwise the suite loader's own
readers for tasks/objects.yaml and hardware/bench.yaml (the twin's tests need only those two).
"""

from __future__ import annotations

from pathlib import Path

from spabench.suite.model import BenchGeometry, ObjectSpec

ROOT = Path(__file__).resolve().parents[2]


def load_suite_or_none():
    try:
        from spabench.suite.loader import load_suite

        return load_suite(ROOT / "tasks", ROOT / "hardware")
    except Exception:  # noqa: BLE001 - scenes or manifest not generated yet
        return None


def load_objects_and_geometry() -> tuple[dict[str, ObjectSpec], BenchGeometry]:
    suite = load_suite_or_none()
    if suite is not None:
        return dict(suite.objects), suite.geometry
    from spabench.suite.loader import load_geometry, load_objects

    return load_objects(ROOT / "tasks" / "objects.yaml"), load_geometry(ROOT / "hardware" / "bench.yaml")
