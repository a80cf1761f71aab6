"""Import circles among ttlab's modules, read from the source (nothing is imported).

Two graphs over `src/ttlab`: `top` holds the imports a module runs when it is imported (module level, outside
`if TYPE_CHECKING:`), `all` also the imports inside functions, which is where a circle hides when it is
broken by deferring one side. A cycle in `all` is a knot in the design even when the interpreter never trips
on it. Run as a script to list every cycle of the whole package:

    python tests/test_import_cycles.py   # cycles in `all`, then in `top`; imports inside functions per system
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_names(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under src/ttlab (a package is its __init__.py)."""
    out = {}
    for path in sorted((src / "ttlab").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported ttlab module, at module level?) for every import statement of one file."""
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, bool]] = []

    def resolve(base: str, alias: str | None) -> str | None:
        if alias is not None and f"{base}.{alias}" in modules:
            return f"{base}.{alias}"
        while base and base not in modules:  # `import ttlab.x.y` where y is an attribute
            base = base.rpartition(".")[0]
        return base or None

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                out.extend((t, top) for a in child.names if (t := resolve(a.name, None)))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    pkg = name if is_pkg else name.rpartition(".")[0]
                    for _ in range(child.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{child.module}" if child.module else pkg
                else:
                    base = child.module or ""
                if base.split(".")[0] == "ttlab":
                    out.extend((t, top) for a in child.names if (t := resolve(base, a.name)))
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), True)
    return [(t, top) for t, top in out if t != name and t.startswith("ttlab")]


def import_graph(prefix: str = "ttlab", top_only: bool = False, src: Path = SRC) -> dict[str, set[str]]:
    """module -> the modules it imports, both under `prefix`."""
    modules = module_names(src)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name == prefix or name.startswith(prefix + "."):
            graph[name] = {t for t, top in imports_of(name, path, modules)
                           if (top or not top_only) and (t == prefix or t.startswith(prefix + "."))}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
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

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def test_cycles_finds_a_circle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "ttlab" / "x"
    pkg.mkdir(parents=True)
    (tmp_path / "ttlab" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from ttlab.x.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from ttlab.x import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert cycles(import_graph("ttlab.x", src=tmp_path)) == [["ttlab.x.a", "ttlab.x.b"]]
    assert cycles(import_graph("ttlab.x", top_only=True, src=tmp_path)) == []  # invisible at module level


def test_discover_has_no_import_cycles_even_through_imports_inside_functions():
    assert cycles(import_graph("ttlab.discover")) == []


def test_the_whole_package_has_no_import_cycles():
    assert cycles(import_graph("ttlab")) == []


DEFERRED_ON_PURPOSE = {("ttlab.discover.cli", "ttlab.discover.llm.trainer"),
                       ("ttlab.discover.cli", "ttlab.discover.llm.warmstart")}
"""(importer, imported) pairs of ttlab modules imported inside a function, each with a comment saying why."""


def test_discover_imports_its_own_modules_at_the_top_of_the_file():
    modules = module_names()
    inside = {(n, t) for n, p in modules.items() if n.startswith("ttlab.discover")
              for t, top in imports_of(n, p, modules) if not top}
    assert inside <= DEFERRED_ON_PURPOSE, sorted(inside - DEFERRED_ON_PURPOSE)


def test_drive_and_worldmodel_import_their_own_modules_at_the_top_of_the_file():
    modules = module_names()
    inside = {(n, t) for n, p in modules.items() if n.startswith(("ttlab.drive", "ttlab.worldmodel"))
              for t, top in imports_of(n, p, modules) if not top}
    assert inside == set(), sorted(inside)


def deferrals_without_a_reason(src: Path = SRC) -> list[str]:
    """`file:line` of every import inside a function with no comment on its line or on the comment/import lines
    right above it (a block of deferred imports shares one comment)."""
    out = []
    for path in sorted((src / "ttlab").rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text, str(path))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    i = node.lineno - 1
                    block = [lines[i]]
                    while i > 0 and lines[i - 1].strip().startswith(("import ", "from ", "#")):
                        i -= 1
                        block.append(lines[i])
                    if not any("#" in line for line in block):
                        out.append(f"{path.relative_to(src)}:{node.lineno}")
    return sorted(set(out))


def test_every_import_inside_a_function_says_why_it_is_deferred(tmp_path):
    assert deferrals_without_a_reason() == []
    (tmp_path / "ttlab").mkdir()
    (tmp_path / "ttlab" / "m.py").write_text("def f():\n    import json\n\n\ndef g():\n    import av  # optional\n")
    assert deferrals_without_a_reason(tmp_path) == ["ttlab/m.py:2"]


if __name__ == "__main__":
    for label, top_only in (("all imports", False), ("module-level imports", True)):
        found = cycles(import_graph("ttlab", top_only=top_only))
        print(f"{label}: {len(found)} cycle(s)")
        for comp in found:
            print("  " + " <-> ".join(comp))
    modules = module_names()
    for system in ("ttlab.common", "ttlab.drive", "ttlab.discover", "ttlab.worldmodel"):
        edges = [top for n, p in modules.items() if n.startswith(system) for _, top in imports_of(n, p, modules)]
        print(f"{system}: {len(edges)} ttlab imports, {edges.count(False)} inside functions")
