"""The source tree read by its imports (pure ``ast``, nothing imported): no import circle
among the project's modules nor among its packages (launcher <-> analysis included), a run
loop that imports no analysis module, and no source module over 400 lines.

Every ``import`` / ``from`` statement counts, at any depth: module level, inside a
function, under ``if TYPE_CHECKING:``. An edge goes to the most specific project module
the statement names (``from launcher.store import rundir`` -> ``launcher.store.rundir``;
``from launcher.store.rundir import RunDir`` -> ``launcher.store.rundir``); imports of other
distributions are not part of the graph. A string that names a module (a config's hook
path, ``runpy.run_module("analysis")``) is not an import and no edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent_api", "agents", "envs", "launcher", "analysis", "conf", "hydra_plugins")
MAX_LINES = 400
# The run loop's entry points: `python -m launcher` and the Python API's `run`.
RUN_LOOP_ROOTS = ("launcher.__main__", "launcher.loop.run")
# The old `python -m launcher.<x>` spellings of `python -m analysis ...` (docs/launcher.md):
# they run analysis by name, and the run loop must not import them.
ANALYSIS_SHIMS = ("launcher.report", "launcher.paper_curves")


def module_files(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file of ``packages``."""
    out: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _named(
    node: ast.AST, module: str, is_package: bool, known: set[str]
) -> Iterator[tuple[str, int]]:
    """The project modules one import statement names, with its line."""
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join([*here, base] if base else here)
        candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        # `from pkg import sub` names the submodule; `from pkg import name` the package.
        subs = [c for c in candidates[:-1] if c in known]
        candidates = subs or [base]
    else:
        return
    for name in candidates:
        # The most specific project module the dotted name holds (`a.b.C` -> `a.b`).
        parts = name.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts:
            yield ".".join(parts), node.lineno


def import_graph(files: dict[str, Path] | None = None) -> dict[str, dict[str, int]]:
    """Module -> {imported project module: the line of its first import statement}, over
    ``files`` (default: :func:`module_files`)."""
    files = module_files() if files is None else files
    known = set(files)
    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges: dict[str, int] = {}
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target, line in _named(node, module, is_package, known):
                if target != module:
                    edges.setdefault(target, line)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, {}))))
    return None


def describe(
    cycle: list[str], graph: dict[str, dict[str, int]], files: dict[str, Path], root: Path = ROOT
) -> str:
    """``a (a.py:12) -> b (b.py:40) -> a``: each step with the line that imports the next."""
    steps = []
    for a, b in zip(cycle, cycle[1:], strict=False):
        where = f"{files[a].relative_to(root)}:{graph[a][b]}"
        steps.append(f"{a} ({where})")
    return " -> ".join([*steps, cycle[-1]])


def reachable(graph: dict[str, dict[str, int]], roots: tuple[str, ...]) -> dict[str, str | None]:
    """Module -> the module that first imported it (None for a root), over everything
    ``roots`` reach."""
    parent: dict[str, str | None] = {r: None for r in roots}
    todo = list(roots)
    while todo:
        module = todo.pop()
        for target in sorted(graph.get(module, {})):
            if target not in parent:
                parent[target] = module
                todo.append(target)
    return parent


def test_the_graph_sees_every_kind_of_import_statement(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import c\n")  # relative, a submodule
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"  # not a project module: no edge
        "if TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (pkg / "b.py").write_text("def f():\n    import pkg.sub.c\n")  # function-level
    (pkg / "sub" / "c.py").write_text("from pkg import a\nfrom ..b import f\n")
    files = module_files(tmp_path, ("pkg",))
    graph = import_graph(files)
    assert graph == {
        "pkg": {},
        "pkg.a": {"pkg.b": 4},
        "pkg.b": {"pkg.sub.c": 2},
        "pkg.sub": {"pkg.sub.c": 1},
        "pkg.sub.c": {"pkg.a": 1, "pkg.b": 2},
    }
    cycle = find_cycle(graph)
    assert cycle == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]
    text = describe(cycle, graph, files, tmp_path)
    assert text == "pkg.a (pkg/a.py:4) -> pkg.b (pkg/b.py:2) -> pkg.sub.c (pkg/sub/c.py:1) -> pkg.a"


def test_no_import_circles():
    graph, files = import_graph(), module_files()
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + describe(cycle, graph, files)


def test_the_run_loop_imports_no_analysis_module():
    graph = import_graph()
    parent = reachable(graph, RUN_LOOP_ROOTS)
    assert "launcher.loop.chunks" in parent and "launcher.logger.loggers" in parent  # walks
    # analysis modules, and the entry points that are only there to call them
    leaks = sorted(m for m in parent if m.split(".")[0] == "analysis" or m in ANALYSIS_SHIMS)
    chains = []
    for module in leaks:
        chain = [module]
        while parent[chain[-1]] is not None:
            chain.append(parent[chain[-1]])
        chains.append(" <- ".join(chain))
    assert not leaks, "the run loop imports analysis:\n" + "\n".join(chains)


def package_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The module graph with each module counted as its top-level package: package ->
    {imported package: a line of one import statement}; a package's imports of itself
    are not edges."""
    out: dict[str, dict[str, int]] = {}
    for module, edges in graph.items():
        package = module.split(".")[0]
        targets = out.setdefault(package, {})
        for target, line in edges.items():
            if target.split(".")[0] != package:
                targets.setdefault(target.split(".")[0], line)
    return out


def test_no_package_cycle():
    """launcher and analysis in particular: analysis reads runs through the launcher's run
    directory module, and the launcher reaches analysis only by name (the callbacks'
    default hooks, ``python -m launcher.report``'s runpy), never by an import."""
    graph = import_graph()
    packages = package_graph(graph)
    assert "launcher" in packages["analysis"]  # the walk sees analysis -> launcher
    assert "analysis" not in packages["launcher"], packages["launcher"]
    cycle = find_cycle(packages)
    assert cycle is None, "package cycle: " + " -> ".join(cycle)


def test_no_source_module_is_over_400_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in module_files().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"
