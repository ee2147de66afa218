"""``ValidateRequest``: every input of `trilemma validate` (which backtest, against which rows),
each field written once. The rows file (``data``) is held as given and read by the backtest."""

from __future__ import annotations

from typing import ClassVar

from pydantic import model_validator

from trilemma.errors import InputError
from trilemma.request.field import Request, option
from trilemma.request.parsers import choice

KINDS = ("runs", "throughput", "memory", "finetune", "quality", "ondevice")


class ValidateRequest(Request):
    """Backtest the planner against the published runs, throughput and memory figures it ships
    with, or against your own measurements (data: a CSV file)."""

    VERB: ClassVar[str] = "validate"

    kind: str | None = option(
        None,
        "--kind",
        help="runs, throughput, memory, finetune (published fine-tuning memory, not fitted) or "
        "quality (loss extrapolation and benchmark hold-outs, not in the default), ondevice (published "
        "on-device decode and prefill, held out by row and by runtime; default: all)",
        parse=lambda t: choice(t, "kind", KINDS),
    )
    loso: bool = option(
        False,
        "--loso",
        help="recompute leave-one-source-out now (about a minute) instead of reading the last "
        "calibration's",
        kind="bool",
    )
    data: str | None = option(
        None,
        "--data",
        help="backtest your own measurements: a CSV in the schema of trilemma/data/SCHEMA.md "
        "(step times, throughput or memory)",
    )

    @model_validator(mode="after")
    def _finetune_is_shipped(self) -> ValidateRequest:
        if self.data is not None and self.kind in ("finetune", "quality", "ondevice"):
            raise InputError(
                "kind",
                self.kind,
                "runs, throughput or memory with --data (finetune and quality check shipped "
                "tables, not a kind of your rows)",
            )
        return self
