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


def test_group_product_and_sp_rule_are_written_once() -> None:
    """tp·cp·pp(·dp) and "sequence parallelism only with tensor parallelism" are stated in
    trilemma.specs.parallel only; every other module asks ParallelDims or sequence_parallel."""
    product = re.compile(r"\b(tp|cp|pp|dp)(\"\])?\)?\s*\*\s*\(?[\w.\[\"]*\b(tp|cp|pp|dp)\b")
    sp_rule = re.compile(r"\bsp\b.*\btp\b(\"\])?\s*>\s*1|\btp\b(\"\])?\s*>\s*1.*\bsp\b")
    found = [
        f"{name}:{i}: {line.strip()}"
        for name, text in _sources().items()
        if name != "specs/parallel.py"
        for i, line in enumerate(text.splitlines(), 1)
        if product.search(line) or sp_rule.search(line)
    ]
    assert not found, "group product or SP rule restated:\n" + "\n".join(found)


def test_parallel_dims_derive_dp_and_check_the_product() -> None:
    from trilemma.specs.parallel import ParallelDims, sequence_parallel

    d = ParallelDims.over(96, tp=4, cp=2, pp=3)
    assert (d.dp, d.replica, d.n_gpus, d.shard_ranks, d.expert_stride) == (4, 24, 96, 8, 8)
    assert d.divides(96) and not d.divides(100)
    assert not ParallelDims(tp=1, sp=1).sp_on and ParallelDims(tp=2, sp=1).sp_on
    assert list(sequence_parallel(np.array([1, 1, 0]), np.array([1, 2, 2]))) == [0, 1, 0]
