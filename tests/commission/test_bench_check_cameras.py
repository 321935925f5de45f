"""`spabench bench check`, the cameras part (issue 37): the harness's replay cameras (LeRobot Camera
subclass spabench_replay) on the emulated SO-101. A picture per camera by name, its size and measured
rate; a frozen camera named; two cameras whose sources were exchanged between checks refused as
swapped, and accepted with accept_cameras=true.

Failed before: the check had no cameras part (no pictures, no `cameras` items in report.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spabench.cli.main import main
from spabench.suite.vocabulary import CAMERAS
from tests.support.feetech_bus import EmulatedBus

W, H = 64, 48


def scene_npz(folder: Path, name: str, seed: int, frames: int = 8) -> Path:
    """A camera's own view: a still scene of coloured blocks (seeded), with sensor noise per frame."""
    rng = np.random.default_rng(seed)
    base = np.zeros((H, W, 3), dtype=np.float32) + rng.uniform(30, 220, 3)
    for _ in range(4):
        y, x = rng.integers(0, H - 12), rng.integers(0, W - 16)
        base[y:y + 12, x:x + 16] = rng.uniform(0, 255, 3)
    noisy = np.stack([np.clip(base + rng.normal(0, 2.0, base.shape), 0, 255) for _ in range(frames)])
    path = folder / f"{name}.npz"
    np.savez(path, frames=noisy.astype(np.uint8))
    return path


@pytest.fixture
def lab(lab: Path) -> Path:
    """The commission tests' lab folder (conftest), with views/ for the replay scenes."""
    (lab / "views").mkdir()
    return lab


def check(bus: EmulatedBus, lab: Path, sources: dict[str, Path], out: str, capsys, *extra: str):
    cams = [f"bench.cameras.{c}={{type: spabench_replay, index_or_path: '{sources[c]}', width: {W}, height: {H}, "
            f"fps: 30}}" for c in CAMERAS]
    code = main(["bench", "check", "bench=so101_emulated", f"bench.port={bus.port}",
                 f"bench.calibration_dir={lab / 'calibration'}", f"out={lab / out}", "camera_s=1", *cams, *extra])
    text = capsys.readouterr().out
    return code, text, json.loads((lab / out / "report.json").read_text())


def test_pictures_rates_and_a_swap_between_checks(lab, capsys):
    sources = {c: scene_npz(lab / "views", c, seed=i) for i, c in enumerate(CAMERAS)}
    with EmulatedBus() as bus:
        code, text, report = check(bus, lab, sources, "first", capsys)
        assert code == 0, text
        rows = {r["name"]: r for r in report["parts"]["cameras"]["rows"]}
        assert set(rows) == set(CAMERAS)
        assert all(r["ok"] and (r["width"], r["height"]) == (W, H) and r["new_frames_hz"] > 0 for r in rows.values())
        assert set(report["pictures"]) == set(CAMERAS)
        for c in CAMERAS:
            assert (lab / "first" / report["pictures"][c]).is_file()
            assert f"src='{report['pictures'][c]}'" in (lab / "first" / "report.html").read_text()
        refs = lab / "bench-checks" / "references" / "spabench_follower"
        assert {p.stem for p in refs.glob("*.png")} == set(CAMERAS)
        assert "measuring frame rates" in text

        code, text, report = check(bus, lab, sources, "second", capsys)   # same cameras: their own views
        assert code == 0, text
        assert all(i["ok"] for i in report["items"] if i["part"] == "cameras")

        swapped = {**sources, "wrist": sources["overhead"], "overhead": sources["wrist"]}
        code, text, report = check(bus, lab, swapped, "third", capsys)
        fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
        assert code != 0 and len(fails) == 2, text
        assert all("wrist and overhead look swapped" in f or "overhead and wrist look swapped" in f for f in fails)
        assert any("camera 'wrist' is nearer the reference picture of 'overhead'" in f for f in fails), text

        code, text, report = check(bus, lab, swapped, "fourth", capsys, "accept_cameras=true")
        assert code == 0, text
        code, text, report = check(bus, lab, swapped, "fifth", capsys)   # the accepted views are the references
        assert code == 0, text


def test_a_frozen_camera_fails_by_name(lab, capsys):
    sources = {c: scene_npz(lab / "views", c, seed=i) for i, c in enumerate(CAMERAS)}
    sources["middle"] = scene_npz(lab / "views", "stuck", seed=9, frames=1)   # one frame, looped: frozen
    with EmulatedBus() as bus:
        code, text, report = check(bus, lab, sources, "check", capsys)
    fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert code != 0 and len(fails) == 1 and fails[0].startswith("FAIL cameras: camera middle: frozen:"), text
    rows = {r["name"]: r for r in report["parts"]["cameras"]["rows"]}
    assert rows["middle"]["frozen"] and rows["middle"]["new_frames_hz"] == 0
    assert "middle" in report["pictures"]   # the picture is kept: it shows what the camera repeats
