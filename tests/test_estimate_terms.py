"""The estimator's structure: recomputation compared by name, the group product and "SP only with
TP" written once (trilemma.specs.parallel.ParallelDims), files and functions of a readable size."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import trilemma
from trilemma.specs import Recompute

PACKAGE = Path(trilemma.__file__).parent
#: the packages whose formulas these rules hold to
SCOPED = ("estimate", "specs", "solve")


def _sources() -> dict[str, str]:
    return {
        str(p.relative_to(PACKAGE)): p.read_text()
        for d in SCOPED
        for p in sorted((PACKAGE / d).glob("*.py"))
    }


def test_recompute_is_compared_by_name_not_by_position() -> None:
    """No ``recompute == 2`` or ``recompute < 1``: a mode is named (Recompute.mask, LayoutArrays.
    recomputes), and its array code is fixed by name, not by the order of the members."""
    positional = re.compile(
        r"recompute\w*\)?\s*(==|!=|<=|>=|<|>)\s*\d|(list|sorted)\(Recompute\)\["
    )
    found = [
        f"{name}:{i}: {line.strip()}"
        for name, text in _sources().items()
        for i, line in enumerate(text.splitlines(), 1)
        if positional.search(line) or "list(Recompute).index" in line
    ]
    assert not found, "recompute compared by position:\n" + "\n".join(found)
    codes = {r: r.code for r in Recompute}
    assert sorted(codes.values()) == list(range(len(Recompute)))
    assert all(Recompute.from_code(c) is r for r, c in codes.items())
    rows = np.array([r.code for r in Recompute])
    assert list(Recompute.mask(rows, Recompute.FULL, Recompute.OP)) == [
        r in (Recompute.FULL, Recompute.OP) for r in Recompute
    ]
