"""``PresetsRequest``: the input of `trilemma presets` (which catalogue to list)."""

from __future__ import annotations

from typing import ClassVar

from trilemma.request.field import Request, option
from trilemma.request.parsers import choice

KINDS = ("models", "hardware", "devices", "runtimes", "stacks", "prices", "trainers", "all")


class PresetsRequest(Request):
    """List the model, hardware, device and software-stack presets (with sources)."""

    VERB: ClassVar[str] = "presets"

    kind: str = option(
        "all",
        "kind",
        help="models, hardware, devices (deployment targets), runtimes (on a device, with their weight "
        "formats), stacks (software stacks), prices (per provider, market and date), trainers "
        "(fine-tuning trainers) or all",
        parse=lambda t: choice(t, "kind", KINDS),
        argument=True,
    )
