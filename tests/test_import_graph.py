"""The package's import graph points one way: no import cycle, at import time or behind a deferred import.

Every module of the package is parsed with `ast`; each import of one of our modules becomes an edge, module
level (run at import) or function-local (run when the function is called). Imports under `if TYPE_CHECKING:`
never run (they name types for annotations) and are left out. A cycle of module-level imports fails at
import time in some order; one closed by a function-local import only works because the import is
deferred, and hides a dependency that points the wrong way. Function-local imports stay for optional
extras (third-party modules) and for heavy modules a command loads only when it needs them, as long as
they close no cycle; a function-local import of one of our modules says which with a trailing comment
(`# lazy: optional extra`, `# lazy: start-up`, `# lazy: cycle <which>`).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "deepresearch"


def modules() -> dict[str, Path]:
    """Module name -> file, for every module the package installs (pyproject's package list)."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        name: ROOT / (name.removeprefix(PACKAGE).lstrip(".").replace(".", "/") + ".py")
        for name in settings.get("py-modules", [])
    }
    for package in settings["packages"]:
        folder = ROOT / package.removeprefix(PACKAGE).lstrip(".").replace(".", "/")
        for path in folder.glob("*.py"):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, bool, int]]:
    """(imported module of ours, whether function-local, line) for each import in `path`."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    out: list[tuple[str, bool, int]] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:  # relative: from the package, up level - 1
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
        # `from a.b import c` imports the module a.b.c when there is one, else names of a.b
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other, local)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.extend((t, local, child.lineno) for t in targets(child) if t in known)
            visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return out


def graph() -> dict[str, list[tuple[str, bool, int]]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in sorted(found.items())}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return out


def test_the_graph_sees_the_modules_and_both_kinds_of_import():
    g = graph()
    assert len(g) > 100 and f"{PACKAGE}.programs.research.program" in g and f"{PACKAGE}.cli" in g
    assert any(not local for edges in g.values() for _, local, _ in edges)
    assert any(local for edges in g.values() for _, local, _ in edges)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_among_module_level_imports():
    edges: dict[str, set[str]] = defaultdict(set)
    for name, found in graph().items():
        edges[name].update(t for t, local, _ in found if not local)
    assert cycles(edges) == []


def test_no_function_local_import_of_our_own_modules_closes_a_cycle():
    g = graph()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, found in g.items():
        edges[name].update(t for t, _, _ in found)
    closing = []
    for component in cycles(edges):
        members = set(component)
        closing += [
            f"{name}:{line} imports {target} inside a function"
            for name in component
            for target, local, line in g[name]
            if local and target in members
        ]
    assert closing == [], "deferred imports that hide an import cycle:\n" + "\n".join(closing)


def test_the_finish_never_imports_the_program():
    """The end of a run (finish.py) reads the run's context only: nothing it imports, directly or through
    other modules, at import or inside a function, leads back to the program."""
    g = graph()
    finish, program = f"{PACKAGE}.programs.research.finish", f"{PACKAGE}.programs.research.program"
    assert finish in g
    seen, todo = set(), [finish]
    while todo:
        name = todo.pop()
        for target, _, _ in g.get(name, ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    assert program not in seen
    assert finish in {t for t, _, _ in g[program]}  # the program calls the finish, not the other way round


LAZY_REASONS = ("optional extra", "start-up", "cycle ")


def unexplained_local_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each function-local import of one of our modules in `source` whose statement
    carries no `# lazy: <reason>` comment."""
    lines = source.splitlines()
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if local and isinstance(child, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in child.names] if isinstance(child, ast.Import) else [child.module or ""]
                if getattr(child, "level", 0) or any(n == PACKAGE or n.startswith(PACKAGE + ".") for n in names):
                    reason = " ".join(lines[child.lineno - 1 : child.end_lineno]).partition("# lazy: ")[2]
                    if not reason.startswith(LAZY_REASONS):
                        out.append((child.lineno, ", ".join(names)))
            visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source), False)
    return out


def test_function_local_imports_of_our_modules_say_why():
    """A function-local import of our own code is the exception: it keeps an optional extra or a command's
    start-up light, or breaks a cycle, and says which (`# lazy: optional extra`, `# lazy: start-up`,
    `# lazy: cycle <which>`); every other import of ours stands at the top of its module."""
    sample = (
        "import json\n"
        "from deepresearch.programs import config\n"
        "def f():\n"
        "    import os\n"
        "    from deepresearch.eval import f1\n"
        "    from deepresearch.programs.lm.models import make_lm  # lazy: start-up\n"
        "    from deepresearch.retrievers.hf import (  # lazy: optional extra\n"
        "        load_hf_corpus,\n"
        "    )\n"
        "    from deepresearch.eval import judges  # lazy: because\n"
    )
    assert unexplained_local_imports(sample) == [(5, "deepresearch.eval"), (10, "deepresearch.eval")]
    unexplained = [
        f"{name}:{line} imports {module}"
        for name, path in sorted(modules().items())
        for line, module in unexplained_local_imports(path.read_text(encoding="utf-8"))
    ]
    assert unexplained == [], "function-local imports of our modules without `# lazy: <reason>`:\n" + "\n".join(
        unexplained
    )


def test_nothing_below_the_command_line_imports_it():
    """The command line sits on top: no module outside `deepresearch.cli` imports it, at import or inside a
    function (a library module that needs an LM session or a retriever opens it through
    `programs.lm.session` and `programs.retrieval`, not through a command's module)."""
    cli = f"{PACKAGE}.cli"
    upward = [
        f"{name}:{line} imports {target}{' inside a function' if local else ''}"
        for name, found in graph().items()
        if name != cli and not name.startswith(cli + ".")
        for target, local, line in found
        if target == cli or target.startswith(cli + ".")
    ]
    assert upward == [], "modules below the command line that import it:\n" + "\n".join(upward)
