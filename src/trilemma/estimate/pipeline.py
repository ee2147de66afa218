"""Pipeline placement: how many layers each pipeline rank holds.

Stages may be uneven when pp·vp does not divide the layers (Dubey et al. 2024, arXiv 2407.21783
§3.3.2: Llama 3.1 405B ran 126 layers on pp = 16). The derivation of both counts is in
docs/derivations.md, section "Pipeline placement".
"""

from __future__ import annotations

from typing import Any


def stage_layers(n_layers: Any, pp: Any, vp: Any = 1) -> Any:
    """Layers on the most loaded pipeline rank (ints or broadcastable arrays).

    The step waits for the heaviest rank, so time and memory use its layer count. The pp·vp chunks
    hold ⌈n_layers / (pp·vp)⌉ = per layers less a deficit D cut at the two ends, A = ⌈D/2⌉ from the
    first chunks, B = ⌊D/2⌋ from the last (docs/derivations.md, "Pipeline placement"):
    per·vp − ⌊A/pp⌋ − ⌊B/pp⌋, one fewer where (A mod pp) + (B mod pp) ≥ pp."""
    chunks = pp * vp
    per = -(-n_layers // chunks)
    deficit = chunks * per - n_layers
    a, b = -(-deficit // 2), deficit // 2
    return per * vp - a // pp - b // pp - ((a % pp) + (b % pp) >= pp)


def last_stage_layers(n_layers: Any, pp: Any, vp: Any = 1) -> Any:
    """Layers on the last pipeline rank, the one that also holds the final norm, the LM head and the
    loss: per·vp − ⌈⌊D/2⌋ / pp⌉ − ⌊⌈D/2⌉ / pp⌋, torchtitan's stage split (docs/derivations.md,
    "Pipeline placement"). Equal to ``stage_layers`` when the chunks divide the layers."""
    chunks = pp * vp
    per = -(-n_layers // chunks)
    deficit = chunks * per - n_layers
    lost = -(-(deficit // 2) // pp) + (-(-deficit // 2)) // pp
    return per * vp - lost


__all__ = ["last_stage_layers", "stage_layers"]
