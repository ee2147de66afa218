"""``ExportRequest``: every input of `trilemma export` (a plan as the files of the engine that runs
it), each field written once; ``plan`` is the request of the verb whose plan is exported (estimate
by default, or solve: its optimum or frontier ``point``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from trilemma.errors import InputError
from trilemma.request.estimate import EstimateRequest
from trilemma.request.field import Request, option
from trilemma.request.solve import SolveRequest


def _engine(v: str) -> str:
    from trilemma.export import check_engine

    return check_engine(v)


def _folder(v: str) -> str:
    if not v.strip():
        raise InputError("out", v, "a folder to write the engine's files into")
    return v


def refuse_point(point: int) -> None:
    """--point names a row of solve's frontier: with any other verb it is refused."""
    raise InputError(
        "point", point, "a frontier index with `trilemma export --to ENGINE solve ...`"
    )


class ExportRequest(Request):
    """A plan as the config of the engine that runs it: torchtitan's job TOML, Megatron-LM's launch
    script, DeepSpeed's JSON config, or Hugging Face's TrainingArguments (+ PEFT)."""

    VERB: ClassVar[str] = "export"

    to: str = option(..., "--to", help="torchtitan, megatron, deepspeed or hf", parse=_engine)
    point: int | None = option(
        None,
        "--point",
        help="with solve: export this frontier point (the 0-based row of --frontier's CSV) "
        "instead of the optimum",
        kind="int",
    )
    out: str | None = option(None, "--out", help="write the files into this folder", parse=_folder)
    #: the verb's own request (not a flag: on the command line the verb and its flags follow)
    plan: EstimateRequest | SolveRequest | None = Field(default=None)

    @model_validator(mode="after")
    def _point_with_solve(self) -> Any:
        """A point with an estimate is refused here; with no plan yet (the command line, where the
        verb follows), by whoever runs it: trilemma.api.run_export, or the export command."""
        if self.point is not None and isinstance(self.plan, EstimateRequest):
            refuse_point(self.point)
        return self
