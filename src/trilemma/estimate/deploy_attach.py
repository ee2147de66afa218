"""``trilemma.api.with_deploy``: an estimate with where the trained model must run, its arguments
checked before trilemma.estimate.deploy.with_deploy prices the device."""

from __future__ import annotations

from typing import Any

from trilemma.errors import InputError


def attach_deploy(
    est: Any,
    device: str,
    precision: str | None = None,
    context: int | str | None = None,
    runtime: str | None = None,
) -> Any:
    """The estimate with where the trained model must run (``with_deploy``: ``device`` under
    ``runtime`` at weight format ``precision``, each default the device's or the runtime's), its
    arguments checked: an Estimate, and a context of a positive whole number of tokens ("4k" read as
    4,096)."""
    from trilemma.estimate.deploy import with_deploy
    from trilemma.estimate.result import Estimate
    from trilemma.units import parse_count

    if not isinstance(est, Estimate):
        raise InputError("estimate", est, "an Estimate (trilemma.api.estimate)")
    if isinstance(context, str):
        context = parse_count(context, "context")
    if context is not None and (
        isinstance(context, bool) or not float(context).is_integer() or context < 1
    ):
        raise InputError("context", context, "a positive whole number of tokens")
    return with_deploy(est, device, precision, None if context is None else int(context), runtime)


__all__ = ["attach_deploy"]
