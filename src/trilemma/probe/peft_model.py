"""A fine-tune for the probe: a Hugging Face ``LlamaForCausalLM`` built from the spec (random weights, no
download) with what ``trilemma.specs.finetune.FinetuneSpec`` trains — LoRA adapters from PEFT on the named
modules, the last N layers (freeze), or everything (full). Imported only by a probe with ``--finetune``
(needs ``pip install 'trilemma[finetune]'``); the planner never imports it."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from trilemma.errors import InputError
from trilemma.specs import ModelSpec

__all__ = ["build_finetune_model", "check_llama_style", "import_hf"]


def check_llama_style(spec: ModelSpec) -> None:
    """InputError unless the spec is a model LlamaForCausalLM builds exactly: causal, dense, SwiGLU, RMSNorm,
    rotary positions, no biases."""
    ok = (
        spec.causal
        and not spec.is_moe
        and spec.ffn_matrices == 3
        and spec.norm.value == "rmsnorm"
        and spec.position.value == "rotary"
        and not (spec.qkv_bias or spec.out_bias or spec.mlp_bias)
    )
    if not ok:
        raise InputError(
            "model",
            spec.name,
            "a Llama-style model for --finetune (causal, SwiGLU, RMSNorm, rotary, no "
            "biases), e.g. --model llama2-7b scaled down with --layers/--d-model (the default)",
        )


class _Logits(nn.Module):
    """``model(x)`` → logits, as the probe's training loop calls its models."""

    def __init__(self, hf: nn.Module) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=x, use_cache=False).logits


def import_hf(method: str) -> None:
    """Import transformers (and peft for adapters), or InputError naming --finetune with the install line."""
    try:
        import transformers  # noqa: F401

        if method in ("lora", "qlora"):
            import peft  # noqa: F401
    except ImportError:
        raise InputError(
            "finetune", method, "transformers and peft installed: pip install 'trilemma[finetune]'"
        ) from None


def build_finetune_model(
    spec: ModelSpec, device: torch.device, ft: dict[str, Any], recompute: bool
) -> tuple[nn.Module, int, int]:
    """(the model to train, its base parameters, its trainable parameters as PEFT counts them)."""
    try:
        import transformers
    except ImportError:
        raise InputError(
            "finetune",
            ft["method"],
            "transformers and peft installed: pip install 'trilemma[finetune]'",
        ) from None
    check_llama_style(spec)
    cfg = transformers.LlamaConfig(
        hidden_size=spec.d_model,
        intermediate_size=spec.ffn_dim,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=spec.n_heads,
        num_key_value_heads=spec.kv_heads,
        head_dim=spec.d_head,
        vocab_size=spec.vocab_size,
        tie_word_embeddings=spec.tied_embeddings,
        max_position_embeddings=max(spec.max_positions, 2048),
        attention_bias=False,
        mlp_bias=False,
    )
    hf = transformers.LlamaForCausalLM(cfg).to(device)
    base = sum(p.numel() for p in hf.parameters())
    method = ft["method"]
    if method in ("lora", "qlora"):
        try:
            import peft
        except ImportError:
            raise InputError(
                "finetune", method, "peft installed: pip install 'trilemma[finetune]'"
            ) from None
        conf = peft.LoraConfig(
            r=ft["lora_rank"],
            lora_alpha=ft["lora_alpha"],
            lora_dropout=ft.get("lora_dropout", 0.0),
            target_modules=list(ft["targets"]),
            bias="none",
        )
        with (
            warnings.catch_warnings()
        ):  # PEFT reads transformers' deprecated is_gradient_checkpointing
            warnings.filterwarnings(
                "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
            )
            hf = peft.get_peft_model(hf, conf)
        trainable = int(hf.get_nb_trainable_parameters()[0])
    else:
        if method == "freeze":
            n = ft["trainable_layers"]
            for p in hf.parameters():
                p.requires_grad_(False)
            for layer in hf.model.layers[-n:]:
                for p in layer.parameters():
                    p.requires_grad_(True)
        trainable = sum(p.numel() for p in hf.parameters() if p.requires_grad)
    if recompute:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if method != "full" and hasattr(hf, "enable_input_require_grads"):
            hf.enable_input_require_grads()
    return _Logits(hf), base, trainable
