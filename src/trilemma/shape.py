"""A model shape from a parameter target: ``model_for_params(3e9)`` → a Llama-style ModelSpec.

The rule (every choice is a published model's, so the shapes look like ones people train):

* **Block** — Llama (Touvron et al. 2023, arXiv 2302.13971 §2.2; Llama 2, arXiv 2307.09288):
  pre-norm RMSNorm, SwiGLU MLP, rotary positions, no biases, untied input and output embeddings.
* **Heads** — head_dim 64 while d_model < 2048, 128 from 2048 up (GPT-3, Brown et al. 2020
  Table 2.1, uses 128 from 6.7B; Llama 2 uses 128 throughout); n_heads = d_model / head_dim.
  d_model is a multiple of 64 below 2048, of 512 (n_heads a multiple of 4) from 2048 and of
  1024 (n_heads a multiple of 8) from 4096, so tensor parallelism of 4 or 8 divides the heads
  of the models that need it (Llama-2-7B's 4096 = 32 × 128 is on the grid).
* **MLP width** — Llama's ``FeedForward``: 8/3·d_model rounded up to a multiple of 256
  (4096 → 11008, as in Llama-2-7B).
* **KV heads** — grouped-query attention with 8 KV heads for models of 30B parameters and up,
  as Llama 2 does for its 34B and 70B (Llama 2 §2.2; Ainslie et al. 2023); full multi-head below.
* **Depth against width** — d_model / n_layers between 64 and 128. Kaplan et al. 2020 (arXiv
  2001.08361 §3.1, Fig. 5) find the loss at a fixed parameter count moves only a few percent as
  this aspect ratio ranges over more than an order of magnitude; 64 … 128 is the range the
  GPT-3 family spans at its ends (125M: 768/12 = 64; 175B: 12288/96 = 128) and holds Llama-2-7B
  (4096/32 = 128) and Llama-2-70B (8192/80 = 102).
* **Choosing one** — every shape the rules above allow is filed in a bin 2 % wide by its exact
  parameter count; each bin is represented by its shape whose aspect ratio is nearest the
  band's geometric middle, √(64·128) ≈ 90.5 (ties: the count nearer the bin's middle, then the
  narrower model). The answer is the representative whose count is nearest the target (on a
  log scale; an exact tie goes to the smaller). The representatives do not depend on the target,
  so a larger target never gives a smaller model. With a 32000-token vocabulary the count is
  within 3.2 % of the target from 50M to 10T, and within about 2 % from 1B up (below 1B some
  bins hold no shape).

Counts are those of :func:`trilemma.estimate.params.param_counts` (one layer's count and the count
outside the layers, taken once per width from the spec the rule builds).

The block and head rule are shared: :func:`llama_spec` builds the Llama-style block for this rule and for
the ladder's small models (``trilemma.ladder.plan.Shape``: head width 16, at most 8 heads, tied
embeddings, MLP width to a multiple of 8), and :func:`nearest_divisor` picks heads here, in the ladder
and when the probe scales a preset down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trilemma.errors import InputError
from trilemma.specs import FfnType, ModelSpec, NormType, PositionType
from trilemma.units import SI

__all__ = [
    "ASPECT_RANGE",
    "MAX_TARGET",
    "heads_for_width",
    "llama_ffn",
    "llama_spec",
    "model_for_params",
    "nearest_divisor",
]

#: d_model / n_layers allowed (Kaplan 2020 Fig. 5; GPT-3 125M … 175B)
ASPECT_RANGE = (64.0, 128.0)
_ASPECT_MID = math.sqrt(ASPECT_RANGE[0] * ASPECT_RANGE[1])
#: grouped-query attention (8 KV heads) from this many parameters (Llama 2: 34B and 70B)
GQA_FROM = 30e9
GQA_KV_HEADS = 8
#: largest target accepted (10T parameters; the largest published dense models are < 2T)
MAX_TARGET = 1e13
_BIN = math.log(1.02)  # bin width on a natural-log scale: 2 %
_MIN_D, _SMALL_HEAD_UNTIL, _TP8_FROM, _MAX_D = 256, 2048, 4096, 65536
_MIN_LAYERS = 2
_TOLERANCE = 0.05  # a target the nearest shape misses by more than this is refused
_FFN_MULTIPLE = 256  # Llama's multiple_of
_ANY_VOCAB = 1  # a layer's count does not depend on the vocabulary


def nearest_divisor(n: int, target: float, *, smallest: int = 1, log_scale: bool = True) -> int:
    """The divisor of ``n`` (at least ``smallest``) nearest ``target``; ties go to the larger.

    Nearness is on a log scale (a ratio: heads are a width divided by a head width); ``log_scale=False``
    measures |divisor − target| instead, as the probe's scale-down of a preset always has.
    """

    def distance(k: int) -> float:
        return abs(math.log(k / target)) if log_scale else abs(k - target)

    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    divisors = {k for k in (*small, *(n // k for k in small)) if k >= smallest}
    return min(divisors, key=lambda k: (distance(k), -k))


def heads_for_width(
    d_model: int, head_width: float, *, min_heads: int = 1, max_heads: int | None = None
) -> int:
    """Attention heads of a model of width ``d_model``: the divisor of d_model nearest d_model / head_width
    (log scale), the target clipped to [min_heads, max_heads]. Exact when head_width divides d_model."""
    target = max(float(min_heads), d_model / head_width)
    if max_heads is not None:
        target = min(float(max_heads), target)
    return nearest_divisor(d_model, target, smallest=min_heads)


def llama_ffn(d_model: int, multiple_of: int) -> int:
    """Llama's MLP width (Touvron et al. 2023, ``FeedForward`` in meta-llama/llama model.py): int(2·4d/3)
    rounded up to a multiple of ``multiple_of`` (256 in Llama: 4096 → 11008)."""
    hidden = int(2 * 4 * d_model / 3)
    return multiple_of * -(-hidden // multiple_of)


def llama_spec(
    n_layers: int,
    d_model: int,
    n_heads: int,
    *,
    vocab_size: int,
    tied_embeddings: bool,
    ffn_multiple: int,
    n_kv_heads: int | None = None,
    prefix: str = "",
    **meta: Any,
) -> ModelSpec:
    """The Llama block (Touvron et al. 2023 §2.2): pre-norm RMSNorm, SwiGLU MLP (``llama_ffn``), rotary
    positions, no biases (heads: ``heads_for_width``). ``meta`` carries name, family, source and any
    other ModelSpec field the caller sets (max_positions, seq_len)."""
    return ModelSpec.build(
        prefix=prefix,
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        ffn_dim=llama_ffn(d_model, ffn_multiple),
        ffn_type=FfnType.SWIGLU,
        vocab_size=vocab_size,
        tied_embeddings=tied_embeddings,
        position=PositionType.ROTARY,
        norm=NormType.RMSNORM,
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        **meta,
    )


def _head_dim(d: int) -> int:
    """64 below d_model 2048, 128 from there (module doc)."""
    return 64 if d < _SMALL_HEAD_UNTIL else 128


def _spec(d: int, n_layers: int, gqa: bool, vocab: int, **meta: Any) -> ModelSpec:
    """This rule's model of width d and depth n_layers (GQA: 8 KV heads)."""
    return llama_spec(
        n_layers,
        d,
        heads_for_width(d, _head_dim(d)),
        vocab_size=vocab,
        tied_embeddings=False,
        ffn_multiple=_FFN_MULTIPLE,
        n_kv_heads=GQA_KV_HEADS if gqa else None,
        **meta,
    )


@dataclass(frozen=True, order=True)
class _Shape:
    d_model: int
    n_layers: int
    gqa: bool

    @property
    def head_dim(self) -> int:
        return _head_dim(self.d_model)

    @property
    def aspect(self) -> float:
        return self.d_model / self.n_layers


@lru_cache(maxsize=1)
def _widths() -> tuple[int, ...]:
    """d_model values: multiples of 64 below 2048; then n_heads (of 128) a multiple of 4, and of 8
    from 4096 up, so tensor parallelism of 4 or 8 divides the heads of every model that needs it."""
    return (
        *range(_MIN_D, _SMALL_HEAD_UNTIL, 64),
        *range(_SMALL_HEAD_UNTIL, _TP8_FROM, 512),
        *range(_TP8_FROM, _MAX_D + 1, 1024),
    )


@lru_cache(maxsize=1024)
def _per_layer(d: int, gqa: bool) -> int:
    """Parameters in one layer (param_counts: Q, O, K, V, SwiGLU, two RMSNorms)."""
    from trilemma.estimate.params import param_counts

    return param_counts(_spec(d, 1, gqa, _ANY_VOCAB)).per_dense_layer


@lru_cache(maxsize=4096)
def _outside(d: int, vocab: int) -> int:
    """Parameters outside the layers (param_counts: token embedding, untied LM head, final RMSNorm)."""
    from trilemma.estimate.params import param_counts

    one = param_counts(_spec(d, 1, False, vocab))
    return one.total - one.per_dense_layer


def _count(s: _Shape, vocab: int) -> int:
    return _outside(s.d_model, vocab) + s.n_layers * _per_layer(s.d_model, s.gqa)


def _bin(count: int) -> int:
    return math.floor(math.log(count) / _BIN)


def _layer_range(d: int, gqa: bool, vocab: int) -> tuple[int, int]:
    """Layers allowed at width d: aspect ratio in range, ≥ 2, on the right side of GQA_FROM."""
    lo = max(_MIN_LAYERS, math.ceil(d / ASPECT_RANGE[1]))
    hi = math.floor(d / ASPECT_RANGE[0])
    a, b = _outside(d, vocab), _per_layer(d, gqa)
    first_big = max(0, math.ceil((GQA_FROM - a) / b))  # fewest layers with count ≥ GQA_FROM
    if gqa:
        lo = max(lo, first_big)
    else:
        hi = min(hi, first_big - 1)
    return lo, hi


def _layers_in_bin(d: int, gqa: bool, vocab: int, k: int) -> tuple[int, int]:
    """The run of layer counts whose model at width d falls in bin k (may be empty: lo > hi)."""
    a, b = _outside(d, vocab), _per_layer(d, gqa)
    lo = max(0, math.ceil((math.exp(k * _BIN) - a) / b))
    hi = max(-1, math.ceil((math.exp((k + 1) * _BIN) - a) / b))
    # floating point at the edges: settle each end with the same _bin() the filing uses
    while lo > 0 and _bin(a + (lo - 1) * b) >= k:
        lo -= 1
    while _bin(a + lo * b) < k:
        lo += 1
    while hi >= lo and _bin(a + hi * b) > k:
        hi -= 1
    while _bin(a + (hi + 1) * b) <= k:
        hi += 1
    return lo, hi


def _pipeline_step(layers: float) -> int:
    """Deep models get a layer count that pipeline stages divide: a multiple of 8 from about 48
    layers, of 4 from 16 (published models do the same: 32, 40, 80, 96, 126 → 128 stages of 1…)."""
    return 8 if layers >= 48 else (4 if layers >= 16 else 1)


@lru_cache(maxsize=4096)
def _representative(k: int, vocab: int) -> _Shape | None:
    """The shape standing for bin k: aspect nearest the middle, then count nearest the bin's."""
    mid_count = math.exp((k + 0.5) * _BIN)
    best: tuple[bool, float, float, int] | None = None
    choice: _Shape | None = None
    for d in _widths():
        if _outside(d, vocab) >= math.exp((k + 1) * _BIN):
            break  # wider models only get bigger
        for gqa in (False, True):
            if gqa and (d // _head_dim(d)) % GQA_KV_HEADS:
                continue
            lo, hi = _layer_range(d, gqa, vocab)
            b_lo, b_hi = _layers_in_bin(d, gqa, vocab, k)
            lo, hi = max(lo, b_lo), min(hi, b_hi)
            if lo > hi:
                continue
            ideal = d / _ASPECT_MID
            step = _pipeline_step(ideal)
            near = {min(max(math.floor(ideal), lo), hi), min(max(math.ceil(ideal), lo), hi)}
            near |= {
                x
                for x in (step * math.floor(ideal / step), step * math.ceil(ideal / step))
                if lo <= x <= hi
            }
            for layers in near:
                s = _Shape(d, layers, gqa)
                key = (
                    layers % step != 0,
                    abs(math.log(s.aspect / _ASPECT_MID)),
                    abs(math.log(_count(s, vocab) / mid_count)),
                    d,
                )
                if best is None or key < best:
                    best, choice = key, s
    return choice


def _smallest_bin(vocab: int) -> int:
    smallest = min(
        _count(_Shape(d, max(_MIN_LAYERS, math.ceil(d / ASPECT_RANGE[1])), False), vocab)
        for d in _widths()[:8]
    )
    return _bin(smallest)


def _nearest(target: float, vocab: int) -> _Shape | None:
    """The bin representative whose count is nearest the target (log scale; ties → smaller)."""
    k = math.floor(math.log(target) / _BIN)
    floor_bin = _smallest_bin(vocab)
    found: list[_Shape] = []
    own = _representative(k, vocab) if k >= floor_bin else None
    if own:
        found.append(own)
    for j in range(k - 1, floor_bin - 1, -1):  # the nearest non-empty bin below
        if rep := _representative(j, vocab):
            found.append(rep)
            break
    start = max(k + 1, floor_bin)
    for j in range(start, start + 200):  # and above (200 bins: a factor of 52)
        if rep := _representative(j, vocab):
            found.append(rep)
            break
    if not found:
        return None
    return min(found, key=lambda s: (abs(math.log(_count(s, vocab) / target)), _count(s, vocab)))


def _label(n: float) -> str:
    for unit in ("T", "B", "M", "K"):
        scale = SI[unit]
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.3g}"


def model_for_params(target: float, vocab_size: int = 32000, field: str = "target") -> ModelSpec:
    """A Llama-style ModelSpec whose total parameter count is near ``target`` (rule: module doc).

    Within 5 % (in practice 3.2 %, and about 2 % from 1B up) from 50M to 10T parameters with a
    32000-token vocabulary. A target no shape of the rule comes within 5 % of (one too small for
    the vocabulary's embedding tables) raises InputError, as do target ≤ 0, target > 1e13 and a
    vocab_size below 1. ``field`` names the target in those errors (the user's flag: model, params).
    """
    number = isinstance(target, (int, float)) and not isinstance(target, bool)
    if not number or not math.isfinite(target) or target <= 0:
        raise InputError(field, target, "a positive number of parameters, e.g. 7e9")
    if target > MAX_TARGET:
        raise InputError(field, target, f"at most {MAX_TARGET:.0e} parameters")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise InputError("vocab_size", vocab_size, "a positive integer, e.g. 32000")
    shape = _nearest(float(target), vocab_size)
    total = _count(shape, vocab_size) if shape else 0
    if shape is None or abs(total / target - 1) > _TOLERANCE:
        nearest = f"the nearest has {total:,} ({total / target - 1:+.0%})" if shape else "none fits"
        raise InputError(
            field,
            target,
            f"a size within 5 % of a shape this rule builds with vocab_size "
            f"{vocab_size} ({nearest}; small models are mostly their two "
            f"{vocab_size}×d_model embedding tables)",
        )
    d, layers, head_dim = shape.d_model, shape.n_layers, shape.head_dim
    kv = GQA_KV_HEADS if shape.gqa else None
    return _spec(
        d,
        layers,
        shape.gqa,
        vocab_size,
        prefix="model_for_params",
        name=f"auto-{_label(total)} (L={layers}, d={d})",  # named by the count it has, not the target asked
        family="auto",
        source=(
            f"shape rule (trilemma.shape): Llama block, head_dim {head_dim}, "
            f"ffn 8/3·d to 256, "
            f"d/L in [64, 128] nearest 90.5 (Kaplan 2020 Fig. 5), "
            f"{'GQA 8 KV heads' if kv else 'MHA'} (GQA from 30B, Llama 2); "
            f"target {target:.4g}, count {total:,}"
        ),
    )
