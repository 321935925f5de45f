"""Two writers of one rendered file never trip over each other (found by CI on d695add).

The session draws a scene's placement diagram on demand while its render-ahead worker may draw the
same scene; both wrote through one temporary name (`<name>.tmp.png`), so the second `os.replace`
found the first writer's file already moved and the scene gate failed with FileNotFoundError
(tests/integration/test_alignment_gate.py, under load). Here both writers are held inside their
write until the other one is there too, which made the old code fail every time."""

from __future__ import annotations

import threading
from pathlib import Path

import matplotlib.figure
import pytest
from PIL import Image

from spabench.atomic import write_atomically
from spabench.operator.placement import draw_placement
from spabench.suite import load_suite

REPO = Path(__file__).resolve().parents[2]


def _together(n: int, fn) -> list[BaseException]:
    """Run fn() on n threads at once; the exceptions they raised."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            fn()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


def test_two_writers_inside_their_write_at_once_both_succeed_and_leave_one_whole_file(tmp_path):
    out = tmp_path / "x.png"
    barrier = threading.Barrier(2, timeout=30)

    def write(tmp: Path) -> None:
        tmp.write_bytes(b"first half ")
        barrier.wait()   # both writers are now between creating and moving their temporary file
        with tmp.open("ab") as fh:
            fh.write(b"second half")

    assert _together(2, lambda: write_atomically(out, write)) == []
    assert out.read_bytes() == b"first half second half"
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"]   # no temporary file left behind


def test_a_failing_write_leaves_neither_a_file_nor_its_temporary(tmp_path):
    def write(tmp: Path) -> None:
        tmp.write_bytes(b"torn")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(tmp_path / "y.png", write)
    assert list(tmp_path.iterdir()) == []


def test_the_placement_diagram_drawn_twice_at_once_is_one_readable_png(tmp_path, monkeypatch):
    suite = load_suite(REPO / "tasks", REPO / "hardware")
    scene = suite.scene("object_state-id-001")
    barrier = threading.Barrier(2, timeout=30)
    savefig = matplotlib.figure.Figure.savefig

    def savefig_together(self, fname, *args, **kwargs):
        savefig(self, fname, *args, **kwargs)
        barrier.wait()   # the session and the worker have both written, neither has moved its file yet

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig_together)
    out = tmp_path / "scene.placement.png"
    assert _together(2, lambda: draw_placement(scene, suite.objects, suite.geometry, out)) == []
    with Image.open(out) as img:
        img.verify()
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
