"""``OptimalRequest``: every input of `trilemma optimal` (a FLOP budget or a target loss under one or
more scaling laws), each field written once.

The law is held as given (a name, a law file, a comma-separated list or ``all``) and read when the
request runs (``laws()``); the other values are parsed here, in the order the command always checked
them: the counts as they are read, then whether a corner is pinned, the loss and the precision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import model_validator

from trilemma.errors import InputError
from trilemma.quality.laws import DEFAULT_LAW
from trilemma.request.field import Request, option
from trilemma.units import parse_count

#: C = 6·N·D: below one parameter trained on one token (5e-324 divided by zero), FLOP
MIN_FLOPS = 6.0


def positive_count(text: Any, field: str) -> float:
    """A count such as 1e23 or 2T (tokens, FLOP); InputError naming ``field`` unless positive."""
    v = parse_count(text, field)
    if not v > 0:
        raise InputError(field, text, "a positive number, e.g. 1e23 or 2T")
    return float(v)


def _flops(text: Any) -> float:
    c = positive_count(text, "flops")
    if c < MIN_FLOPS:
        raise InputError("flops", text, "at least 6 FLOP (C = 6·N·D with N = D = 1)")
    return c


class OptimalRequest(Request):
    """Compute-optimal N, D and loss for a FLOP budget under a scaling law (and the inference-aware
    model)."""

    VERB: ClassVar[str] = "optimal"

    flops: float | None = option(
        None, "--flops", "-c", help="training FLOP budget, e.g. 1e23 (C = 6·N·D)", parse=_flops
    )
    law: str = option(
        DEFAULT_LAW,
        "--law",
        help="scaling law: a name, a law file from `trilemma fit`, a comma-separated list, or "
        "'all' (default besiroglu2024: the Chinchilla refit consistent with ~20 "
        "tokens/parameter)",
    )
    inference_tokens: float | None = option(
        None,
        "--inference-tokens",
        help="lifetime inference tokens: also give the model minimising training + inference "
        "FLOPs (Sardana 2023) for the same loss",
        parse=lambda t: positive_count(t, "inference-tokens"),
    )
    target_loss: float | None = option(
        None,
        "--loss",
        help="target loss instead of the compute-optimal loss at --flops (the law's unit)",
        kind="number",
    )
    unique_tokens: float | None = option(
        None,
        "--unique-tokens",
        help="unique tokens available; more epochs are discounted (Muennighoff 2023)",
        parse=lambda t: positive_count(t, "unique-tokens"),
    )
    precision: str = option(
        "bf16",
        "--precision",
        help="training precision (bf16/fp16/fp32: no penalty; fp8, int4: Kumar 2024 form)",
        listable=True,
    )

    @model_validator(mode="after")
    def _pinned(self) -> OptimalRequest:
        """A budget or a target, a positive target, a precision the laws price."""
        from trilemma.quality.predict import precision_bits

        if self.flops is None and self.target_loss is None:
            raise InputError(
                "flops", None, "a FLOP budget (--flops 1e23) or a target loss (--loss 2.0)"
            )
        if self.target_loss is not None and not self.target_loss > 0:
            raise InputError("loss", self.target_loss, "a positive loss in the law's unit")
        precision_bits(self.precision)
        return self

    def laws(self) -> list[Any]:
        """The laws ``law`` names: one name or law file, a comma-separated list of them, or all the
        shipped laws (trilemma.quality.laws)."""
        from trilemma.quality.laws import get_law, law_names

        text = self.law.strip()
        if text.lower() == "all":
            return [get_law(n) for n in law_names()]
        if "," in text and not _exists(text):
            names = [p for p in text.split(",") if p.strip()]
            if not names:
                raise InputError(
                    "law",
                    self.law,
                    "a law name, a law file, a comma-separated list of them, or 'all'",
                )
            return [get_law(p) for p in names]
        return [get_law(text)]


def _exists(text: str) -> bool:
    try:
        return Path(text).exists()
    except (OSError, ValueError):  # too long for a file name, or a NUL
        return False
