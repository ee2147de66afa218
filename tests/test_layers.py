"""Dependencies point one way (DESIGN.md "Architecture"; STYLE.md: units ← specs ← estimate ← solve
← report). Each module of the package sits in a layer; it may import from lower layers and from its
own package, never from a higher layer or a sibling package of its own layer. Imports inside
functions count too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import trilemma

PACKAGE = Path(trilemma.__file__).parent

#: lowest first; a module belongs to the longest prefix listed
LAYERS: tuple[tuple[str, ...], ...] = (
    ("trilemma.errors",),
    ("trilemma.units", "trilemma.tomlw"),
    ("trilemma.specs",),  # frozen inputs, the layout-axis registry, Constants
    ("trilemma.presets",),  # data files → specs
    ("trilemma.hf",),  # a Hugging Face config.json → ModelSpec
    ("trilemma.estimate",),  # pure, vectorised estimators and the typed Estimate
    ("trilemma.shape",),  # a parameter target → a model shape (uses the parameter count)
    ("trilemma.resolve",),  # user input → specs with the stated defaults (presets, hf, shape)
    ("trilemma.quality",),  # scaling laws
    (
        "trilemma.solve",
        "trilemma.validate",
        "trilemma.probe",
        "trilemma.export",
    ),  # export: a plan → engine files
    ("trilemma.ladder",),  # trains with the probe's model
    ("trilemma.report",),  # printers, JSON, plots
    ("trilemma.api",),  # the façade
    ("trilemma.cli_quality", "trilemma.cli_probe", "trilemma.cli_ladder"),  # a verb's command each
    ("trilemma.cli",),  # the app
    ("trilemma.web",),  # `trilemma serve`: the CLI's commands over HTTP
)


def _home(module: str) -> tuple[int, str] | None:
    """(layer index, the prefix that placed it) for a trilemma module."""
    best = None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (
                best is None or len(p) > len(best[1])
            ):
                best = (i, p)
    return best


def _module_name(path: Path) -> str:
    parts = ("trilemma",) + path.relative_to(PACKAGE).with_suffix("").parts
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
    out = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)  # `from trilemma import api`
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("trilemma.")}


def test_every_module_has_a_layer():
    missing = [
        _module_name(p)
        for p in PACKAGE.rglob("*.py")
        if _home(_module_name(p)) is None and _module_name(p) != "trilemma"
    ]
    assert not missing, f"place these in LAYERS: {missing}"


#: the one allowed edge against the layers, each with its reason: `trilemma serve` is a verb of the app, and
#: the web app it starts serves the app's own commands (trilemma.web.app builds its requests from them)
ALLOWED = {("trilemma.cli", "trilemma.web.serve")}


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
