"""The registry of parallel-layout axes: each axis written once.

An axis is a way of splitting one training step over devices (tensor, pipeline, data, context and
expert parallelism, virtual pipeline stages, sequence parallelism, the ZeRO stage, recomputation,
the micro-batch). Its entry gives everything the rest of trilemma derives from it:

- the ``Layout`` spec's field (name, type, default, description) and its JSON key;
- the CLI flag of ``estimate`` (``trilemma.cli``) and the parsing of its text, with one-line errors;
- the candidate values ``estimate`` searches (a function of the model, GPU count and node) and the
  trimmed set ``solve`` multiplies by shapes, GPU types and counts;
- its legality rules, each with the reason bit and the sentence shown when a layout breaks it;
- its integer code in the numpy arrays the estimators broadcast over (``estimate.layouts``);
- its label in tables.

Adding an axis is one entry here plus its memory and time terms (``estimate/memory.py``,
``estimate/time.py``). The registry lives with the specs because ``Layout`` is built from it and
dependencies point one way (specs ← estimate ← solve).

Sources for the rules: Megatron-LM (Shoeybi et al. 2019; Narayanan et al. 2021, arXiv 2104.04473
§2-3) for TP/PP/interleaving, Korthikanti et al. 2022 (arXiv 2205.05198) for SP and selective
recomputation, Rajbhandari et al. 2020 (ZeRO) for the stages, Megatron-Core for CP (2·cp chunks
for causal load balance) and for EP carved out of DP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, create_model

from trilemma.specs.axis import MAX_DEGREE, Axis, Rule, divisors, pow2_upto
from trilemma.specs.base import Spec
from trilemma.specs.enums import Recompute, ZeroStage
from trilemma.specs.parallel import ParallelDims, sequence_parallel

# reason bits: why a layout cannot run (0 = legal). The per-axis ones are attached to their axis
# below; the others concern the whole layout (estimate/layouts.py).
R_GPUS = 1 << 0  # tp·cp·pp·dp ≠ number of GPUs
R_HEADS = 1 << 1  # tp does not divide the attention (or kv) heads / ffn width
R_LAYERS = 1 << 2  # pp·vp exceeds the layers + 2 (end chunks with the embedding or head alone)
R_BATCH = 1 << 3  # global batch not divisible by dp × micro-batch (explicit batch)
R_DP_TOO_LARGE = 1 << 4  # rounding to dp × micro-batch moves the batch too far: GPUs DP cannot use
R_ZERO_PP = 1 << 5  # ZeRO-2/3 with pipeline parallelism (unsupported by Megatron/DeepSpeed)
R_EXPERTS = 1 << 6  # ep does not divide experts or dp; ep > 1 on a dense model
R_SEQ = 1 << 7  # cp does not divide the sequence (2·cp for load-balanced causal CP)
R_VP = 1 << 8  # virtual stages without pipeline parallelism
R_OOM = 1 << 9  # does not fit in device memory
R_HOST_OOM = 1 << 10  # offloaded states do not fit in host memory
R_OFFLOAD_ZERO = 1 << 11  # the plan offloads at a ZeRO stage that cannot (Offload.min_zero)


def _layers_ok(m: Any, L: Any, seq: int) -> Any:
    # every virtual stage holds at least one layer, save that the first may hold only the embedding
    # and the last only the output projection and loss: Llama 3.1 405B ran 126 layers on pp 16 with
    # interleaving, one layer fewer on the first and last stages (Dubey et al. 2024 §3.3.2);
    # Megatron-Core's --account-for-embedding-in-pipeline-split / --account-for-loss-in-...
    return L.pp * L.vp <= m.n_layers + 2


def _heads_ok(m: Any, L: Any, seq: int) -> Any:
    kv = m.kv_heads
    ok = (m.n_heads % L.tp == 0) & ((kv % L.tp == 0) | (L.tp % kv == 0)) & (m.ffn_dim % L.tp == 0)
    if m.is_moe:
        ok &= m.expert_ffn % L.tp == 0
    return ok


def _experts_ok(m: Any, L: Any, seq: int) -> Any:
    n_exp = max(m.n_experts, 1)
    return (n_exp % L.ep == 0) & (L.dp % L.ep == 0) & (m.is_moe | (L.ep == 1))


def _seq_ok(m: Any, L: Any, seq: int) -> Any:
    chunks = np.where(L.cp > 1, 2 * L.cp, 1) if m.causal else L.cp
    return seq % chunks == 0


#: every axis, in the order of the Layout's fields and of its JSON
AXES: tuple[Axis, ...] = (
    Axis(
        "tp",
        int,
        1,
        "tensor parallel degree",
        "TP",
        "--tp",
        # up to the scale-up domain, and beyond it only in powers of two up to 2× it
        lambda c: pow2_upto(min(c.n_gpus, 2 * c.gpus_per_node, c.model.n_heads)),
        lambda moe: (1, 2, 4, 8),
        (
            Rule(
                R_HEADS,
                "tp must divide the attention heads, the key/value heads (or be a multiple of them) "
                "and the FFN width",
                _heads_ok,
            ),
        ),
    ),
    Axis(
        "pp",
        int,
        1,
        "pipeline parallel degree",
        "PP",
        "--pp",
        # stages may be uneven (below), so any pp that divides the GPUs, up to the layers
        lambda c: [p for p in divisors(c.n_gpus) if p <= min(c.model.n_layers, 128)],
        lambda moe: (1, 2, 4, 8, 16),
        (
            Rule(
                R_LAYERS,
                "pp × virtual stages must not exceed the number of layers + 2 (an end chunk may hold the "
                "embedding or the head alone)",
                _layers_ok,
            ),
        ),
    ),
    Axis("dp", int, 1, "data parallel degree", "DP", None, lambda c: [1], None),
    Axis(
        "cp",
        int,
        1,
        "context parallel degree",
        "CP",
        "--cp",
        lambda c: pow2_upto(min(c.n_gpus, 32)) if c.max_seq >= 16384 else [1],
        None,
        (
            Rule(
                R_SEQ,
                "cp must divide the sequence length (2·cp chunks for causal load balance)",
                _seq_ok,
            ),
        ),
        shown=lambda v: v > 1,
    ),
    Axis(
        "ep",
        int,
        1,
        "expert parallel degree (MoE); divides dp",
        "EP",
        "--ep",
        lambda c: pow2_upto(min(c.n_gpus, c.model.n_experts)) if c.model.is_moe else [1],
        lambda moe: (1, 2, 4, 8) if moe else None,
        (
            Rule(
                R_EXPERTS,
                "ep must divide the number of experts and dp (and be 1 for a dense model)",
                _experts_ok,
            ),
        ),
        shown=lambda v: v > 1,
    ),
    Axis(
        "vp",
        int,
        1,
        "virtual pipeline stages per device (interleaved 1F1B)",
        "VP",
        "--vp",
        lambda c: [1, 2, 3, 4, 6, 8],
        lambda moe: (1, 2),
        (
            Rule(
                R_VP,
                "virtual pipeline stages need pp > 1",
                lambda m, L, s: ~((L.vp > 1) & (L.pp == 1)),
            ),
        ),
        shown=lambda v: v > 1,
    ),
    Axis(
        "sp",
        bool,
        True,
        "sequence parallelism with TP (Korthikanti 2022)",
        "SP",
        "--sp/--no-sp",
        lambda c: [True],
        None,
        shown=lambda v: False,
    ),
    Axis(
        "zero",
        ZeroStage,
        ZeroStage.ONE,
        "ZeRO stage over DP, 0-3 (3 = FSDP full shard)",
        "ZeRO",
        "--zero",
        lambda c: list(ZeroStage),
        lambda moe: (ZeroStage.ONE, ZeroStage.TWO, ZeroStage.THREE),
        (
            Rule(
                R_ZERO_PP,
                "ZeRO stage 2/3 cannot be combined with pipeline parallelism",
                lambda m, L, s: ~((L.pp > 1) & (L.zero >= 2)),
            ),
        ),
        short="Z",
    ),
    Axis(
        "recompute",
        Recompute,
        Recompute.NONE,
        "activation recomputation: none, selective (attention core), "
        "full (whole layers) or op (torchtitan's op-level: every other matmul and the elementwise ops)",
        "recompute",
        "--recompute",
        lambda c: list(Recompute),
        # the solver keeps Korthikanti's three (op-level sits between selective and full: it won no README
        # scenario's optimum and would cost a third more candidates; estimate searches it)
        lambda moe: (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL),
        short="",
    ),
    Axis(
        "micro_batch",
        int,
        1,
        "sequences per micro-batch",
        "micro-batch",
        "--micro-batch",
        lambda c: [1, 2, 4, 8, 16, 32],
        lambda moe: (1, 2, 4, 8),
        short="mb",
    ),
)

AXIS: dict[str, Axis] = {a.name: a for a in AXES}

#: whole-layout reasons (not tied to one axis) and every axis rule, in bit order
REASONS: dict[int, str] = dict(
    sorted(
        {
            R_GPUS: "tp × cp × pp × dp must equal the number of GPUs",
            R_BATCH: "the global batch (in sequences) must be a multiple of dp × micro-batch",
            R_DP_TOO_LARGE: "the global batch cannot be rounded to a multiple of dp × micro-batch within tolerance: "
            "more data-parallel GPUs than the batch can use",
            R_OOM: "out of memory",
            R_HOST_OOM: "the offloaded optimizer states (and weights) do not fit in host memory",
            R_OFFLOAD_ZERO: "offload needs ZeRO: optimizer states move at stage 1 or more, "
            "parameters at stage 3 (DeepSpeed ZeRO-Offload / ZeRO-Infinity)",
            **{r.bit: r.text for a in AXES for r in a.rules},
        }.items()
    )
)


def reason_text(bits: int) -> list[str]:
    return [txt for bit, txt in REASONS.items() if bits & bit]


def _field(a: Axis) -> tuple[Any, Any]:
    if a.kind is int:
        return int, Field(a.default, ge=1, description=a.help)
    return a.kind, Field(a.default, description=a.help)


class _LayoutBase(Spec):
    """A parallel layout. GPUs = tp × cp × pp × dp; EP is carved out of DP (Megatron-Core).
    Its fields are the axes of ``trilemma.specs.axes.AXES``."""

    @property
    def dims(self) -> ParallelDims:
        """The parallel degrees (tp, cp, pp, dp, ep, sp) and their products."""
        return ParallelDims(self.tp, self.cp, self.pp, self.dp, self.ep, self.sp)  # type: ignore[attr-defined]

    @property
    def n_gpus(self) -> int:
        return self.dims.n_gpus

    def summary(self) -> str:
        """One line, as errors print it: ``tp=8 pp=1 dp=4 zero=1 recompute=none micro_batch=1``."""
        return " ".join(
            f"{a.name}={_text(getattr(self, a.name))}"
            for a in AXES
            if a.shown(getattr(self, a.name))
        )

    def label(self, compact: bool = False) -> str:
        """For tables: ``TP 8 · PP 2 · DP 4 · SP · ZeRO-1 · recompute none · micro-batch 1``, or
        compact: ``TP8 PP2 DP4 SP Z1 none mb1`` (SP shown when on; CP, EP, VP when above 1)."""
        parts = []
        for a in AXES:
            v = getattr(self, a.name)
            name = a.short if compact and a.short is not None else a.label
            if a.kind is bool:
                if sequence_parallel(v, self.tp):  # type: ignore[attr-defined]
                    parts.append(name)
            elif a.shown(v):
                parts.append(
                    f"{name}{'' if compact or a.kind is ZeroStage else ' '}{'-' if a.kind is ZeroStage and not compact else ''}{_text(v)}"
                )
        return (" " if compact else " · ").join(parts)


def _text(v: Any) -> str:
    return str(int(v)) if isinstance(v, ZeroStage) else str(v)


Layout = create_model(
    "Layout", __base__=_LayoutBase, __module__=__name__, **{a.name: _field(a) for a in AXES}
)  # type: ignore[call-overload]
Layout.__doc__ = _LayoutBase.__doc__


__all__ = [
    "AXES",
    "AXIS",
    "Layout",
    "MAX_DEGREE",
    "REASONS",
    "reason_text",
]
