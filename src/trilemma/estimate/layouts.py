"""Parallel layouts as arrays: the candidate space, its legality masks (with reasons), batch rounding.

One layout is a row; the estimators broadcast over all rows at once (the solver and `estimate`
without a given layout both enumerate here). Illegal rows are masked, each with a reason bit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from trilemma.estimate.flops import RECOMPUTE_CODES
from trilemma.specs import Layout, ModelSpec, Recompute, Stage

# reason bits: why a layout cannot run (0 = legal)
R_GPUS = 1 << 0  # tp·cp·pp·dp ≠ number of GPUs
R_HEADS = 1 << 1  # tp does not divide the attention (or kv) heads / ffn width
R_LAYERS = 1 << 2  # pp·vp does not divide the layers
R_BATCH = 1 << 3  # global batch not divisible by dp × micro-batch (explicit batch)
R_DP_TOO_LARGE = 1 << 4  # rounding to dp × micro-batch moves the batch too far: GPUs DP cannot use
R_ZERO_PP = 1 << 5  # ZeRO-2/3 with pipeline parallelism (unsupported by Megatron/DeepSpeed)
R_EXPERTS = 1 << 6  # ep does not divide experts or dp; ep > 1 on a dense model
R_SEQ = 1 << 7  # cp does not divide the sequence (2·cp for load-balanced causal CP)
R_VP = 1 << 8  # virtual stages without pipeline parallelism
R_OOM = 1 << 9  # does not fit in device memory

REASONS = {
    R_GPUS: "tp × cp × pp × dp must equal the number of GPUs",
    R_HEADS: "tp must divide the attention heads, the key/value heads (or be a multiple of them) and the FFN width",
    R_LAYERS: "pp × virtual stages must divide the number of layers",
    R_BATCH: "the global batch (in sequences) must be a multiple of dp × micro-batch",
    R_DP_TOO_LARGE: "the global batch cannot be rounded to a multiple of dp × micro-batch within tolerance: more data-parallel GPUs than the batch can use",
    R_ZERO_PP: "ZeRO stage 2/3 cannot be combined with pipeline parallelism",
    R_EXPERTS: "ep must divide the number of experts and dp (and be 1 for a dense model)",
    R_SEQ: "cp must divide the sequence length (2·cp chunks for causal load balance)",
    R_VP: "virtual pipeline stages need pp > 1",
    R_OOM: "out of memory",
}


def reason_text(bits: int) -> list[str]:
    return [txt for bit, txt in REASONS.items() if bits & bit]


@dataclass(frozen=True)
class LayoutArrays:
    """Parallel layouts, one per row (int64 arrays of equal length; sp is 0/1; rc 0/1/2)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    vp: np.ndarray
    sp: np.ndarray
    zero: np.ndarray
    rc: np.ndarray
    mb: np.ndarray

    def __len__(self) -> int:
        return int(np.prod(self.shape))

    @property
    def shape(self) -> tuple[int, ...]:
        """Broadcast shape of the fields: (n,) for a list of layouts; a grid when the solver gives
        each axis its own dimension, so every quantity is computed at its natural size."""
        return np.broadcast_shapes(*(np.shape(getattr(self, f.name)) for f in fields(self)))

    @property
    def n_gpus(self) -> np.ndarray:
        return self.tp * self.cp * self.pp * self.dp

    @classmethod
    def from_layouts(cls, layouts: list[Layout]) -> "LayoutArrays":
        col = lambda f: np.array([f(x) for x in layouts], dtype=np.int64)  # noqa: E731
        return cls(tp=col(lambda x: x.tp), pp=col(lambda x: x.pp), dp=col(lambda x: x.dp),
                   cp=col(lambda x: x.cp), ep=col(lambda x: x.ep), vp=col(lambda x: x.vp),
                   sp=col(lambda x: int(x.sp and x.tp > 1)), zero=col(lambda x: x.zero),
                   rc=col(lambda x: RECOMPUTE_CODES[x.recompute]), mb=col(lambda x: x.micro_batch))

    def row(self, i: int) -> Layout:
        rc = {v: k for k, v in RECOMPUTE_CODES.items()}[int(self.rc[i])]
        return Layout(tp=int(self.tp[i]), pp=int(self.pp[i]), dp=int(self.dp[i]), cp=int(self.cp[i]),
                      ep=int(self.ep[i]), vp=int(self.vp[i]), sp=bool(self.sp[i]), zero=int(self.zero[i]),
                      recompute=rc, micro_batch=int(self.mb[i]))

    def take(self, idx: np.ndarray) -> "LayoutArrays":
        return LayoutArrays(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


def _pow2_upto(n: int) -> list[int]:
    out, k = [], 1
    while k <= n:
        out.append(k)
        k *= 2
    return out


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def candidate_layouts(m: ModelSpec, n_gpus: int, gpus_per_node: int, fixed: dict[str, object] | None = None,
                      max_seq: int = 2048) -> LayoutArrays:
    """Enumerate the layouts worth trying for ``n_gpus`` (the cross product, legal or not).

    TP up to the scale-up domain (and beyond only in powers of two up to 2× it), PP over divisors
    of the layers, CP only for long sequences, EP over powers of two for MoE, ZeRO 0-3, three
    recompute modes, micro-batches 1-32. ``fixed`` pins any axis to one value.
    """
    fixed = {k: v for k, v in (fixed or {}).items() if v is not None}
    tps = [t for t in _pow2_upto(min(n_gpus, 2 * gpus_per_node, m.n_heads))]
    pps = [p for p in _divisors(m.n_layers) if p <= min(n_gpus, 128)]
    cps = [c for c in _pow2_upto(min(n_gpus, 32))] if max_seq >= 16384 else [1]
    eps = _pow2_upto(min(n_gpus, m.n_experts)) if m.is_moe else [1]
    vps = [1, 2, 4]
    axes: dict[str, list] = {
        "tp": tps, "pp": pps, "cp": cps, "ep": eps, "vp": vps, "sp": [1],
        "zero": [0, 1, 2, 3], "rc": [0, 1, 2], "mb": [1, 2, 4, 8, 16, 32],
    }
    if "recompute" in fixed:
        fixed["rc"] = RECOMPUTE_CODES[Recompute(fixed.pop("recompute"))]
    if "micro_batch" in fixed:
        fixed["mb"] = fixed.pop("micro_batch")
    for k, v in fixed.items():
        if k == "dp":
            continue
        axes[k] = [int(v)]
    grids = np.meshgrid(*[np.asarray(v, dtype=np.int64) for v in axes.values()], indexing="ij")
    flat = {k: g.ravel() for k, g in zip(axes, grids)}
    denom = flat["tp"] * flat["pp"] * flat["cp"]
    keep = (n_gpus % denom == 0)
    flat = {k: v[keep] for k, v in flat.items()}
    dp = n_gpus // (flat["tp"] * flat["pp"] * flat["cp"])
    if "dp" in fixed:
        keep = dp == int(fixed["dp"])
        flat = {k: v[keep] for k, v in flat.items()}
        dp = dp[keep]
    # drop duplicate virtual-stage rows for pp = 1 (unless the user pinned vp: then legal_mask says
    # why it cannot work); sp is meaningless without tp
    keep = (flat["pp"] > 1) | (flat["vp"] == 1) | ("vp" in fixed)
    flat = {k: v[keep] for k, v in flat.items()}
    dp = dp[keep]
    flat["sp"] = np.where(flat["tp"] > 1, flat["sp"], 0)
    return LayoutArrays(dp=dp, **flat)


def batch_sequences(stage: Stage) -> int:
    """The stage's target global batch in whole sequences (at least one)."""
    return max(1, int(round(stage.global_batch_tokens / stage.seq_len)))


def legal_mask(m: ModelSpec, L: LayoutArrays, stage: Stage, n_gpus: int | np.ndarray,
               batch_tolerance: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(global batch in sequences per row after rounding, reason bits per row; 0 = legal).

    A target batch (a preset's published one) is rounded to the nearest multiple of dp × micro-
    batch; a row whose rounding moves it by more than ``batch_tolerance`` (relative) is illegal,
    so TP/PP absorb GPUs that DP cannot use. An explicit batch must divide exactly.
    """
    target = batch_sequences(stage)
    unit = L.dp * L.mb
    full = np.broadcast_shapes(L.shape, np.shape(m.n_layers), np.shape(n_gpus))
    if stage.explicit_batch:
        batch = np.full(full, target, dtype=np.int64)
        bad_batch = (target % unit) != 0
    else:
        batch = np.maximum(unit, np.rint(target / unit).astype(np.int64) * unit)
        bad_batch = np.zeros(full, dtype=bool)
    r = np.zeros(full, dtype=np.int64)
    r |= np.where(L.n_gpus != n_gpus, R_GPUS, 0)
    kv = m.kv_heads
    heads_ok = (m.n_heads % L.tp == 0) & ((kv % L.tp == 0) | (L.tp % kv == 0)) & (m.ffn_dim % L.tp == 0)
    if m.is_moe:
        heads_ok &= m.expert_ffn % L.tp == 0
    r |= np.where(heads_ok, 0, R_HEADS)
    r |= np.where(m.n_layers % (L.pp * L.vp) == 0, 0, R_LAYERS)
    r |= np.where(bad_batch, R_BATCH, 0)
    r |= np.where(np.abs(batch - target) > batch_tolerance * target, R_DP_TOO_LARGE, 0)
    r |= np.where((L.pp > 1) & (L.zero >= 2), R_ZERO_PP, 0)
    n_exp = max(m.n_experts, 1)
    ep_ok = (n_exp % L.ep == 0) & (L.dp % L.ep == 0) & (m.is_moe | (L.ep == 1))
    r |= np.where(ep_ok, 0, R_EXPERTS)
    cp_chunks = np.where(L.cp > 1, 2 * L.cp, 1) if m.causal else L.cp
    r |= np.where(stage.seq_len % cp_chunks == 0, 0, R_SEQ)
    r |= np.where((L.vp > 1) & (L.pp == 1), R_VP, 0)
    return batch, r
