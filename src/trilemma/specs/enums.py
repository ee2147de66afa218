"""Closed choices. Every one is a StrEnum so JSON and the CLI see plain lowercase strings."""

from __future__ import annotations

from enum import Enum
from typing import Any


class StrEnum(str, Enum):
    """``enum.StrEnum`` for Python 3.10 too."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object, field: str) -> StrEnum:
        """The member whose value is ``value`` (any case; ``-`` and ``_`` alike), else an InputError
        naming ``field`` and listing the values (exit status 2 on the command line)."""
        key = str(value).strip().lower()
        for m in cls:
            if key.replace("_", "-") == m.value.replace("_", "-"):
                return m
        from trilemma.errors import InputError

        raise InputError(field, value, " or ".join(m.value.replace("_", "-") for m in cls))


class Precision(StrEnum):
    """Compute precision of the matmuls (selects the hardware's peak FLOP/s)."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"


class Recompute(StrEnum):
    """Activation recomputation (Korthikanti et al. 2022, arXiv 2205.05198 §4-5)."""

    NONE = "none"
    SELECTIVE = "selective"  # recompute attention core (QK^T, softmax, dropout, ·V) only
    FULL = "full"  # store each layer's input, recompute the whole layer forward in backward
    # torchtitan's op-level selective checkpointing (selective_ac_option = "op", torchtitan
    # distributed/activation_checkpoint.py): save the outputs of attention and of every other matmul
    # of a layer (1st, 3rd, …), recompute the rest — the other matmuls and every elementwise op
    OP = "op"

    @property
    def code(self) -> int:
        """The int64 code of this mode in the layout arrays (trilemma.estimate.layouts): fixed by
        name in ``_RECOMPUTE_CODES``, never by the order of the members."""
        return _RECOMPUTE_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> Recompute:
        """The mode whose ``code`` is ``code``."""
        return next(r for r, c in _RECOMPUTE_CODES.items() if c == int(code))

    @classmethod
    def mask(cls, codes: Any, *modes: Recompute) -> Any:
        """True where ``codes`` (an int64 array of ``code``, or one code) is one of ``modes``."""
        out = codes == modes[0].code
        for mode in modes[1:]:
            out = out | (codes == mode.code)
        return out


_RECOMPUTE_CODES: dict[Recompute, int] = {
    Recompute.NONE: 0,
    Recompute.SELECTIVE: 1,
    Recompute.FULL: 2,
    Recompute.OP: 3,
}


class ZeroStage(int, Enum):
    """ZeRO stage over data parallelism (Rajbhandari et al. 2020, arXiv 1910.02054 §5): what each
    data-parallel rank shards. An int in JSON and on the command line."""

    NONE = 0  # everything replicated (plain DDP)
    ONE = 1  # optimizer states sharded (Megatron's distributed optimizer)
    TWO = 2  # + gradients
    THREE = 3  # + parameters (FSDP full shard)

    def __str__(self) -> str:
        return str(self.value)


class Objective(StrEnum):
    """The corner `solve` optimises (the unpinned one by default)."""

    TIME = "time"  # wall-clock seconds
    COST = "cost"  # dollars
    LOSS = "loss"  # the law's loss
    ENERGY = "energy"  # joules


class FfnType(StrEnum):
    GELU = "gelu"  # 2 matrices: d×f, f×d
    RELU = "relu"  # 2 matrices (OPT)
    SWIGLU = "swiglu"  # 3 matrices: gate, up (d×f) and down (f×d) — Shazeer 2020
    GEGLU = "geglu"  # 3 matrices


class NormType(StrEnum):
    LAYERNORM = "layernorm"  # weight + bias: 2d parameters
    RMSNORM = "rmsnorm"  # weight only: d parameters


class QkNorm(StrEnum):
    """A norm on the queries and keys before the attention scores (its weights per layer)."""

    NONE = "none"
    HEAD = "head"  # one RMSNorm of head_dim shared by every head, for Q and for K (Qwen3, Gemma 3)
    FULL = "full"  # over all heads: n_heads·head_dim for Q, n_kv_heads·head_dim for K (OLMo 2)


class PositionType(StrEnum):
    LEARNED = "learned"  # max_positions × d table (GPT-2/3, BERT, OPT)
    ROTARY = "rotary"  # no parameters (Su et al. 2021)
    ALIBI = "alibi"  # no parameters (Press et al. 2022)
    RELATIVE = "relative"  # Transformer-XL relative encoding: a d×d_attn projection + 2 biases per layer (Gopher, Chinchilla)
    NONE = "none"


class Optimizer(StrEnum):
    """The optimizer; its state per trainable parameter is ``trilemma.estimate.finetune.optimizer_state_bytes``."""

    ADAMW = "adamw"  # two fp32 moments per trainable parameter
    SGD = "sgd"  # one fp32 momentum buffer
    ADAMW_8BIT = "adamw-8bit"  # bitsandbytes AdamW8bit: two block-wise quantised 8-bit moments (Dettmers et al. 2022)
    PAGED_ADAMW_8BIT = (
        "paged-adamw-8bit"  # the same in paged (unified) memory (QLoRA, Dettmers et al. 2023 §3)
    )
    ADAFACTOR = "adafactor"  # factored second moment, no first moment (Shazeer & Stern 2018)
    LION = "lion"  # one momentum buffer (Chen et al. 2023)


class FinetuneMethod(StrEnum):
    """How an existing model is fine-tuned (None on a plan: pre-training from scratch)."""

    FULL = "full"  # every weight trains
    LORA = "lora"  # low-rank adapters on a frozen base (Hu et al. 2021)
    QLORA = (
        "qlora"  # LoRA on a 4-bit NormalFloat base with double quantisation (Dettmers et al. 2023)
    )
    FREEZE = "freeze"  # only the last N layers train (LLaMA-Factory's freeze tuning)


class BasePrecision(StrEnum):
    """Storage of a fine-tune's frozen base weights."""

    BF16 = "bf16"
    FP16 = "fp16"
    INT8 = "int8"  # LLM.int8 (Dettmers et al. 2022, arXiv 2208.07339): int8 rows + an fp32 scale per row
    NF4 = "nf4"  # 4-bit NormalFloat, block-wise scales (QLoRA)
    GPTQ4 = "gptq4"  # GPTQ 4-bit (Frantar et al. 2022, arXiv 2210.17323), groups of 128, run by AutoGPTQ

    @property
    def quantised(self) -> bool:
        """Stored in fewer than 16 bits: dequantised before each use (int8, nf4, gptq4)."""
        return self in (BasePrecision.INT8, BasePrecision.NF4, BasePrecision.GPTQ4)

    @property
    def four_bit(self) -> bool:
        """A 4-bit base, trained as QLoRA (nf4, gptq4)."""
        return self in (BasePrecision.NF4, BasePrecision.GPTQ4)


class Offload(StrEnum):
    """What moves to host memory (DeepSpeed ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity, Rajbhandari 2021)."""

    NONE = "none"
    OPTIMIZER = "optimizer"  # fp32 master, moments and the fp16 gradients on the host; CPU Adam
    OPTIMIZER_PARAMS = "optimizer+params"  # also the 16-bit weights, streamed in layer by layer

    @property
    def min_zero(self) -> ZeroStage:
        """The lowest ZeRO stage that offloads this: DeepSpeed moves optimizer states at stage 1 or
        more and parameters at stage 3 only (ZeRO-Infinity; DeepSpeed's config docs, offload_param)."""
        return {Offload.NONE: ZeroStage.NONE, Offload.OPTIMIZER: ZeroStage.ONE}.get(
            self, ZeroStage.THREE
        )


class Task(StrEnum):
    """What the model's head predicts."""

    CAUSAL_LM = (
        "causal-lm"  # the next token over the vocabulary: an LM head, V·d per token, and its logits
    )
    CLASSIFICATION = (
        "classification"  # a few classes from a pooled token (BertForSequenceClassification): no
    )
    # vocabulary logits, and its head's FLOPs are a d × classes matmul on one token per sequence (negligible)


class Dtype(StrEnum):
    """Storage type of a tensor in the memory inventory (its size: DTYPE_BYTES)."""

    FP32 = "fp32"
    TF32 = "tf32"  # stored as fp32; TF32 is a matmul mode
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    NF4 = "nf4"  # 4-bit NormalFloat (Dettmers et al. 2023, QLoRA), before its block scales


#: bytes per element of each dtype (keys are Dtype, so a plain name such as "bf16" looks up too)
DTYPE_BYTES: dict[str, float] = {
    Dtype.FP32: 4.0,
    Dtype.TF32: 4.0,
    Dtype.BF16: 2.0,
    Dtype.FP16: 2.0,
    Dtype.FP8: 1.0,
    Dtype.INT8: 1.0,
    Dtype.INT4: 0.5,
    Dtype.NF4: 0.5,
}


class NCounts(StrEnum):
    """Which parameters a scaling law's N counts (Hoffmann 2022 §3: all; Kaplan 2020 §2.1: non-embedding)."""

    TOTAL = "total"  # every parameter, embeddings included (Hoffmann 2022, Besiroglu 2024)
    NON_EMBEDDING = (
        "non_embedding"  # embeddings (and an untied LM head) left out (Kaplan 2020 §2.1)
    )


class LossUnit(StrEnum):
    """Unit of a scaling law's loss: cross-entropy per token (natural log) or per byte (base 2)."""

    NATS_PER_TOKEN = "nats/token"
    BITS_PER_BYTE = "bits/byte"
