"""`trilemma fit`: a typer command function, registered by ``trilemma.cli``.

    app.command("fit")(fit)

A few lines over ``trilemma.quality``; bad input raises InputError (exit 2). ``--json`` prints exactly
one document with a ``schema`` and a ``warnings`` list. (`trilemma optimal` is generated from
trilemma.request.OptimalRequest in trilemma.cli.)
"""

from __future__ import annotations

from trilemma.cli_options import command, extra
from trilemma.request.fit import FitRequest


def _fit(req: FitRequest, as_json: bool = False) -> None:
    """Fit L = E + A/N^alpha + B/D^beta to your runs (Hoffmann 2022 procedure) with bootstrap intervals."""
    from trilemma.quality.fitting import run_fit

    draw = None
    if req.plot is not None:
        from trilemma.report.fit_plot import plot_fit as draw
    doc = run_fit(req, draw=draw)
    if as_json:
        from trilemma.report.jsonout import print_json

        print_json(doc)
    else:
        from trilemma.report.quality import print_fit

        print_fit(doc)


fit = command(
    FitRequest,
    [extra("as_json", False, "--json", help="print one JSON document", annotation=bool)],
    _fit,
)
