"""Fine-tuning an existing model: the method (full, LoRA, QLoRA, freeze), its adapters and the frozen base's
storage. A plan with ``finetune`` None pre-trains from scratch.

Built and checked in one place, :func:`make_finetune`, so the flags, the Python API and scenario files
give the same one-line errors (exit status 2) naming the flag at fault.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trilemma.errors import InputError
from trilemma.specs.base import Spec
from trilemma.specs.enums import BasePrecision, FinetuneMethod, Offload, Optimizer

#: the linear modules of a Llama-style layer, by their Hugging Face names (LlamaAttention, LlamaMLP); a model
#: without a gated MLP has up_proj and down_proj only. PEFT's ``target_modules`` match these names.
ATTN_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
#: other spellings of the same modules (GPT-NeoX/OPT fc1/fc2, torchtitan wq/wk/wv/wo/w1/w2/w3)
MODULE_ALIASES = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "o": "o_proj",
    "gate": "gate_proj",
    "up": "up_proj",
    "down": "down_proj",
    "wq": "q_proj",
    "wk": "k_proj",
    "wv": "v_proj",
    "wo": "o_proj",
    "w1": "gate_proj",
    "w3": "up_proj",
    "w2": "down_proj",
    "fc1": "up_proj",
    "fc2": "down_proj",
}
#: named groups: ``all-linear`` is PEFT's (every linear layer of the blocks, the output layer excluded)
TARGET_GROUPS = {"attn": ATTN_MODULES, "mlp": MLP_MODULES, "all-linear": ATTN_MODULES + MLP_MODULES}

DEFAULT_LORA_RANK = 16
DEFAULT_LORA_ALPHA = 32
DEFAULT_LORA_TARGETS = (
    "all-linear"  # QLoRA §4: adapters on every linear layer match full fine-tuning
)


class FinetuneSpec(Spec):
    """What trains and how the frozen base is stored. ``targets`` are canonical module names (ATTN_MODULES,
    MLP_MODULES); ``trainable_layers`` the last layers that train under ``freeze``."""

    method: FinetuneMethod
    lora_rank: int = Field(DEFAULT_LORA_RANK, gt=0)
    lora_alpha: float = Field(DEFAULT_LORA_ALPHA, gt=0)
    lora_dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="PEFT's lora_dropout (default 0: no extra tensor)"
    )
    targets: tuple[str, ...] = TARGET_GROUPS[DEFAULT_LORA_TARGETS]
    trainable_layers: int | None = Field(None, gt=0)
    base_precision: BasePrecision = BasePrecision.BF16
    double_quant: bool = Field(
        True, description="nf4 with its block scales quantised again (QLoRA §3)"
    )

    @property
    def adapters(self) -> bool:
        return self.method in (FinetuneMethod.LORA, FinetuneMethod.QLORA)


def parse_targets(text: str | list[str] | tuple[str, ...], gated: bool = True) -> tuple[str, ...]:
    """--lora-targets: attn, mlp, all-linear or comma-separated module names (q_proj,v_proj …), canonical."""
    items = [text] if isinstance(text, str) else list(text)
    names: list[str] = []
    for item in items:
        for part in str(item).split(","):
            key = part.strip().lower()
            if not key:
                continue
            if key in TARGET_GROUPS:
                names.extend(TARGET_GROUPS[key])
            elif key in ATTN_MODULES + MLP_MODULES or key in MODULE_ALIASES:
                names.append(MODULE_ALIASES.get(key, key))
            else:
                raise InputError(
                    "lora-targets",
                    part.strip(),
                    "attn, mlp, all-linear or module names "
                    "(q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj), comma-separated",
                )
    if not names:
        raise InputError(
            "lora-targets", text, "attn, mlp, all-linear or module names such as q_proj,v_proj"
        )
    if not gated:
        names = [n for n in names if n != "gate_proj"]  # a GELU MLP has no gate
        if not names:
            raise InputError(
                "lora-targets", text, "a module the model has (its MLP has no gate_proj)"
            )
    return tuple(dict.fromkeys(names))


def make_finetune(
    method: str | FinetuneMethod | None,
    *,
    n_layers: int,
    gated: bool = True,
    trainable_layers: int | None = None,
    lora_rank: int | None = None,
    lora_alpha: float | None = None,
    lora_targets: str | list[str] | None = None,
    base_precision: str | BasePrecision | None = None,
    lora_dropout: float | None = None,
    optimizer: str | Optimizer | None = None,
    offload: str | Offload | None = None,
) -> FinetuneSpec | None:
    """The fine-tune of the flags, or None (pre-training) when ``method`` is None; InputError (one line naming
    the flag, exit status 2) for a value or a combination that cannot run:

    - --trainable-layers only with freeze (and freeze needs it), 1 … the model's layers;
    - --lora-rank, --lora-alpha, --lora-targets only with lora or qlora;
    - qlora stores its base in nf4; full and freeze train 16-bit weights (no int8/nf4 base); an nf4 base
      with lora is qlora;
    - --offload runs DeepSpeed's CPU Adam: AdamW only (not the 8-bit or paged bitsandbytes optimizers,
      which keep their states on the GPU).
    """
    opt = None if optimizer is None else Optimizer.parse(optimizer, "optimizer")
    off = Offload.NONE if offload is None else Offload.parse(offload, "offload")
    if off != Offload.NONE and opt not in (None, Optimizer.ADAMW):
        raise InputError(
            "offload",
            off.value,
            "none with --optimizer " + opt.value + " (offload runs DeepSpeed's "
            "CPU Adam: use --optimizer adamw)",
        )
    if method is None:
        for flag, v in (
            ("trainable-layers", trainable_layers),
            ("lora-rank", lora_rank),
            ("lora-alpha", lora_alpha),
            ("lora-targets", lora_targets),
            ("base-precision", base_precision),
        ):
            if v is not None:
                raise InputError(
                    flag, v, "no value without --finetune (full, lora, qlora or freeze)"
                )
        return None
    meth = FinetuneMethod.parse(method, "finetune")
    base = None if base_precision is None else BasePrecision.parse(base_precision, "base-precision")
    _check_method_flags(meth, n_layers, trainable_layers, (lora_rank, lora_alpha, lora_targets))
    base = _base_precision(meth, base)
    if lora_rank is not None and (int(lora_rank) != lora_rank or lora_rank < 1):
        raise InputError("lora-rank", lora_rank, "a positive whole number, e.g. 8, 16 or 64")
    if lora_alpha is not None and not lora_alpha > 0:
        raise InputError("lora-alpha", lora_alpha, "a positive number, e.g. 16 or 32")
    fields: dict = {
        "method": meth,
        "base_precision": base or BasePrecision.BF16,
        "targets": parse_targets(
            DEFAULT_LORA_TARGETS if lora_targets is None else lora_targets, gated
        ),
    }
    if lora_rank is not None:
        fields["lora_rank"] = int(lora_rank)
    if lora_alpha is not None:
        fields["lora_alpha"] = float(lora_alpha)
    if lora_dropout is not None:
        fields["lora_dropout"] = lora_dropout
    if trainable_layers is not None:
        fields["trainable_layers"] = int(trainable_layers)
    return FinetuneSpec.build(prefix="finetune", **fields)


def _check_method_flags(
    meth: FinetuneMethod, n_layers: int, trainable_layers: int | None, lora: tuple[Any, ...]
) -> None:
    """--trainable-layers only with freeze (and freeze needs it, 1 … ``n_layers``); the adapter
    flags ``lora`` (rank, alpha, targets) only with lora or qlora."""
    if meth == FinetuneMethod.FREEZE:
        if trainable_layers is None:
            raise InputError(
                "trainable-layers",
                None,
                f"the number of last layers that train with --finetune freeze (1 to {n_layers})",
            )
        if not 1 <= int(trainable_layers) <= n_layers:
            raise InputError(
                "trainable-layers",
                trainable_layers,
                f"a whole number from 1 to {n_layers} (the model's layers)",
            )
    elif trainable_layers is not None:
        raise InputError("trainable-layers", trainable_layers, "no value unless --finetune freeze")
    if meth not in (FinetuneMethod.LORA, FinetuneMethod.QLORA):
        for flag, v in zip(("lora-rank", "lora-alpha", "lora-targets"), lora):
            if v is not None:
                raise InputError(
                    flag, v, f"no value with --finetune {meth.value} (adapters: lora or qlora)"
                )


def _base_precision(meth: FinetuneMethod, base: BasePrecision | None) -> BasePrecision | None:
    """The frozen base's storage: a 4-bit one for qlora (nf4 by default, or gptq4) and only there, no
    quantised base to train."""
    if meth == FinetuneMethod.QLORA:
        if base is not None and not base.four_bit:
            raise InputError(
                "base-precision",
                base.value,
                "nf4 or gptq4 with --finetune qlora (lora takes bf16, fp16 or int8)",
            )
        base = base or BasePrecision.NF4
    elif meth == FinetuneMethod.LORA:
        if base is not None and base.four_bit:
            raise InputError(
                "base-precision",
                base.value,
                "bf16, fp16 or int8 with --finetune lora (a 4-bit base is --finetune qlora)",
            )
    elif base is not None and base.quantised:
        raise InputError(
            "base-precision",
            base.value,
            f"bf16 or fp16 with --finetune {meth.value} (quantised weights cannot train)",
        )
    return base


__all__ = [
    "ATTN_MODULES",
    "FinetuneSpec",
    "MLP_MODULES",
    "TARGET_GROUPS",
    "make_finetune",
    "parse_targets",
]
