"""The seeded generator: byte-for-byte reproducible, seed-sensitive, and its output is a sound suite."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from spabench.config import SpabenchConfig
from spabench.suite import check_suite, load_suite
from spabench.suite.commands import generate
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


def test_committed_scenes_are_the_generate_commands_output_for_the_committed_seed(tmp_path, capsys):
    """Byte-for-byte: `spabench suite generate out=DIR` with the manifest's seed rewrites tasks/ exactly;
    it also writes a complete, loadable suite folder and drops scene files it did not write."""
    assert load_suite(TASKS, HARDWARE).manifest.seed == DEFAULT_SEED
    out = tmp_path / "out"
    stale = out / "relative_size" / "scenes" / "no_intervention.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("[]\n")
    cfg = SpabenchConfig.from_mapping({"suite": {"root": str(TASKS), "hardware": str(HARDWARE), "seed": DEFAULT_SEED},
                            "out": str(out)}, groups=("suite",))
    assert generate(cfg) == 0
    assert "680 scenes" in capsys.readouterr().out
    assert not stale.exists()
    assert _files(out) == _files(TASKS)  # same seed, another process and folder: the same bytes
    assert len(load_suite(out, HARDWARE).scenes) == 680
