"""`trilemma ladder`: a thin layer over ``trilemma.ladder.run_ladder``, its options generated from
``LadderRequest`` (registered in cli.py with ``app.command("ladder")(ladder)``). torch is imported
only when the command runs."""

from __future__ import annotations

import sys

from trilemma.cli_options import command, extra
from trilemma.request.ladder import LadderRequest

__all__ = ["ladder"]


def _ladder(req: LadderRequest, as_json: bool = False) -> None:
    """Train a grid of small models on real text, fit the scaling law, predict a larger held-out run, check it."""
    from trilemma.ladder import run_ladder
    from trilemma.report.jsonout import print_json
    from trilemma.report.ladder import print_ladder, print_plan

    draw = None
    if req.plot is not None:
        from trilemma.report.ladder_plot import plot_ladder as draw
    result = run_ladder(
        req,
        draw=draw,
        progress=sys.stderr.isatty() and not as_json,
        on_plan=None if as_json else print_plan,
    )
    if as_json:
        print_json(result.to_dict())
    else:
        print_ladder(result)


ladder = command(
    LadderRequest,
    [extra("as_json", False, "--json", help="print one JSON document", annotation=bool)],
    _ladder,
)
