"""Every spabench name a benchmark imports exists: the benchmarks run only by hand (`make bench`), so a
moved module broke one silently (console_loop.py kept importing ConsoleConfig from a module it had
left). Checked statically, imports inside functions too."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


def _spabench_imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module, name or None, line) of every `import spabench...` / `from spabench... import name`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "spabench":
            found += [(node.module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names
                      if alias.name.split(".")[0] == "spabench"]
    return found


def test_there_are_benchmarks_that_import_spabench():
    assert len(BENCHMARKS) >= 10
    assert sum(bool(_spabench_imports(p)) for p in BENCHMARKS) >= 8


# spabench modules that import LeRobot when imported (the twin is a LeRobot Robot)
LEROBOT_MODULES = ("spabench.sim", "spabench.bench.cameras", "spabench.bench.so101",
                   "spabench.policy.lerobot_grpc_client", "spabench.record.export", "spabench.serve.lerobot_policy")


def _param(path: Path):
    needs = any(m.startswith(LEROBOT_MODULES) for m, _, _ in _spabench_imports(path))
    return pytest.param(path, id=path.name, marks=[pytest.mark.bench] if needs else [])


@pytest.mark.parametrize("path", [_param(p) for p in BENCHMARKS])
def test_every_spabench_import_resolves(path):
    missing = []
    for module, name, line in _spabench_imports(path):
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{path.name}:{line}: import {module} ({exc})")
            continue
        if name is not None and not hasattr(loaded, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{path.name}:{line}: {module} has no {name}")
    assert not missing, "\n".join(missing)
