"""Specs from user input: resolve a model, a device and a region; build a plan and a cluster with
the planner's stated defaults (presets/constants.toml). The only place those defaults are applied.

It sits above the specs it builds and the modules it reads them from (presets, hf, shape, estimate)
and below the verbs that use it (solve, validate, probe, export, the API): docs/ARCHITECTURE.md."""

from __future__ import annotations

import numbers
import os
from typing import Any

from trilemma.errors import InputError
from trilemma.presets import constants, get_hardware, get_model, is_model_preset, regions
from trilemma.presets import stack as stack_preset
from trilemma.specs import (
    ClusterSpec,
    DtypeSpec,
    HardwareSpec,
    ModelSpec,
    Precision,
    Stage,
    TrainingPlan,
)
from trilemma.specs.enums import BasePrecision
from trilemma.specs.stack_plan import PLAN_FIELDS, plan_defaults
from trilemma.units import GlobalBatch, parse_batch, parse_count


def resolve_model(spec: str | ModelSpec) -> tuple[ModelSpec, str]:
    """A preset name or Hub id, a path to a Hugging Face config.json (or its folder), or a size
    like ``3B``. A Hub id (``org/name``) resolves, in order, to the shipped preset that lists it, then
    to the ``config.json`` in the local Hugging Face cache (``trilemma.hf.hub``: offline, never the
    network), else a one-line refusal naming the cache folder and how to pass a path.

    Returns the model and a sentence saying how it was resolved.
    """
    if isinstance(spec, ModelSpec):
        return spec, "given"
    if not isinstance(spec, (str, os.PathLike)):
        raise InputError(
            "model",
            spec,
            "a preset name, a size such as 7B, a Hugging Face config.json or a ModelSpec",
        )
    text = str(spec).strip()
    if is_model_preset(text):
        m = get_model(text)
        return m, f"preset {m.name}"
    if os.path.exists(text) or text.endswith(".json"):
        from trilemma.hf import model_from_hf_config

        m = model_from_hf_config(text)
        return m, f"Hugging Face config {text}"
    from trilemma.hf.hub import HUB_ID

    if HUB_ID.match(text):
        from trilemma.hf import model_from_hf_config
        from trilemma.hf.hub import cached_config

        path = cached_config(text)
        m = model_from_hf_config(path).model_copy(update={"name": text})
        return m, f"Hugging Face cache {path}"
    if text[:1].isdigit():
        from trilemma.shape import model_for_params

        target = parse_count(text, "model")
        m = model_for_params(target, field="model")
        return m, f"shape rule for {text}: {m.name}"
    return get_model(text), ""  # raises UnknownPresetError with suggestions


def resolve_hardware(spec: str | HardwareSpec) -> HardwareSpec:
    """A HardwareSpec, or a hardware preset by name (any case)."""
    if isinstance(spec, HardwareSpec):
        return spec
    if not isinstance(spec, str):
        raise InputError(
            "gpu",
            spec,
            "a hardware preset name (`trilemma presets hardware` lists them) or a HardwareSpec",
        )
    return get_hardware(spec)


MAX_GRID_KG_PER_KWH = 2.0  # ClusterSpec's own limit; coal is about 0.8-1 (IPCC AR5 WG3 Annex III, coal PC life-cycle median 0.82)


def grid_intensity(region: str | float | None) -> float:
    """kg CO2e per kWh from a region preset name or a number."""
    if region is None:
        region = constants()["energy"]["default_region"]
    table = regions()
    try:
        value = float(region)
    except ValueError:
        value = None
    if value is not None:
        if not 0 <= value <= MAX_GRID_KG_PER_KWH:
            raise InputError(
                "region",
                region,
                f"a grid intensity from 0 to {MAX_GRID_KG_PER_KWH:g} kg CO2e/kWh "
                "(coal is about 1) or one of " + ", ".join(table),
            )
        return value
    key = region.strip().lower()
    if key not in table:
        raise InputError("region", region, "a number (kg CO2e/kWh) or one of " + ", ".join(table))
    return float(table[key]["kg_co2_per_kwh"])


def make_plan(
    model: ModelSpec,
    tokens: float | None = None,
    seq_len: int | None = None,
    global_batch_tokens: float | None = None,
    precision: Precision | str = Precision.BF16,
    stages: list[Stage] | None = None,
    **plan_fields: Any,
) -> TrainingPlan:
    """A TrainingPlan from flags, falling back on the model's published recipe. ``tokens`` and
    ``global_batch_tokens`` may be counts as text ("2T", "4M"); ``precision`` any case. A ``stack``
    (a preset name or a StackSpec) gives the plan fields no flag gave (``with_stack``)."""
    plan_fields = with_stack(plan_fields)
    tokens = _count(tokens, "tokens")
    if seq_len is not None and (
        isinstance(seq_len, bool) or not isinstance(seq_len, numbers.Integral) or seq_len < 1
    ):
        raise InputError("seq", seq_len, "a positive whole number of tokens")
    if stages is None:
        seq = seq_len or model.seq_len or 2048
        finetune = plan_fields.get("finetune") is not None
        if tokens is None:
            if finetune:  # the published count is the pre-training run's, not a fine-tune's
                raise InputError(
                    "tokens",
                    None,
                    "the fine-tuning tokens, e.g. --tokens 100M (a fine-tune has no "
                    "published default)",
                )
            if model.tokens is None:
                raise InputError(
                    "tokens",
                    None,
                    f"a token count such as --tokens 2T ({model.name} has no published default)",
                )
            tokens = model.tokens
        explicit = global_batch_tokens is not None
        if explicit:
            gbt, explicit, _ = batch_at(global_batch_tokens, seq)
        elif (
            finetune
        ):  # not the pre-training batch of millions of tokens (constants.toml [finetune])
            gbt = constants()["finetune"]["default_batch_sequences"] * seq
        else:
            gbt = model.global_batch_tokens or 512 * seq
        if tokens < gbt:
            raise InputError(
                "tokens",
                tokens,
                f"at least one global batch ({gbt:,.0f} tokens; --global-batch sets a smaller one)",
            )
        stages = [
            Stage.build(
                prefix="plan",
                tokens=tokens,
                seq_len=seq,
                global_batch_tokens=gbt,
                explicit_batch=explicit,
            )
        ]
    prec = (
        precision if isinstance(precision, Precision) else Precision.parse(precision, "precision")
    )
    ft = plan_fields.get("finetune")
    if ft is not None and prec == Precision.FP16 and ft.base_precision == BasePrecision.BF16:
        # the frozen 16-bit base is stored as the plan computes: fp16 (same bytes; a V100 has no bf16)
        plan_fields["finetune"] = ft.replace(base_precision=BasePrecision.FP16)
    plan_fields.setdefault("dtypes", DtypeSpec.for_precision(prec))
    plan_fields = with_trainer(plan_fields)
    return TrainingPlan.build(prefix="plan", stages=tuple(stages), precision=prec, **plan_fields)


def with_stack(plan_fields: dict[str, Any]) -> dict[str, Any]:
    """``plan_fields`` with its ``stack`` resolved (a preset name: trilemma.presets.stack) and the
    fields the stack decides (trilemma.specs.stack_plan.PLAN_FIELDS) set from it where they are None
    or absent; a value given (a flag) wins. Without a stack, None leaves TrainingPlan's default."""
    given = {
        k: v for k, v in plan_fields.items() if v is not None or k not in (*PLAN_FIELDS, "stack")
    }
    if given.get("stack") is None:
        return given
    given["stack"] = stack_preset(given["stack"])
    return plan_defaults(given["stack"]) | given


def batch_at(value: float | str | GlobalBatch, seq: int) -> tuple[float, bool, str | None]:
    """A global batch as given (tokens as a number, text such as "4M", "4Mi", "1024seq", or a
    GlobalBatch) at ``seq`` tokens per sequence → (tokens, exact, note): GlobalBatch.at."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), True, None
    return parse_batch(value, "global-batch").at(seq)


def with_trainer(plan_fields: dict[str, Any]) -> dict[str, Any]:
    """``plan_fields`` with its ``trainer`` resolved (a preset name: trilemma.presets.trainer), its
    ``activation_offload`` flag (None: the trainer's) applied to it, and, for a trainer without an fp32 master
    (TrainerSpec.master_weights false: bf16 throughout), the plan's 16-bit dtypes for gradients and optimizer
    states and no master copy. ``activation_offload`` without a trainer applies to the default trainer."""
    from trilemma.presets import trainer as trainer_preset
    from trilemma.specs.trainer import TrainerSpec

    out = with_rl_reference(dict(plan_fields))
    offload = out.pop("activation_offload", None)
    name = out.get("trainer")
    if name is None and offload is None:
        out.pop("trainer", None)
        return out
    tr = trainer_preset(name) if name is not None else TrainerSpec(name="default")
    if offload is not None:
        tr = tr.replace(activation_offload=bool(offload))
    out["trainer"] = tr
    d = out.get("dtypes")
    if not tr.master_weights and d is not None and d.master is not None:
        out["dtypes"] = d.replace(master=None, grad=d.weight, optimizer_state=d.weight)
    return out


def with_rl_reference(plan_fields: dict[str, Any]) -> dict[str, Any]:
    """``plan_fields`` with an RL plan's unset reference decided (the trainer preset's GRPO default where it
    states one, else the method's: trilemma.specs.rl.default_reference) and the engine share, process mode and
    log-probabilities the RolloutSpec was built without, the trainer's (TrainerSpec.rollout_*; not for DPO)."""
    from trilemma.presets import trainer as trainer_preset
    from trilemma.specs.rl import default_reference

    rl = plan_fields.get("rl")
    if rl is None:
        return plan_fields
    tr, changes = (trainer_preset(t) if (t := plan_fields.get("trainer")) else None), {}
    if rl.reference is None:
        changes["reference"] = default_reference(rl.method, tr.kl_reference if tr else None)
    for field in ("engine_share", "in_process", "logprobs"):  # TrainerSpec.rollout_share, ...
        stated = getattr(tr, "rollout_" + field.replace("engine_", ""), None)
        if stated is not None and rl.method != "dpo" and field not in rl.model_fields_set:
            changes[field] = stated
    return plan_fields | {"rl": rl.replace(**changes)} if changes else plan_fields


def _count(value: Any, field: str) -> Any:
    """A count given as text ("2T") parsed; a number (validated where it is used) or None as it is."""
    return (
        value
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
        else parse_count(value, field)
    )


def finetune_fields(
    model: ModelSpec,
    finetune: str | None = None,
    *,
    trainable_layers: int | None = None,
    lora_rank: int | None = None,
    lora_alpha: float | None = None,
    lora_targets: str | list[str] | None = None,
    base_precision: str | None = None,
    lora_dropout: float | None = None,
    optimizer: str | None = None,
    offload: str | None = None,
    kl_reference: bool | None = None,
) -> dict[str, Any]:
    """TrainingPlan fields for a fine-tune and its optimizer and offload (``make_plan(**fields)``); {} when
    none of them is given. ``kl_reference`` holds (True) or drops an RL policy's reference model (None: the
    method's default, trilemma.specs.rl.default_reference). One-line errors naming the flag
    (trilemma.specs.finetune.make_finetune)."""
    from trilemma.specs.enums import FinetuneMethod, Offload, Optimizer
    from trilemma.specs.finetune import make_finetune
    from trilemma.specs.rl import PPO_SAMPLES, RL_METHODS, RolloutSpec

    rl = None
    name = finetune.strip().lower() if isinstance(finetune, str) else None
    if name is not None and name not in RL_METHODS + tuple(m.value for m in FinetuneMethod):
        methods = [m.value for m in FinetuneMethod] + list(RL_METHODS)
        raise InputError("finetune", finetune, ", ".join(methods[:-1]) + " or " + methods[-1])
    if kl_reference is not None and name not in RL_METHODS:
        raise InputError("kl-reference", kl_reference, "a value with --finetune grpo, dpo or ppo")
    if name in RL_METHODS:
        # an RL policy (GRPO, DPO, PPO): LoRA when adapters are described (QLoRA on an nf4 base), else full
        # (trilemma.specs.rl)
        method = name
        # None: the trainer's (with_rl_reference)
        ref = None if kl_reference is None else bool(kl_reference)
        rl = {
            "dpo": RolloutSpec(method="dpo", engine_share=0.0, reference=ref),
            "ppo": RolloutSpec(method="ppo", generations=PPO_SAMPLES, reference=ref),
        }.get(method, RolloutSpec(reference=ref))
        lora = lora_rank is not None or lora_targets is not None or base_precision is not None
        four_bit = str(base_precision or "").lower() in ("nf4", "gptq4")
        finetune = ("qlora" if four_bit else "lora") if lora else "full"
    ft = make_finetune(
        finetune,
        n_layers=model.n_layers,
        gated=model.ffn_matrices == 3,
        trainable_layers=trainable_layers,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        lora_targets=lora_targets,
        base_precision=base_precision,
        lora_dropout=lora_dropout,
        optimizer=optimizer,
        offload=offload,
    )
    out: dict[str, Any] = {} if rl is None else {"rl": rl}
    if ft is not None:
        _check_lora_rank(model, ft)
        out["finetune"] = ft
    if optimizer is not None:
        out["optimizer"] = Optimizer.parse(optimizer, "optimizer")
    if offload is not None:
        out["offload"] = Offload.parse(offload, "offload")
    return out


def _check_lora_rank(model: ModelSpec, ft: Any) -> None:
    """A LoRA rank no larger than the narrower side of every module it adapts: at r ≥ min(d_in, d_out) the
    pair B·A spans every update the module's own weight could take, with more parameters than the weight
    (Hu et al. 2021, LoRA §4.1: r ≪ min(d, k))."""
    from trilemma.estimate.finetune import module_shapes

    if not ft.adapters:
        return
    sides = {k: min(a, b) for k, (a, b) in module_shapes(model).items() if k in ft.targets}
    if sides and ft.lora_rank > min(sides.values()):
        name = min(sides, key=sides.get)  # type: ignore[arg-type]
        raise InputError(
            "lora-rank",
            ft.lora_rank,
            f"at most {int(sides[name]):,}, the narrower side of {name} "
            f"({model.name}): a larger rank adds parameters and no capacity",
        )


def check_positions(model: ModelSpec, seq_len: int) -> None:
    """InputError when ``seq_len`` outruns a learned position table: such a model has no embedding for
    position ``max_positions`` and beyond (rotary, ALiBi and relative positions have no table to outrun).
    Units: tokens."""
    from trilemma.specs import PositionType

    if model.position == PositionType.LEARNED and seq_len > model.max_positions:
        raise InputError(
            "seq",
            seq_len,
            f"at most {model.max_positions:,}: {model.name} has {model.max_positions:,} "
            "learned positions (a longer sequence needs a model with a larger table)",
        )


def make_cluster(hardware: str | HardwareSpec, n_gpus: int, **fields: Any) -> ClusterSpec:
    e = constants()["energy"]
    region = fields.pop("region", None)
    fields.setdefault("pue", e["pue"])
    fields.setdefault("power_fraction", e["power_fraction"])
    fields.setdefault("host_power_fraction", e["host_power_fraction"])
    fields.setdefault("grid_kg_co2_per_kwh", grid_intensity(region))
    fields = {k: v for k, v in fields.items() if v is not None}
    return ClusterSpec.build(
        prefix="cluster", hardware=resolve_hardware(hardware), n_gpus=n_gpus, **fields
    )


def at_offer(hardware: Any, cluster: dict | None, provider: Any, market: Any) -> tuple[Any, Any]:
    """``estimate``'s hardware and cluster fields at ``provider``'s offer in ``market`` (either may be
    None: ``resolve_market``); spot's preemptions added to the failure rate. Neither given: both
    unchanged (the preset's reference price)."""
    from trilemma.estimate.goodput import failure_rate
    from trilemma.presets.prices import priced_for, resolve_market

    offer = resolve_market(provider, market)
    if offer is None:
        return hardware, cluster
    hw = priced_for(resolve_hardware(hardware), *offer)
    fields = dict(cluster or {})
    fields["failures_per_gpu_hour"] = failure_rate(
        offer[1], fields.get("failures_per_gpu_hour"), hw.devices_per_node
    )
    return hw, fields


__all__ = [
    "at_offer",
    "check_positions",
    "finetune_fields",
    "grid_intensity",
    "make_cluster",
    "make_plan",
    "resolve_hardware",
    "resolve_model",
    "with_stack",
]
