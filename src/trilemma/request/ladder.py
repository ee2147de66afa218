"""``LadderRequest``: every input of `trilemma ladder` (a grid of small real trainings → a fitted
law, checked on a held-out run), each field written once.

The grid's own rules (the sizes against --tiny and --minutes, workers and threads against this
machine's cores) are checked by ``trilemma.ladder.run_ladder`` before anything is trained.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from trilemma.errors import InputError
from trilemma.request import parsers as p
from trilemma.request.field import Request, option
from trilemma.request.probe import DATA_HELP, sources

NUMBERS_ALLOWED = "comma-separated positive numbers"
BACKENDS = ("local", "ray", "slurm")  # where a ladder's runs train (trilemma.ladder.dispatch)


def numbers(field: str, count: bool) -> Callable[[Any], tuple[float, ...]]:
    """Comma-separated positive numbers (``count``: with a scale, 14k = 14,000), or a list of
    them."""

    def parse(v: Any) -> tuple[float, ...]:
        from trilemma.units import parse_count

        parts = v if isinstance(v, (list, tuple)) else str(v).replace(" ", "").split(",")
        out = []
        for part in parts:
            if part == "":
                continue
            try:
                x = parse_count(part, field) if count else float(part)
            except (TypeError, ValueError):
                raise InputError(field, v, NUMBERS_ALLOWED + ", e.g. 5,10,20,40") from None
            if not x > 0:
                raise InputError(field, v, NUMBERS_ALLOWED)
            out.append(float(x))
        if not out:
            raise InputError(field, v, NUMBERS_ALLOWED)
        return tuple(out)

    return parse


class LadderRequest(Request):
    """Train a grid of small models on real text, fit the scaling law, predict a larger held-out
    run, check it."""

    VERB: ClassVar[str] = "ladder"

    out: str = option(
        ...,
        "--out",
        "-o",
        help="directory for runs.jsonl (resumable), law.toml and ladder.json",
    )
    data: tuple[str, ...] | None = option(
        None, "--data", help=DATA_HELP, kind="items", parse=sources
    )
    sizes: tuple[float, ...] | None = option(
        None,
        "--sizes",
        help="model sizes, non-embedding parameters, e.g. 14k,25k,40k,83k,200k; the largest is "
        "held out (at most 4x the next)",
        kind="numbers",
        parse=numbers("sizes", count=True),
    )
    tokens_per_param: tuple[float, ...] | None = option(
        None,
        "--tokens-per-param",
        help="token budgets of the fit runs as tokens per parameter (default 5,10,20,40)",
        kind="numbers",
        parse=numbers("tokens-per-param", count=False),
    )
    holdout_tokens_per_param: float | None = option(
        None,
        "--holdout-tokens-per-param",
        help="tokens per parameter of the held-out run (default 10; within the grid's range)",
        kind="number",
    )
    minutes: float | None = option(
        None,
        "--minutes",
        help="size the grid to fit this many minutes (the planner's prediction from the `local` "
        "profile)",
        kind="number",
    )
    tiny: bool = option(
        False,
        "--tiny",
        help="a 10-run ladder of tiny models in one process (CI: under 2 minutes)",
        kind="bool",
    )
    workers: int | None = option(
        None,
        "--workers",
        help="runs at once: local processes (default: one per core; --tiny: 1, in this process); "
        "ray: tasks in flight (default: all, placed as the cluster's resources free up)",
        kind="int",
    )
    threads: int | None = option(
        None,
        "--threads",
        help="torch threads per worker (default: the cores shared out over the workers)",
        kind="int",
    )
    price: float | None = option(
        None,
        "--price",
        help="USD per machine-hour for the cost column (default: the `local` profile's "
        "placeholder)",
        parse=p.price,
    )
    plot: str | None = option(
        None,
        "--plot",
        help="draw loss vs compute, the fitted law, the compute-optimal frontier and the held-out "
        "point (needs matplotlib)",
    )
    seed: int = option(0, "--seed", help="seed of every run (weights and batches)", kind="int")
    bootstrap: int = option(
        200, "--bootstrap", help="bootstrap refits for the law's intervals", kind="int"
    )
    backend: str = option(
        "local",
        "--backend",
        help="where the runs train: local (processes on this machine), ray (one Ray task per run) "
        "or slurm (one submitit job per run)",
        parse=lambda v: p.choice(str(v), "backend", BACKENDS),
    )
    address: str | None = option(
        None,
        "--address",
        help="ray: the cluster to join (auto, ray://host:port or a head's host:port; default: "
        "RAY_ADDRESS, else a Ray started on this machine for the ladder)",
    )
    gpu: str | None = option(
        None,
        "--gpu",
        help="train each run on one GPU of this kind (a hardware preset: the planner predicts each "
        "run's time and memory on it), in bf16 autocast where the GPU supports it",
    )
    partition: str | None = option(
        None, "--partition", help="slurm: the partition the jobs are submitted to"
    )
    time_limit: float | None = option(
        None,
        "--time-limit",
        help="slurm: minutes per job (default: twice the planner's time for the run plus start-up, "
        "rounded up)",
        kind="number",
    )
    progress_json: bool = option(
        False,
        "--progress-json",
        help="one JSON line on stderr per run that finishes or fails (runs done and failed, elapsed "
        "and the planner's remaining seconds), for scripts",
        kind="bool",
    )
    dry_run: bool = option(
        False,
        "--dry-run",
        help="show the plan, what is already done and each run's cluster resources (slurm: its "
        "sbatch parameters); train nothing",
        kind="bool",
    )
