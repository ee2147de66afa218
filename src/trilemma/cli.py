"""The `trilemma` command: a thin layer over the Python API (trilemma.api)."""

from __future__ import annotations

import inspect
import sys
import warnings
from functools import cache
from typing import Any

import typer

from trilemma.cli_options import command, extra
from trilemma.errors import InputError, TrilemmaError
from trilemma.fileio import check_output, one_command
from trilemma.request import (
    EstimateRequest,
    OptimalRequest,
    PresetsRequest,
    SolveRequest,
    ValidateRequest,
)
from trilemma.request.export import ExportRequest, refuse_point
from trilemma.request.help import (
    EXPORT_HELP,
)
from trilemma.request.serve import ServeRequest
from trilemma.text import printable

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Speed, quality and cost of Transformer training: estimate a plan, list presets.",
)


from trilemma.report.emit import emit  # noqa: E402

_JSON = extra("as_json", False, "--json", help="print one JSON document", annotation=bool)


def _estimate(
    req: EstimateRequest, ctx: Any = None, as_json: bool = False, export: str | None = None
) -> Any:
    """Time, GPU-hours, $, kWh, CO2 and memory per GPU for one training plan.

    Any layout flag (--tp, --pp, --cp, --ep, --vp, --zero, --recompute, --micro-batch, --sp/--no-sp:
    the axes of trilemma.specs.axes) pins that axis; the rest are searched."""
    from trilemma.api import run_estimate

    _check_export(export)
    accept = None
    if export:  # the fastest layout the engine can write, not the fastest of all
        from trilemma.export import expressible

        accept = expressible(export)
    est = run_estimate(req, accept=accept)
    if export:
        from trilemma.export import export as export_plan

        return _emit_export(export_plan(est, export), as_json, ctx)
    from trilemma.report.table import print_estimate

    return emit(est, as_json, lambda e: e.to_dict(), print_estimate)


estimate = app.command("estimate")(
    command(
        EstimateRequest,
        [
            inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
            _JSON,
            extra("export", None, "--export", help=EXPORT_HELP, annotation=str | None),
        ],
        _estimate,
    )
)


def _solve(
    given: dict[str, Any],
    ctx: Any = None,
    scenario: str | None = None,
    frontier_csv: str | None = None,
    plot: str | None = None,
    plot_range: str | None = None,
    as_json: bool = False,
    export: str | None = None,
) -> Any:
    """Pin two of time, money and loss; get the best plan on the third, runners-up and the frontier.
    With --finetune (needs --model and --tokens) there is no loss corner: it minimises time or cost."""
    from trilemma.api import run_solve
    from trilemma.report.solve import plot_frontier, print_solve, write_frontier
    from trilemma.request.scenario import merge_scenario

    _check_export(export)
    args = merge_scenario(scenario, {**given, "plot_range": plot_range})
    plot_range = args.pop("plot_range", None)
    req = SolveRequest(**args)
    if plot_range not in (None, "pins", "full"):
        raise InputError("plot-range", plot_range, "pins or full")
    if plot_range is not None and plot is None:
        raise InputError(
            "plot-range", plot_range, "a value with --plot FILE.png (the plot it frames)"
        )
    for key, path in (("frontier", frontier_csv), ("plot", plot)):
        if path is not None:  # before the search, not after it; the law file is read later
            check_output(key, path, [req.law])
    result = run_solve(req)
    if frontier_csv:
        write_frontier(result, frontier_csv)
    if plot:
        plot_frontier(result, plot, plot_range or "pins")
    if export:
        from trilemma.export import export_solve

        point = _export_target(ctx).get("point")
        return _emit_export(export_solve(result, export, point), as_json, ctx)
    return emit(result, as_json, lambda r: r.to_dict(), print_solve)


_PLOT_RANGE_HELP = (
    "what --plot shows: pins (default: a decade around the pins and the optimum) or full (every "
    "point)"
)
solve = app.command("solve")(
    command(
        SolveRequest,
        [
            inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
            extra(
                "frontier_csv",
                None,
                "--frontier",
                help="write the Pareto frontier to this CSV",
                annotation=str | None,
            ),
            extra(
                "plot",
                None,
                "--plot",
                help="draw the frontier to this image (.png, .svg or .pdf)",
                annotation=str | None,
            ),
            extra("plot_range", None, "--plot-range", help=_PLOT_RANGE_HELP, annotation=str | None),
            _JSON,
            extra(
                "export",
                None,
                "--export",
                help=EXPORT_HELP + " (the optimum)",
                annotation=str | None,
            ),
        ],
        _solve,
        leading=(
            inspect.Parameter(
                "scenario",
                inspect.Parameter.KEYWORD_ONLY,
                default=typer.Argument(None, help="a scenario TOML file (flags override it)"),
                annotation=str | None,
            ),
        ),
        merged=True,
    )
)


def _check_export(engine: str | None) -> None:
    """--export's engine checked before any work (named as the flag the user typed)."""
    if engine is not None:
        from trilemma.export import check_engine

        check_engine(engine, "export")


def _export_target(ctx: Any) -> dict[str, Any]:
    """What `trilemma export` passes to the verb it runs (the frontier point and the output folder), as
    the object of the command line's context; empty when the verb runs alone."""
    return dict(getattr(ctx, "obj", None) or {})


def _emit_export(doc: Any, as_json: bool, ctx: Any) -> Any:
    """An exported plan: written to `export --out`'s folder, or printed (the files, or --json's document)."""
    from trilemma.report.export import print_export, print_written, write_export

    out = _export_target(ctx).get("out")
    if out:
        paths = write_export(doc, out)
        if not as_json:
            print_written(doc, paths)
            return doc
    return emit(doc, as_json, lambda d: d.to_dict(), print_export)


def _export(req: ExportRequest, ctx: Any = None) -> None:
    """A plan as the config of the engine that runs it: `trilemma export --to ENGINE` then `estimate` (the
    default) or `solve` and that verb's own flags; prints (or --out writes) torchtitan's job TOML,
    Megatron-LM's launch script, DeepSpeed's JSON config, or Hugging Face's TrainingArguments (+ PEFT)."""
    rest = list(ctx.args)
    lead = 0  # --json (a switch of both verbs) may come before the verb
    while lead < len(rest) and rest[lead] == "--json":
        lead += 1
    verb = (
        rest.pop(lead) if lead < len(rest) and rest[lead] in ("estimate", "solve") else "estimate"
    )
    if "--export" in rest:
        raise InputError(
            "export", "--export", "--to ENGINE alone (`trilemma export` sets the verb's --export)"
        )
    if req.point is not None and verb != "solve":
        refuse_point(req.point)
    app(
        args=[verb, *rest, "--export", req.to],
        standalone_mode=False,
        obj={"point": req.point, "out": req.out},
    )


export = app.command(
    "export", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)(
    command(
        ExportRequest,
        [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)],
        _export,
    )
)


def _optimal(req: OptimalRequest, as_json: bool = False) -> None:
    """Compute-optimal N, D and loss for a FLOP budget under a scaling law (and the inference-aware model)."""
    from trilemma.api import optimal as run_optimal
    from trilemma.report.quality import print_optimal

    emit(run_optimal(req).to_dict(), as_json, lambda d: d, print_optimal)


def _validate(req: ValidateRequest, as_json: bool = False, csv_path: str | None = None) -> None:
    """Backtest the planner against the published runs, throughput and memory figures it ships with,
    or against your own measurements (--data FILE.csv)."""
    from trilemma.api import validate as run_validate
    from trilemma.report.validate import print_validate, write_csv

    if csv_path is not None:  # before the backtest: a writable path, and not --data's file
        check_output("csv", csv_path, [req.data])
    doc = run_validate(req)
    if csv_path:
        write_csv(doc, csv_path)
    emit(doc, as_json, lambda d: d, print_validate)


_CSV = extra(
    "csv_path",
    None,
    "--csv",
    help="also write one line per row to this CSV file",
    annotation=str | None,
)
validate = app.command("validate")(command(ValidateRequest, [_JSON, _CSV], _validate))


def _presets(req: PresetsRequest, as_json: bool = False) -> None:
    """List the model and hardware presets (with sources)."""
    from trilemma.api import presets as presets_doc
    from trilemma.report.table import print_presets

    emit(presets_doc(req), as_json, lambda d: d, lambda d: print_presets(req.kind))


presets = app.command("presets")(command(PresetsRequest, [_JSON], _presets))


def _serve(req: ServeRequest) -> None:
    """The verbs as a JSON API over HTTP (docs at /docs) and a page that explores the triangle (needs the
    web extra: pip install 'trilemma\\[web]')."""
    from trilemma.web.serve import serve as serve_app

    serve_app(req, say=typer.echo)


serve = app.command("serve")(command(ServeRequest, [], _serve))


from trilemma.cli_quality import fit  # noqa: E402  (thin command functions; heavy imports inside)

app.command("fit")(fit)
optimal = app.command("optimal")(command(OptimalRequest, [_JSON], _optimal))

from trilemma.cli_probe import probe  # noqa: E402  (torch is imported only when the probe runs)

app.command("probe")(probe)

from trilemma.cli_ladder import ladder  # noqa: E402

app.command("ladder")(ladder)


def _typed_value_message(exc: Exception, argv: list[str]) -> str | None:
    """A number the command line could not parse, in InputError's words ("pue: 'abc' is not allowed; expected
    a number"), with the value as typed (click's message names the option but not the value); None for
    anything else."""
    text = str(getattr(exc, "message", ""))
    param = getattr(exc, "param", None)
    allowed = (
        "a whole number"
        if "valid integer" in text
        else "a number"
        if "valid number" in text
        else None
    )
    if type(exc).__name__ != "BadParameter" or param is None or allowed is None:
        return None
    opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    for i, tok in enumerate(argv):
        for o in opts:
            if tok == o and i + 1 < len(argv):
                return str(InputError(o.lstrip("-"), argv[i + 1], allowed))
            if tok.startswith(o + "="):
                return str(InputError(o.lstrip("-"), tok[len(o) + 1 :], allowed))
    return None


@cache
def _click_command() -> Any:
    """``app`` as the click command that calling it builds (typer.main.get_command), built once a process:
    typer rebuilds the whole tree of commands and options on each call (19 ms, most of a refused
    request's time); click makes a new context for each invocation of the same command."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line and exit status 2 for bad input, 1 for an infeasible request.

    numpy's floating-point warnings (overflow in an absurd but finite input) are not printed: a result
    that overflowed is refused where it is written (report.jsonout refuses NaN and infinity)."""
    try:
        with warnings.catch_warnings(), one_command():  # one_command: no write onto an input
            warnings.simplefilter("ignore", RuntimeWarning)
            _click_command()(args=argv, standalone_mode=False)
        return 0
    except TrilemmaError as exc:
        sys.stderr.write(f"trilemma: error: {printable(exc)}\n")
        return exc.exit_code
    except Exception as exc:  # typer vendors click: match its exceptions by shape, not by import
        name = type(exc).__name__
        if name == "Exit" or (name != "Abort" and not hasattr(exc, "format_message")):
            if name == "Exit":
                return int(getattr(exc, "exit_code", 0))
            raise
        if name == "Abort":
            sys.stderr.write("trilemma: aborted\n")
            return 130
        msg = _typed_value_message(exc, sys.argv[1:] if argv is None else argv) or " ".join(
            str(exc.format_message()).split()
        )  # one line
        if name == "NoArgsIsHelpError":  # the help is already on stdout; its message is empty
            msg = (
                "missing command: estimate, solve, export, optimal, fit, validate, probe, ladder, presets or serve "
                "(see trilemma --help)"
            )
        sys.stderr.write(f"trilemma: error: {printable(msg)}\n")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
