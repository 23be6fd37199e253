"""The import graph of the ``loopnest`` package, read from the source with ``ast``: imports
at module top level and inside functions both count, so a circle cannot hide behind a lazy
import.

What ``import te, loopnest, codegen`` loads is asserted (not the isl analysis, which the
transforms load on first use); how long it takes is measured by hand, not asserted here (no
wall-time assertions in tests).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import loopnest

PACKAGE_DIR = Path(loopnest.__file__).parent

# Import edges allowed to close a circle (none: loopnest.printer names the statement classes
# only for type checking, so stmt.py can import it for Stmt.__str__).
KNOWN_LAZY_EDGES: set = set()


def _module_files(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package ``__init__``) for every module of the package."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = (package_dir.name,) + path.relative_to(package_dir).with_suffix("").parts
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _imported(module: str, is_pkg: bool, node: ast.AST, modules) -> list[str]:
    """The modules of the package that one import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module if is_pkg else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        names = [base] + [f"{base}.{a.name}" for a in node.names]
    return [n for n in names if n in modules]


def _is_type_checking_block(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``: imports that only type checkers run."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def import_graph(package_dir: Path = PACKAGE_DIR) -> tuple[dict[str, set[str]], list]:
    """(module -> the modules of the package it imports at run time, [(module, imported, line)]
    of the imports made inside functions). Imports under ``if TYPE_CHECKING:`` do not count."""
    modules = _module_files(package_dir)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    lazy = []
    for m, (path, is_pkg) in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        top = {id(n) for n in tree.body}
        typing_only = {id(x) for node in tree.body if _is_type_checking_block(node) for x in ast.walk(node)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in typing_only:
                continue
            for target in _imported(m, is_pkg, node, modules):
                if target == m:
                    continue
                graph[m].add(target)
                if id(node) not in top:
                    lazy.append((m, target, node.lineno))
    return graph, lazy


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that starts and ends at the same module, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_find_cycle_reports_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_imports_inside_functions(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from .sub import b\n\ndef f():\n    return b.g()\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def g():\n    from ..a import f\n    return f\n")
    graph, lazy = import_graph(pkg)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub", "pkg.sub.b"}, "pkg.sub": set(), "pkg.sub.b": {"pkg.a"}}
    assert lazy == [("pkg.sub.b", "pkg.a", 2)]
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_loopnest_import_graph_has_no_cycle():
    graph, _ = import_graph()
    for m, target in KNOWN_LAZY_EDGES:
        graph[m].discard(target)
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_facade_is_above_the_transforms():
    graph, _ = import_graph()
    importers = sorted(m for m, targets in graph.items() if "loopnest.nest" in targets)
    assert importers == ["loopnest"]
    transforms = {m for m in graph
                  if m.startswith("loopnest.transforms.") and not m.endswith(("._rewrite", "._concurrent"))}
    assert transforms <= graph["loopnest.nest"]


def test_the_scheduling_layer_defers_only_the_analysis():
    _, lazy = import_graph()
    layer = {"loopnest.nest", "loopnest.state", "loopnest.loop", "loopnest.history",
             "loopnest.vectorize_lowering", "loopnest.lazy_analysis"}
    deferred = [(m, t) for m, t, _ in lazy if m in layer or m.startswith("loopnest.transforms")]
    assert deferred and all(m == "loopnest.lazy_analysis" and t.startswith("loopnest.analysis")
                            for m, t in deferred), deferred


def test_a_fresh_interpreter_imports_without_the_isl_analysis():
    code = ("import sys, te, loopnest, codegen; from loopnest.nest import Loop, LoopNest; "
            "print(sorted(m for m in sys.modules if m == 'islpy' or m.startswith('loopnest.analysis')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
