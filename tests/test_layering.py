"""The data flows one way (sources -> schema -> analysis -> views -> report and cli), and the bench modules form no circle.

The import checks read each module's source with ``ast`` and import nothing (the bench modules load
torch's CUDA parts); an import inside a function counts, so a circle cannot hide in one.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PROFKIT = ROOT / "profkit"

# layer -> the profkit packages it must never import
NEVER = {
    "sources": ("analysis", "views", "outputs", "report", "cli"),
    "analysis": ("sources", "views", "outputs", "report", "cli"),
    "views": ("sources", "outputs", "report", "cli"),
    "report": ("cli",),
}


def imports(path: Path) -> set[str]:
    """The modules ``path`` imports anywhere in it: ``from m import x`` counts as m.x when x is a module, else m."""
    package = path.relative_to(ROOT).parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module
            if node.level:  # relative: from the package holding ``path``
                base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
            names |= {f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base for alias in node.names}
    return names


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_each_layer_imports_only_the_layers_before_it():
    found = set()
    for layer, banned in NEVER.items():
        for path in sorted((PROFKIT / layer).rglob("*.py")):
            found |= {(path.relative_to(PROFKIT).as_posix(), name) for name in imports(path)
                      if any(name == f"profkit.{b}" or name.startswith(f"profkit.{b}.") for b in banned)}
    assert sorted(found) == [], "imports against the one-way flow (see README.md, Where things are)"


def bench_graph() -> dict[str, set[str]]:
    """profkit.bench module -> the profkit.bench modules it imports."""
    modules = {path.stem: path for path in (PROFKIT / "bench").glob("*.py")}
    return {name: {n.rpartition(".")[2] for n in imports(path) if n.startswith("profkit.bench.")} & modules.keys()
            for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of ``graph`` as [a, b, ..., a]; empty when there is none."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if cycle := visit(nxt):
                return cycle
        path.pop()
        done.add(node)
        return []

    return next((cycle for node in sorted(graph) if (cycle := visit(node))), [])


def test_the_bench_modules_import_each_other_without_a_circle():
    graph = bench_graph()
    assert {"step", "verify", "policy_study", "contexts"} <= graph.keys()
    assert find_cycle(graph) == [], f"import circle: {' -> '.join(find_cycle(graph))}"


@pytest.mark.parametrize("graph,cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"a"}}, ["a", "a"]),
])
def test_find_cycle_names_the_circle(graph, cycle):
    assert find_cycle(graph) == cycle


def test_sources_and_analysis_never_import_matplotlib():
    """Every module of profkit.sources and profkit.analysis (walked with pkgutil, so packages such as
    sources/logs/ count), imported in a fresh interpreter, leaves matplotlib unloaded."""
    code = """
import importlib, pkgutil, sys
import profkit.analysis, profkit.sources
names = [m.name for pkg in (profkit.sources, profkit.analysis)
         for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".") if "._bootstrap" not in m.name]
for name in names:
    importlib.import_module(name)
    assert "matplotlib" not in sys.modules, f"{name} imported matplotlib"
wanted = {"profkit.sources." + m for m in ("capture", "logs", "cache", "engines", "autocapture", "datadir")}
assert wanted <= set(names), sorted(wanted - set(names))
print(len(names))
"""
    env = {k: v for k, v in os.environ.items() if k != "PROFKIT_CAPTURE"}  # the start-up shim stays idle
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 35  # every module, not a few
