"""The package import graph of src/spabench has no cycles, `bench` imports nothing from `sim`, and the
twin (`sim`) imports nothing from the scripted stand-in policy (`standins`).

Every import counts, also the lazy ones inside functions: a lazy import is still a dependency, and
the cycles this guards against (bench.bench -> sim.bench -> bench.bench) were all lazy ones. Only
imports under `if TYPE_CHECKING:` (annotations, never executed) are left out. Module names written
as strings ("spabench.sim.bench_config", "spabench.plan.commands:plan": the command table and the
config's registries, imported by name at run time) count as imports too. A unit is a
subpackage of spabench (bench, sim, ...) or a top-level module (spabench.config, spabench.paths).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "spabench"
# "spabench.x.y" (a module named for a registry) or "spabench.x:attr" (a command target); a bare
# "spabench.x" is a logger name, not an import
NAMED = re.compile(r"^spabench(\.[a-z_0-9]+){2,}(:[A-Za-z_][A-Za-z_0-9]*)?$|^spabench\.[a-z_0-9]+:[A-Za-z_][A-Za-z_0-9]*$")


def _unit(module: str) -> str:
    """spabench.bench.config -> bench; spabench.paths -> paths (top-level modules are their own unit)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "spabench"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_edges() -> dict[str, dict[str, list[str]]]:
    """unit -> imported unit -> ["module:line", ...] (where the import is written)."""
    edges: dict[str, dict[str, list[str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        here = _unit(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block)
                       for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAMED.match(node.value):
                targets = [node.value.partition(":")[0]]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
            for target in targets:
                if target.split(".")[0] != "spabench" or target == "spabench":
                    continue
                there = _unit(target)
                if there == here or not ((SRC / there).is_dir() or (SRC / f"{there}.py").is_file()):
                    continue
                where = edges.setdefault(here, {}).setdefault(there, [])
                if f"{module}:{node.lineno}" not in where:
                    where.append(f"{module}:{node.lineno}")
    return edges


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def cycles(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for e in edges.values() for w in e}):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_packages():
    edges = import_edges()
    found = cycles(edges)
    detail = []
    for comp in found:
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    detail.append(f"{a} -> {b} at {', '.join(edges[a][b][:3])}")
    assert not found, "import cycles between packages:\n" + "\n".join(detail)


def test_bench_imports_nothing_from_sim():
    assert "sim" not in import_edges().get("bench", {}), import_edges()["bench"]["sim"]


def test_the_twin_imports_nothing_from_the_standins():
    """The twin is the bench's simulator; the scripted stand-in is a policy that drives it from outside."""
    edges = import_edges()
    assert "standins" not in edges.get("sim", {}), edges["sim"]["standins"]
    assert "standins" in edges.get("demo", {}) and "standins" in edges.get("cli", {})   # the walker sees both


def test_the_walker_sees_lazy_imports():
    """A cycle written only through a function-level import is found (the walker is not blind to it)."""
    edges = {"a": {"b": ["a.x:3"]}, "b": {"a": ["b.y:9"]}, "c": {"a": ["c:1"]}}
    assert cycles(edges) == [["a", "b"]]
    assert "rollout" in import_edges().get("cli", {}) or "rollout" in import_edges().get("demo", {})
