"""The package's layout keeps itself: every import points down a layer and no folder imports another that imports
it back; every package path the docs name exists.

Layers, bottom first (a module may import its own layer and the ones below):

| layer | packages |
| --- | --- |
| 0 | ``xinference`` itself (errors, settings), ``xinference.hardware`` |
| 1 | ``xinference.model`` (the catalog) |
| 2 | ``xinference.engines`` (the engine contract, the matcher, the memory estimate, the adapters) |
| 3 | ``xinference.core`` (launch contract, supervisor, worker, model actor) |
| 4 | ``xinference.api`` (the gateway) and ``xinference.client`` (talks HTTP only) |
| 5 | ``xinference.cli`` and ``xinference.deploy`` (entry points) |

Imports inside functions count too: they are how a circle hides. ``TYPE_CHECKING`` imports are left out: they
never run.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xinference"

LAYERS: list[tuple[str, int]] = [
    ("xinference.hardware", 0),
    ("xinference.model", 1),
    ("xinference.engines", 2),
    ("xinference.core", 3),
    ("xinference.api", 4),
    ("xinference.client", 4),
    ("xinference.cli", 5),
    ("xinference.deploy", 5),
    ("xinference", 0),
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement but those under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in skipped]


def _edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def _layer(module: str) -> tuple[str, int]:
    return next((prefix, rank) for prefix, rank in LAYERS if module == prefix or module.startswith(prefix + "."))


def _folder(module: str) -> str:
    """The folder (package) a module lives in; a package's ``__init__`` is its own folder."""
    return module if (PACKAGE.parent / module.replace(".", "/") / "__init__.py").exists() else module.rsplit(".", 1)[0]


def test_every_import_points_down_a_layer() -> None:
    upward = []
    for source, targets in _edges().items():
        for target in targets:
            (_, low), (_, high) = _layer(source), _layer(target)
            if high > low:
                upward.append(f"{source} -> {target}")
    assert sorted(upward) == [], "imports that run up a layer"


def test_no_folder_imports_a_folder_that_imports_it_back() -> None:
    """Folders (packages) form no circle: a subpackage may import its parents' modules (they are below it by
    construction: contracts and shared helpers), never the other way round through a chain."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, targets in _edges().items():
        for target in targets:
            a, b = _folder(source), _folder(target)
            if a != b and not a.startswith(b + "."):  # importing from an enclosing package is looking down
                graph[a].add(b)
    circles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert circles == [], "folders that import each other"


def test_no_module_imports_one_that_imports_it_back() -> None:
    """No circle of modules at all (a circle inside one folder is one too: it is how the supervisor and the worker
    once imported each other's classes for their actor uids)."""
    edges = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert circles == []


def test_every_package_path_the_docs_name_exists() -> None:
    """``xinference/...`` paths and ``core/x.py``-style paths in README.md and doc/*.md name real files or
    folders (a moved file leaves the docs wrong otherwise)."""
    pattern = re.compile(r"`(?:xinference/)?((?:api|core|engines|model|hardware|client|cli|deploy|ui)/[\w/.{},-]*)`")
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "doc").glob("*.md"))]:
        for match in pattern.finditer(doc.read_text(encoding="utf-8")):
            for path in _expand(match.group(1)):
                if not (PACKAGE / path.rstrip("/")).exists():
                    missing.append(f"{doc.name}: {match.group(0)}")
    assert missing == []


def _expand(path: str) -> list[str]:
    """``api/openai/{chat,rerank}.py`` -> both paths; a path without braces as it is."""
    match = re.search(r"\{([^}]*)\}", path)
    if match is None:
        return [path]
    return [
        out
        for choice in match.group(1).split(",")
        for out in _expand(path[: match.start()] + choice + path[match.end() :])
    ]
