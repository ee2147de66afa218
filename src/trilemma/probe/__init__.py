"""Real training on this machine beside the planner's prediction (``trilemma probe``).

``run_probe(...) -> ProbeResult`` builds a PyTorch model from a ModelSpec (``probe.model``),
trains it on real text (``probe.data``), measures the machine (``probe.bench``, saved as the
hardware profile ``local`` by ``probe.profile``) and compares the measured step time, tokens/s
and memory with ``trilemma.api.evaluate_layout`` for the same configuration.

torch is optional (``pip install 'trilemma[probe]'``): importing this package does not import
it; ``run_probe`` does, and says how to install it when it is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.result import ProbeResult

__all__ = ["ProbeResult", "read_records", "run_probe"]


def run_probe(*args: Any, **kwargs: Any) -> ProbeResult:
    """See :func:`trilemma.probe.run.run_probe`."""
    from trilemma.probe.run import run_probe as _run

    return _run(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name in ("ProbeResult", "read_records"):
        from trilemma.probe import result

        return getattr(result, name)
    raise AttributeError(name)
