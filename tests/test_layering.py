"""profkit's layers, as README.md's table under "Where things are" declares them, held on every module.

The import checks read each module's source with ``ast`` and import nothing (the bench modules load
torch's CUDA parts). Every import counts: inside functions, relative, ``importlib.import_module("profkit.x")``,
and the facade: ``import profkit`` and ``from profkit import name`` import the facade and, for each
``profkit.name`` used, the module the facade takes ``name`` from.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PROFKIT = ROOT / "profkit"
README = ROOT / "README.md"

# Modules below the programs that still reach names through the facade, and why (remove when fixed).
FACADE_EXCEPTIONS: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]  # dotted; a package ('profkit.sources') holds every module under it
    packages: tuple[str, ...]
    may_import: tuple[str, ...]


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def layers(text: str | None = None) -> list[Layer]:
    """The rows of the README's layer table (columns: layer, modules, what, may import), lowest first."""
    section = (text if text is not None else README.read_text()).split("## Where things are", 1)[1]
    lines = section.split("\n## ", 1)[0].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and cells(line)[0] == "layer")
    out = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        name, where, _, may = cells(line)
        paths = re.findall(r"`([^`]+)`", where)
        out.append(Layer(name, tuple(dotted(p) for p in paths), tuple(dotted(p) for p in paths if p.endswith("/")),
                         tuple(m.strip() for m in may.split(",") if m.strip() not in ("", "-"))))
    return out


def dotted(path: str) -> str:
    """'outputs/atomic.py' -> 'profkit.outputs.atomic'; 'sources/' -> 'profkit.sources'; '__init__.py' -> 'profkit'."""
    parts = ["profkit", *path.strip("/").removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str, table: list[Layer]) -> str | None:
    """The layer holding ``module``: the longest module or package of the table that it is or lies in."""
    held = [(len(m), layer.name) for layer in table for m in layer.modules
            if module == m or (m in layer.packages and module.startswith(m + "."))]
    return max(held)[1] if held else None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def facade_names() -> dict[str, str]:
    """Name profkit's facade gives -> the module it comes from (its own imports, ``_LAZY``, ``_SUBMODULES``)."""
    tree = ast.parse((PROFKIT / "__init__.py").read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {alias.asname or alias.name: node.module for alias in node.names}
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "_LAZY":
                names |= ast.literal_eval(node.value)
            elif node.targets[0].id == "_SUBMODULES":
                names |= {name: f"profkit.{name}" for name in ast.literal_eval(node.value)}
    return names


FACADE = facade_names()


def through_facade(name: str) -> list[str]:
    """What ``profkit.name`` imports: a submodule, or the facade and the module it takes ``name`` from."""
    if is_module(f"profkit.{name}"):
        return [f"profkit.{name}"]
    return ["profkit", *([FACADE[name]] if name in FACADE else [])]


def imports(source: str, module: str, package: bool = False) -> list[tuple[int, str]]:
    """(line, profkit module) for every import in ``source``, the source of ``module``."""
    tree = ast.parse(source)
    here = module if package else module.rpartition(".")[0]
    found, facade = [], set()  # facade: local names bound to the profkit package itself
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node.lineno, alias.name))
                if alias.name == "profkit" or (alias.asname is None and alias.name.startswith("profkit.")):
                    facade.add(alias.asname or "profkit")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package holding ``module``
                parts = here.split(".")
                base = ".".join([*parts[:len(parts) - node.level + 1], *filter(None, [node.module])])
            for alias in node.names:
                if base == "profkit":
                    found += [(node.lineno, m) for m in through_facade(alias.name)]
                else:
                    sub = f"{base}.{alias.name}"
                    found.append((node.lineno, sub if is_module(sub) else base))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) in ("import_module", "__import__"))):
            found.append((node.lineno, node.args[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in facade:
            found += [(node.lineno, m) for m in through_facade(node.attr)]
    return [(line, name) for line, name in found if name == "profkit" or name.startswith("profkit.")]


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PROFKIT.rglob("*.py"))}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """The imports of the module at ``path``; the facade's also imports what its lazy tables name (line 0)."""
    found = imports(path.read_text(), module_name(path), path.name == "__init__.py")
    return found + [(0, m) for m in FACADE.values()] if path == PROFKIT / "__init__.py" else found


def test_the_table_lists_each_layer_once_after_the_layers_it_imports():
    table = layers()
    names = [layer.name for layer in table]
    assert len(set(names)) == len(names) >= 10, names
    for i, layer in enumerate(table):
        assert set(layer.may_import) <= set(names[:i]), f"{layer.name} may import a layer listed after it"
    held = [m for layer in table for m in layer.modules]
    assert len(set(held)) == len(held), held


def test_every_module_of_profkit_has_a_layer():
    table = layers()
    assert sorted(name for name in modules() if layer_of(name, table) is None) == []


def test_each_import_goes_down_the_table():
    table = layers()
    allowed = {layer.name: {layer.name, *layer.may_import} for layer in table}
    found = []
    for name, path in modules().items():
        mine = layer_of(name, table)
        for line, target in imports_of(path):
            if target == "profkit" and name in FACADE_EXCEPTIONS:
                continue
            theirs = layer_of(target, table)
            if theirs not in allowed[mine]:
                found.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {target} ({theirs})")
    assert found == [], "imports against README.md's layer table (Where things are)"


def test_each_facade_exception_still_imports_the_facade():
    stale = [name for name in FACADE_EXCEPTIONS
             if not is_module(name) or "profkit" not in {t for _, t in imports_of(modules()[name])}]
    assert stale == [], "remove these from FACADE_EXCEPTIONS"


def notebook_sources() -> dict[str, str]:
    """notebooks/NAME.ipynb -> its code cells, IPython's % and ! lines left out."""
    out = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells_ = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        lines = [line for c in cells_ for line in "".join(c["source"]).splitlines()
                 if not line.lstrip().startswith(("%", "!"))]
        out[path.relative_to(ROOT).as_posix()] = "\n".join(lines)
    return out


def private_owner(target: str) -> str | None:
    """The package a private module of ``target`` belongs to ('profkit.views' for 'profkit.views._style')."""
    parts = target.split(".")
    i = next((i for i, p in enumerate(parts) if p.startswith("_") and not p.endswith("__")), None)
    return ".".join(parts[:i]) if i else None


def test_a_private_module_is_imported_only_inside_its_package():
    found = []
    users = [(name, imports_of(path)) for name, path in modules().items()]
    users += [(where, imports(source, "notebook")) for where, source in notebook_sources().items()]
    for user, targets in users:
        for line, target in targets:
            owner = private_owner(target)
            if owner and not (user == owner or user.startswith(owner + ".")):
                found.append(f"{user}:{line} imports {target}")
    assert len(notebook_sources()) >= 7
    assert found == [], "use the package's public names"


@pytest.mark.parametrize("source,module,expected", [
    ("def f():\n    from profkit.views._style import DPI\n", "profkit.report._x", [(2, "profkit.views._style")]),
    ("import profkit\nprofkit.load('x')\n", "profkit.sources.x", [(1, "profkit"), (2, "profkit"), (2, "profkit.schema")]),
    ("from profkit import load, schema\n", "profkit.sources.x", [(1, "profkit"), (1, "profkit.schema"), (1, "profkit.schema")]),
    ("from ..analysis import _frames\n", "profkit.outputs.x", [(1, "profkit.analysis._frames")]),
    ("from . import atomic\n", "profkit.outputs", [(1, "profkit.outputs.atomic")]),
    ("import importlib\nimportlib.import_module('profkit.views')\n", "profkit.analysis.x", [(2, "profkit.views")]),
    ("import profkit.sources.env as env\nenv.x\n", "profkit.bench.x", [(1, "profkit.sources.env")]),
    ("import pandas\n", "profkit.analysis.x", []),
])
def test_imports_sees_each_way_of_importing(source, module, expected):
    assert sorted(imports(source, module, package=module == "profkit.outputs")) == sorted(expected)


def test_the_table_places_modules_by_the_longest_match():
    table = layers()
    assert [layer_of(m, table) for m in ("profkit.outputs.atomic", "profkit.outputs.engine_plans", "profkit",
                                         "profkit.sources.logs.grammar", "profkit.__main__", "profkit.nothing")] \
        == ["base", "outputs", "facade", "sources", "cli", None]


def bench_graph() -> dict[str, set[str]]:
    """profkit.bench module -> the profkit.bench modules it imports."""
    mods = {path.stem: path for path in (PROFKIT / "bench").glob("*.py")}
    return {name: {n.rpartition(".")[2] for _, n in imports_of(path) if n.startswith("profkit.bench.")} & mods.keys()
            for name, path in mods.items()}


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


def test_no_layer_before_views_imports_matplotlib():
    """Every module of the layers listed before views (the start-up shim sources/_bootstrap aside),
    imported in a fresh interpreter, leaves matplotlib unloaded."""
    table = layers()
    below = {layer.name for layer in table[:[layer.name for layer in table].index("views")]}
    names = [name for name in modules() if layer_of(name, table) in below and "._bootstrap" not in name]
    wanted = {"profkit.sources." + m for m in ("capture", "logs", "cache", "engines", "autocapture")} | {"profkit.catalog"}
    assert wanted | {"profkit.schema", "profkit.outputs.engine_plans", "profkit.analysis.verdict"} <= set(names)
    code = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
    assert "matplotlib" not in sys.modules, f"{name} imported matplotlib"
"""
    env = {k: v for k, v in os.environ.items() if k != "PROFKIT_CAPTURE"}  # the start-up shim stays idle
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
