"""`trilemma probe`: a thin layer over ``trilemma.probe.run_probe``, its options generated from
``ProbeRequest`` (registered in cli.py with ``app.command("probe")(probe)``). torch is imported only
when the command runs."""

from __future__ import annotations

import sys

from trilemma.cli_options import command, extra
from trilemma.errors import TrilemmaError
from trilemma.request.probe import ProbeRequest

__all__ = ["Interrupted", "probe"]


def _probe(req: ProbeRequest, as_json: bool = False) -> None:
    """Train a real model on this machine; print what was measured beside what `estimate` predicts."""
    from trilemma.probe import run_probe

    result = run_probe(req, progress=not as_json and sys.stderr.isatty())
    if as_json:
        from trilemma.report.jsonout import print_json

        print_json(result.to_dict())
    else:
        from trilemma.report.probe import print_probe

        print_probe(result)
    if result.run.interrupted:
        raise Interrupted(
            f"interrupted after {result.run.steps_done} of {result.run.steps} steps; the figures "
            "above cover the steps done" + (f" and were appended to {req.out}" if req.out else "")
        )


probe = command(
    ProbeRequest,
    [extra("as_json", False, "--json", help="print one JSON document", annotation=bool)],
    _probe,
    after="remeasure",
)


class Interrupted(TrilemmaError):
    """Ctrl-C during training: what was measured is printed (and recorded); exit status 130."""

    exit_code = 130
