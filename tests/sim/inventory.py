"""Test fixtures' data: the suite as the twin's tests use it (tasks/ and hardware/ of the checkout).

A suite that does not load fails the tests that need it, with the loader's own error: the data is
part of the product, never a reason to skip.
"""

from __future__ import annotations

from pathlib import Path

from spabench.suite.model import BenchGeometry, ObjectSpec
from spabench.suite.spec import Suite

ROOT = Path(__file__).resolve().parents[2]


def load_checkout_suite() -> Suite:
    from spabench.suite.loader import load_suite

    return load_suite(ROOT / "tasks", ROOT / "hardware")


def load_objects_and_geometry() -> tuple[dict[str, ObjectSpec], BenchGeometry]:
    suite = load_checkout_suite()
    return dict(suite.objects), suite.geometry
