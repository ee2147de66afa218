"""The software stack that runs the training loop, as the set of features it runs.

After the hardware, a step's time is decided by who wrote the loop: which attention kernel, which
kernels are fused, which communication overlaps compute, and how the host issues kernels. A stack
is those features, each timed by the step model's physical terms (trilemma.estimate), never a
scalar efficiency. Presets (``presets/stacks.toml``) cite each feature from the stack's own code or
docs at a dated commit.
"""

from __future__ import annotations

from pydantic import Field

from trilemma.specs.base import Spec
from trilemma.specs.enums import StrEnum


class AttentionKernel(StrEnum):
    """The attention core's kernel."""

    FLASH3 = "flash3"  # FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608): Hopper only
    FLASH2 = "flash2"  # FlashAttention-2 (Dao 2023, arXiv 2307.08691), cuDNN's fused attention
    FLASH1 = "flash1"  # FlashAttention (Dao et al. 2022, arXiv 2205.14135)
    FUSED_SOFTMAX = "fused-softmax"  # QKᵀ and ·V as GEMMs, one fused scale-mask-softmax kernel
    EAGER = "eager"  # QKᵀ, scale, mask, softmax, ·V as separate eager ops

    @property
    def flash(self) -> bool:
        """A tiled kernel that never writes the score matrix to HBM."""
        return self in (AttentionKernel.FLASH1, AttentionKernel.FLASH2, AttentionKernel.FLASH3)


class HostMode(StrEnum):
    """How the host issues a step's kernels (trilemma.estimate.host)."""

    EAGER = "eager"  # PyTorch eager from Python: one dispatch per operator
    COMPILE = "compile"  # torch.compile (Inductor): fused kernels launched from generated code
    CUDA_GRAPHS = "cuda-graphs"  # a captured graph: one host launch per graph replay
    NATIVE = "native"  # a C++/CUDA loop (llm.c) or an XLA program (JAX): launch latency only


def feature_values(spec: Spec) -> dict[str, object]:
    """A preset's features (every field but its name, aliases, description and source) as plain
    values: enums by their value. StackSpec's and TrainerSpec's ``features``."""
    return {
        k: (v.value if isinstance(v, StrEnum) else v)
        for k, v in spec.model_dump().items()
        if k not in ("name", "aliases", "description", "source")
    }


class StackSpec(Spec):
    """One training stack's features. Flags given on the command line override the features they
    name (``--no-flash``, ``--fused-loss``, ``--compile``, ``--async-tp``)."""

    name: str = Field(min_length=1, max_length=64)
    aliases: tuple[str, ...] = ()
    description: str = ""
    attention: AttentionKernel = AttentionKernel.FLASH2
    fused_norm: bool = Field(True, description="a norm's forward and backward one kernel each")
    fused_act: bool = Field(True, description="bias + GeLU or SwiGLU one kernel")
    fused_rotary: bool = Field(True, description="rotary embedding one kernel for q and k")
    fused_loss: bool = Field(
        False, description="a fused (vocab-parallel) cross-entropy kernel over the logits"
    )
    dp_overlap: bool = Field(
        True, description="the data-parallel gradient reduce overlaps the backward, by buckets"
    )
    tp_overlap: bool = Field(
        False, description="tensor-parallel collectives overlap the GEMMs (async TP, userbuffers)"
    )
    async_tp_host_ops: int = Field(
        0,
        ge=0,
        le=10_000,
        description="host operators per layer (forward and backward) its asynchronous TP linears issue "
        "from Python beyond their kernels (0: async TP inside fused kernels or a compiled graph)",
    )
    pp_overlap: bool = Field(
        False, description="pipeline sends and receives overlap compute (non-blocking P2P)"
    )
    pp_cost_split: bool = Field(
        False,
        description="pipeline stages split by each block's parameter cost, the LM head counted, "
        "instead of an even split of the layers",
    )
    distributed_optimizer: bool = Field(
        True, description="optimizer states sharded over data parallelism (ZeRO-1 or more)"
    )
    ep_overlap: bool = Field(
        False,
        description="a micro-batch's expert-parallel all-to-alls run while another computes "
        "(DeepSeek-V3's DualPipe pairs a forward and a backward chunk)",
    )
    ep_node_limit: int = Field(
        0,
        ge=0,
        le=1024,
        description="nodes a token is dispatched to at most, once over the network each, then "
        "forwarded over the scale-up link (node-limited routing); 0: no limit, NCCL's all-to-all",
    )
    ep_fp8_dispatch: bool = Field(
        False,
        description="in fp8 training, the all-to-alls towards the experts carry fp8, the combines "
        "bf16 (DeepSeek-V3's low-precision communication)",
    )
    pp_dualpipe: bool = Field(
        False,
        description="DualPipe's bidirectional pipeline schedule: its bubble instead of 1F1B's, at "
        "an even pipeline degree",
    )
    host: HostMode = HostMode.EAGER
    source: str = ""

    @property
    def features(self) -> dict[str, object]:
        """The features as plain values (the JSON's ``plan.stack.features``)."""
        return feature_values(self)


__all__ = ["AttentionKernel", "HostMode", "StackSpec", "feature_values"]
