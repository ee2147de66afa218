"""Scale constants live only in trilemma/units.py (docs/CONTRIBUTING.md, "SI inside, units at the
edges": llm-analysis multiplies by 10**9 at ~20 sites and mixes 1000- and 1024-based units). A unit
conversion written as a bare number anywhere else in the package fails this test: a power of two of
a byte prefix (2**20, 2**30, ...), or a time, energy or SI factor (60, 3600, 86400, 3.6e6, 1e3 ...
1e15, 1024) multiplying or dividing. Counts that merely happen to be round (a default of 1e12
tokens, a bound of 1e15 parameters) are not conversions and pass: only a literal used as a factor or
divisor is one."""

from __future__ import annotations

import ast
from pathlib import Path

import trilemma

PACKAGE = Path(trilemma.__file__).parent
FACTORS = {60, 1e3, 1e6, 1e9, 1e12, 1e15, 1024, 3600, 86400, 3.6e6, 8760}
BYTE_POWERS = {10, 20, 30, 40, 50}


def _const(node: ast.AST) -> float | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


def scale_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every scale literal in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.BinOp):
            continue
        left, right = _const(node.left), _const(node.right)
        if isinstance(node.op, ast.Pow) and left == 2 and right in BYTE_POWERS:
            out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv)) and (
            left in FACTORS or right in FACTORS
        ):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_the_scan_finds_what_it_should():
    """The detector itself, on hand-written lines: conversions are caught, counts and tolerances not."""
    found = [
        t
        for _, t in sorted(
            scale_literals(
                "a = x / 2**30\nb = e / 3.6e6\nc = t / 86400\nd = s * 3600\ne = usd / 1e6\nf = 2.0 ** 20\n"
                "ok1 = 1e12\nok2 = x * (1 + 1e-9)\nok3 = 2**31 - 1\nok4 = n * 2\n"
            )
        )
    ]
    assert found == [
        "2 ** 30",
        "e / 3600000.0",
        "t / 86400",
        "s * 3600",
        "usd / 1000000.0",
        "2.0 ** 20",
    ]


def test_no_scale_literal_outside_units():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "units.py" and path.parent == PACKAGE:
            continue
        for line, text in scale_literals(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {text}")
    assert not offenders, "use the named constants of trilemma.units:\n" + "\n".join(offenders)
