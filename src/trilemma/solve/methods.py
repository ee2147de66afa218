"""`solve --finetune auto` (or a list such as lora,qlora): the fine-tuning method as a lever.

Each method is solved on the same pins (model, tokens, GPUs, deadline, budget, trainer) by the one-method
solve; the optimum is the best of their optima on the corner a fine-tune minimises
(trilemma.solve.inputs.finetune_objective: cost with a deadline, time with a budget alone), and every other
method's optimum is a runner-up labelled with its method. A method no plan of which meets the pins is
named in a warning, not dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from trilemma.errors import InfeasibleError, InputError
from trilemma.solve.inputs import finetune_objective
from trilemma.solve.result import SolveResult

#: the methods ``--finetune auto`` compares: those that need no more flags (freeze needs its layer count)
AUTO_METHODS = ("lora", "qlora", "full")


def methods_of(value: Any) -> tuple[str, ...] | None:
    """The methods a ``--finetune`` value asks to compare (``auto``: AUTO_METHODS; ``lora,qlora``: those
    two), or None for one method (the one-method solve)."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if text == "auto":
        return AUTO_METHODS
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    return names if len(names) > 1 else None


def solve_methods(
    args: dict[str, Any], methods: tuple[str, ...], solve_one: Callable[..., SolveResult]
) -> SolveResult:
    """The best of ``solve_one(**args)`` over ``methods`` (module docstring), its runners-up followed by the
    other methods' optima, each labelled ``method <name>``."""
    ft = dict(args["finetune"] or {})
    corner = finetune_objective(
        args["model"],
        args["tokens"],
        args["target_loss"],
        args["minimize"],
        args["deadline"],
        args["budget"],
    )
    found, refused = solve_each(
        solve_one, {m: {**args, "finetune": {**ft, "finetune": m}} for m in methods}
    )
    if not found:
        raise InfeasibleError(
            "no fine-tuning method meets the pins: "
            + "; ".join(f"{m}: {why}" for m, why in refused.items())
        )

    def key(r: SolveResult) -> float:
        e = r.optimum
        return e.cost.usd if corner == "cost" else e.time.total_s

    best = min(found, key=lambda m: key(found[m]))
    note = (
        f"methods compared on the same pins ({', '.join(methods)}), by {corner}: {best} is the optimum"
        + "".join(f"; {m}: no plan meets the pins ({why})" for m, why in refused.items())
    )
    return with_alternatives(found, best, lambda m: f"method {m}", note)


def with_alternatives(
    found: dict[Any, SolveResult], best: Any, label: Callable[[Any], str], note: str
) -> SolveResult:
    """``found[best]`` with every other solve's optimum appended to its runners-up, labelled ``label(key)``,
    and ``note`` to its warnings: one solve per alternative (a method, a teacher), the best kept."""
    head = found[best]
    others = tuple((label(k), r.optimum, r.optimum_loss) for k, r in found.items() if k != best)
    return replace(head, runners_up=head.runners_up + others, warnings=head.warnings + (note,))


def solve_each(
    solve_one: Callable[..., SolveResult], calls: dict[Any, dict[str, Any]]
) -> tuple[dict[Any, SolveResult], dict[Any, str]]:
    """``solve_one(**args)`` for each key's arguments in ``calls``: the results, and the first line of
    each infeasible one's refusal, by key."""
    found: dict[Any, SolveResult] = {}
    refused: dict[Any, str] = {}
    for key, args in calls.items():
        try:
            found[key] = solve_one(**args)
        except InfeasibleError as e:
            refused[key] = str(e).splitlines()[0]
    return found, refused


def check_methods(methods: tuple[str, ...]) -> None:
    """Each of ``methods`` a known method (trilemma.specs.enums.FinetuneMethod), else one InputError."""
    from trilemma.specs.enums import FinetuneMethod

    known = [m.value for m in FinetuneMethod]
    for m in methods:
        if m not in known:
            raise InputError("finetune", m, "auto, or one or more of " + ", ".join(known))


__all__ = [
    "AUTO_METHODS",
    "check_methods",
    "methods_of",
    "solve_each",
    "solve_methods",
    "with_alternatives",
]
