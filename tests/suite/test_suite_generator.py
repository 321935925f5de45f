"""The seeded generator: byte-for-byte reproducible, seed-sensitive, and its output is a sound suite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spabench.errors import ConfigError
from spabench.suite import check_suite, load_suite
from spabench.suite.commands import SuiteGenerateConfig, generate
from spabench.suite.generator import DEFAULT_SEED, generate_suite

from .conftest import HARDWARE, TASKS


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.yaml"))}


def test_other_seed_other_scenes_same_inputs(tmp_path):
    out = tmp_path / "tasks"
    generate_suite(7, out, source_root=TASKS, hardware_root=HARDWARE)
    files, committed = _files(out), _files(TASKS)
    scene_files = [name for name in files if "/scenes/" in name]
    assert len(scene_files) == 25 and set(files) == set(committed)
    assert all(files[name] != committed[name] for name in scene_files)
    assert files["counting/matrix.yaml"] == committed["counting/matrix.yaml"]  # inputs copied verbatim
    suite = load_suite(out, HARDWARE)
    assert suite.manifest.seed == 7
    check_suite(suite)


def _generate_cfg(root, out=None) -> SuiteGenerateConfig:
    data = {"suite": {"root": str(root), "hardware": str(HARDWARE), "seed": DEFAULT_SEED}}
    if out is not None:
        data["out"] = str(out)
    return SuiteGenerateConfig.from_mapping(data)


def test_committed_scenes_are_the_generate_commands_output_for_the_committed_seed(tmp_path, capsys):
    """Byte-for-byte: `spabench suite generate out=DIR` with the manifest's seed rewrites tasks/ exactly,
    as a complete, loadable suite folder; run again, it replaces its own earlier output."""
    assert load_suite(TASKS, HARDWARE).manifest.seed == DEFAULT_SEED
    out = tmp_path / "out"
    assert generate(_generate_cfg(TASKS, out)) == 0
    assert "680 scenes" in capsys.readouterr().out
    assert _files(out) == _files(TASKS)  # same seed, another process and folder: the same bytes
    assert len(load_suite(out, HARDWARE).scenes) == 680
    assert generate(_generate_cfg(TASKS, out)) == 0 and _files(out) == _files(TASKS)


def test_generate_out_refuses_a_folder_it_did_not_write(tmp_path):
    """Measured on main: out= wrote into any folder and deleted the scene YAML files it found there."""
    out = tmp_path / "mine"
    notes = out / "relative_size" / "scenes" / "no_intervention.yaml"
    notes.parent.mkdir(parents=True)
    notes.write_text("my own notes\n")
    with pytest.raises(ConfigError, match="relative_size"):
        generate(_generate_cfg(TASKS, out))
    assert notes.read_text() == "my own notes\n" and [p.name for p in out.iterdir()] == ["relative_size"]


def test_generating_in_place_drops_scene_files_it_did_not_write(tmp_path):
    root = tmp_path / "tasks"
    shutil.copytree(TASKS, root)
    stale = root / "relative_size" / "scenes" / "no_intervention.yaml"
    stale.write_text("[]\n")
    assert generate(_generate_cfg(root)) == 0
    assert not stale.exists() and _files(root) == _files(TASKS)
