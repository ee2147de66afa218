"""Dependencies point one way (docs/ARCHITECTURE.md, "Layers"). Each module of the package sits in a
layer; it may import from lower layers and from its own package, never from a higher layer or a
sibling package of its own layer, and no packages or modules import each other in a circle. Imports
inside functions count too: a lazy import is still a dependency. The layer order is written once,
in the table of docs/ARCHITECTURE.md, and read from there."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import trilemma

PACKAGE = Path(trilemma.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"


def _layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The modules of each layer, lowest first, from the table between the ``layers`` markers."""
    block = text.split("<!-- layers:", 1)[1].split("<!-- /layers -->", 1)[0]
    rows = [line.split("|") for line in block.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    assert [int(r[1]) for r in rows] == list(range(len(rows))), "layers numbered 0, 1, 2, ..."
    return tuple(tuple(re.findall(r"`(trilemma[\w.]*)`", r[2])) for r in rows)


#: lowest first; a module belongs to the longest prefix listed
LAYERS = _layers(ARCHITECTURE.read_text(encoding="utf-8"))

#: edges allowed against the layers, each with its reason: none (the web app sits below the CLI
#: and calls the library; the CLI's serve command imports it downward)
ALLOWED: set[tuple[str, str]] = set()


def _home(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> tuple[int, str] | None:
    """(layer index, the prefix that placed it) for a trilemma module."""
    best = None
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (
                best is None or len(p) > len(best[1])
            ):
                best = (i, p)
    return best


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = ("trilemma",) + path.relative_to(package).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (annotations only: no dependency at run time)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(path: Path) -> set[str]:
    """Every trilemma name ``path`` imports at run time: the module, and for ``from m import x`` also
    ``m.x`` (``from trilemma import api`` imports the module trilemma.api)."""
    out = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("trilemma.")}


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _targets(path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules ``path`` imports at run time. ``from trilemma.probe import machine`` is
    an import of trilemma.probe.machine; of the package itself only when a name imported is not one
    of its modules (a package's ``__init__`` runs before its modules anyway)."""
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & mods.keys()
            out |= subs if len(subs) == len(node.names) else subs | {node.module}
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in mods}


def _edges(package: Path = PACKAGE) -> Iterator[tuple[str, str]]:
    """(importer, imported module) for every import between two modules of the package, less the
    ALLOWED ones."""
    mods = _modules(package)
    for src, path in mods.items():
        for target in sorted(_targets(path, mods) - {src}):
            if (src, target) not in ALLOWED:
                yield src, target


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graph(edges: list[tuple[str, str]], depth: int | None) -> dict[str, set[str]]:
    """The edges between modules cut to their first ``depth`` name parts (None: whole modules)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        a, b = (".".join(x.split(".")[:depth]) if depth else x for x in (a, b))
        if a != b:
            graph.setdefault(a, set()).add(b)
    return graph


def _cycle_report(graph: dict[str, set[str]], edges: list[tuple[str, str]]) -> str:
    lines = []
    for comp in _cycles(graph):
        lines.append(" ↔ ".join(comp))
        inside = [f"    {a} imports {b}" for a, b in edges if _in(a, comp) and _in(b, comp)]
        lines.extend(sorted(set(inside)))
    return "\n".join(lines)


def _in(module: str, comp: list[str]) -> bool:
    return any(module == c or module.startswith(c + ".") for c in comp)


def test_every_module_has_a_layer():
    missing = [m for m in _modules() if _home(m) is None and m != "trilemma"]
    assert not missing, f"place these in docs/ARCHITECTURE.md's layer table: {missing}"


def test_no_upward_import():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _module_name(path)
        if src == "trilemma":
            continue
        s_layer, s_pkg = _home(src)
        for target in _imports(path):
            home = _home(target)
            if home is None:
                continue  # a name imported from a module (``from trilemma.x import y``), placed by x
            t_layer, t_pkg = home
            if any(src == a and (target == b or target.startswith(b + ".")) for a, b in ALLOWED):
                continue
            if t_layer > s_layer or (t_layer == s_layer and t_pkg != s_pkg):
                bad.append(f"{src} imports {target}")
    assert not bad, "upward or sideways imports:\n" + "\n".join(sorted(set(bad)))


def test_no_import_cycle_among_subpackages():
    """trilemma.specs ↔ trilemma.presets and the like: two packages that need each other."""
    edges = list(_edges())
    graph = _graph(edges, depth=2)
    assert not _cycles(graph), "packages importing each other:\n" + _cycle_report(graph, edges)


def test_no_import_cycle_among_modules():
    """Within a package too (probe.bench ↔ probe.launch): a module that cannot be read without the
    module that reads it."""
    edges = list(_edges())
    graph = _graph(edges, depth=None)
    assert not _cycles(graph), "modules importing each other:\n" + _cycle_report(graph, edges)


def test_the_cycle_check_finds_a_circle_and_names_its_imports():
    """The checks above can fail: a made-up graph with a circle through three packages."""
    edges = [
        ("trilemma.a.x", "trilemma.b.y"),
        ("trilemma.b.z", "trilemma.c"),
        ("trilemma.c", "trilemma.a"),
    ]
    graph = _graph(edges, depth=2)
    assert _cycles(graph) == [["trilemma.a", "trilemma.b", "trilemma.c"]]
    assert "trilemma.b.z imports trilemma.c" in _cycle_report(graph, edges)
    assert not _cycles(_graph(edges[:2], depth=2))


def test_the_layer_table_is_read_from_the_architecture_notes():
    """The table parses into the layers the package is checked against, lowest first."""
    assert LAYERS[0] == ("trilemma.errors",) and ("trilemma.cli",) == LAYERS[-1]
    homes = [_home(m) for m in ("trilemma.specs.plan", "trilemma.resolve", "trilemma.solve.search")]
    assert [h[0] for h in homes] == sorted(h[0] for h in homes)


#: modules that may hold a context variable, each with its reason: fileio's guard against writing
#: onto a file the running command reads is the state of one command, not control between layers
CONTEXT_VARIABLES = {"trilemma.fileio"}


def test_no_context_variable_carries_control_between_layers():
    """What a caller wants (print or return, how large a search may be) is passed as an argument,
    not set in a context variable that a lower layer reads."""
    found = set()
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else None
            name = getattr(func, "attr", None) or getattr(func, "id", None)
            if name == "ContextVar":
                found.add(mod)
    assert found <= CONTEXT_VARIABLES, sorted(found - CONTEXT_VARIABLES)
