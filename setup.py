"""The build step that puts the repository's data into the package (everything else is in pyproject.toml).

A command reads conf/, tasks/, hardware/ and policies/ at run time; they stay at the repository's
top level and are copied into the built package as spabench/_data/<folder>/, where
`spabench.paths.repo_root` finds them in an installed wheel. The sdist carries the folders
themselves (MANIFEST.in), so a wheel built from it is the same. An editable installation copies
nothing: it reads the checkout's folders directly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _paths_module():
    """src/spabench/paths.py on its own (it imports only the standard library): the names below are its."""
    spec = importlib.util.spec_from_file_location("_spabench_paths", HERE / "src" / "spabench" / "paths.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PATHS = _paths_module()
DATA_FOLDERS: tuple[str, ...] = _PATHS.DATA_FOLDERS   # conf, tasks, hardware, policies
PACKAGE_DATA: str = _PATHS.PACKAGE_DATA               # their folder in the package: _data
SKIPPED = ("__pycache__", ".DS_Store")


def data_files() -> list[Path]:
    """Every file of the data folders, relative to the repository (byte-compiled leftovers skipped)."""
    files = []
    for folder in DATA_FOLDERS:
        for path in sorted((HERE / folder).rglob("*")):
            if path.is_file() and not any(part in SKIPPED for part in path.parts) and path.suffix != ".pyc":
                files.append(path.relative_to(HERE))
    return files


class BuildWithData(build_py):
    """build_py, plus the data folders copied into spabench/_data/ of the build."""

    def _data_targets(self) -> list[tuple[Path, Path]]:
        if getattr(self, "editable_mode", False):
            return []
        target = Path(self.build_lib) / "spabench" / PACKAGE_DATA
        return [(HERE / rel, target / rel) for rel in data_files()]

    def run(self) -> None:
        super().run()
        for source, target in self._data_targets():
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), *(str(t) for _, t in self._data_targets())]


setup(cmdclass={"build_py": BuildWithData})
