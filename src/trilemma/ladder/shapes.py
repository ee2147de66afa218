"""The ladder's models and their learning rate, both functions of size (no torch here).

Models — Llama-style decoders (Touvron et al. 2023: pre-norm RMSNorm, SwiGLU MLP of 8/3·d, rotary
positions, no biases) with tied embeddings, reading bytes (vocabulary 256, the probe's tokenizer),
built by ``trilemma.probe.model.build_model``. The Llama block rather than GPT-2's: at these sizes
and budgets a GPT-2 block (learned positions) sat on the bigram plateau (~2.35 nats/byte) for most
of a short run, and the Llama block did not (55k parameters, 5 tokens/parameter: 1.98 against 2.35
nats/byte; see lr_sweep.md). One shape rule: heads of width 16 (at least 2, at most 8: heads = the
divisor of d nearest d/16, clipped) and d_model / layers = 16, at least 2 layers. Head width 16
rather than 32: a 2-layer d_model 64 model with 4 heads reached 1.406 nats/byte where 2 heads reached
1.461 (1M tokens; lr_sweep.md), so at these widths the number of heads, not parameters, limited it. Kaplan et al. 2020 (arXiv 2001.08361 §3.1, Fig. 5)
find the loss at fixed size moves only a few percent over a wide range of aspect ratios (so did the
sweep: lr_sweep.md §6), so one fixed ratio keeps the ladder a one-parameter family, in which depth
grows with width through the fit sizes and on to the held-out size. (A first version used
d_model/layers = 32: every fit size had 2 layers and the held-out model 3, so the check crossed a
change of family; see lr_sweep.md, last section.) Widths are multiples of 8.

N counts non-embedding parameters (``param_counts(spec).non_embedding``: the token table left out),
as Kaplan 2020 §3.1 / Fig. 6 do: at these sizes the 256×d token table is up to a third of all
parameters, and counting it bends the power law. The law file
says so (``n_counts = "non_embedding"``), so ``estimate`` and ``solve`` count the same way.

The learning rate is a rule of size too: LR_RULE below, a power law in N fitted once on a sweep of the
fit-sized models (``lr_sweep.md`` beside this file). Sequences are SEQ bytes long for every run, so a
shape's ModelSpec is built for that context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from trilemma.errors import InputError
from trilemma.shape import heads_for_width, llama_spec
from trilemma.specs import ModelSpec

__all__ = [
    "ASPECT",
    "FFN_MULTIPLE",
    "HEAD_WIDTH",
    "LR_C",
    "LR_P",
    "MAX_HEADS",
    "MIN_HEADS",
    "MIN_LAYERS",
    "SEQ",
    "VOCAB",
    "Shape",
    "lr_for",
    "params_of",
    "shape_for_params",
    "shape_for_width",
]

SEQ = 128  # bytes per sequence, every run
VOCAB = 256  # bytes
ASPECT = 16  # d_model / layers
HEAD_WIDTH = 16  # d_model per head
MIN_HEADS = 2
MAX_HEADS = 8
FFN_MULTIPLE = 8  # MLP width: Llama's 8/3·d rounded up to a multiple of 8 (Llama uses 256)
MIN_LAYERS = 2
#: LR_RULE: peak learning rate = LR_C · (N / 1e5)^(-LR_P), N non-embedding (see lr_sweep.md)
LR_C = 3.5e-3
LR_P = 0.75


def lr_for(n_non_embedding: float) -> float:
    """Peak learning rate by size: LR_C · (N / 1e5)^(-LR_P) (the rule fitted in lr_sweep.md)."""
    return LR_C * (n_non_embedding / 1e5) ** (-LR_P)


@dataclass(frozen=True, order=True)
class Shape:
    """A decoder of the ladder's family: ``layers`` blocks of width ``d_model`` with ``heads`` heads."""

    layers: int
    d_model: int
    heads: int

    def spec(self, seq: int = SEQ) -> ModelSpec:
        """The shape as a ModelSpec: trilemma.shape's Llama block, tied, bytes, MLP width to a multiple of 8."""
        return llama_spec(
            self.layers,
            self.d_model,
            self.heads,
            vocab_size=VOCAB,
            tied_embeddings=True,
            ffn_multiple=FFN_MULTIPLE,
            name=f"ladder-{self.layers}x{self.d_model}",
            family="ladder",
            max_positions=seq,
            seq_len=seq,
            source="trilemma ladder shape rule: Llama block (RMSNorm, SwiGLU 8/3·d, RoPE, no biases), "
            "tied embeddings, d_model/layers = 16, head width 16 (at most 8 heads), bytes",
        )

    @property
    def name(self) -> str:
        """``{layers}x{d_model}``, e.g. ``2x32``."""
        return f"{self.layers}x{self.d_model}"


def shape_for_width(d_model: int) -> Shape:
    """The rule's shape of a given width (multiple of 8, at least 16): trilemma.shape's heads rule with head
    width HEAD_WIDTH (2 to MAX_HEADS heads), layers = max(MIN_LAYERS, d_model / ASPECT)."""
    if d_model < 16 or d_model % 8:
        raise InputError("width", d_model, "a multiple of 8, at least 16")
    return Shape(
        layers=max(MIN_LAYERS, round(d_model / ASPECT)),
        d_model=d_model,
        heads=heads_for_width(d_model, HEAD_WIDTH, min_heads=MIN_HEADS, max_heads=MAX_HEADS),
    )


@lru_cache(maxsize=4096)
def _counts(shape: Shape, seq: int = SEQ) -> tuple[int, int, float]:
    """(non-embedding params, total params, model FLOP per token) of a shape."""
    from trilemma.estimate.flops import model_flop_per_token
    from trilemma.estimate.params import param_counts

    spec = shape.spec(seq)
    pc = param_counts(spec)
    return int(pc.non_embedding), int(pc.total), float(model_flop_per_token(spec, seq))


def params_of(shape: Shape) -> int:
    """Non-embedding parameters of a shape (the law's N) at SEQ bytes of context."""
    return _counts(shape)[0]


def shape_for_params(n: float) -> Shape:
    """The shape (width a multiple of 8, 16..1024) whose non-embedding count is nearest ``n`` (log scale)."""
    if not (isinstance(n, (int, float)) and math.isfinite(n) and n > 0):
        raise InputError("sizes", n, "positive parameter counts, e.g. 25k,50k,100k,300k")
    shapes = [shape_for_width(d) for d in range(16, 1025, 8)]
    best = min(shapes, key=lambda s: abs(math.log(params_of(s) / n)))
    if abs(math.log(params_of(best) / n)) > math.log(1.25):
        below = [s for s in shapes if params_of(s) <= n]
        above = [s for s in shapes if params_of(s) > n]
        near = " and ".join(f"{params_of(s):,} ({s.name})" for s in (below[-1:] + above[:1]))
        raise InputError(
            "sizes",
            f"{n:,.0f}",
            f"a size the shape rule builds, within 25% (the nearest: {near}; "
            f"{params_of(shapes[0]):,} to {params_of(shapes[-1]):,} non-embedding "
            "parameters in all)",
        )
    return best
