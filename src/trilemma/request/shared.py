"""Fields that estimate and solve share, each a function so that every request declares its own."""

from __future__ import annotations

from typing import Any

from trilemma.errors import InputError
from trilemma.request import help as h
from trilemma.request import parsers as p
from trilemma.request.field import option


def _provider(text: Any) -> str:
    from trilemma.presets.prices import check_provider

    return check_provider(text)


def _market(text: Any) -> str:
    from trilemma.presets.prices import check_market

    return check_market(text)


def provider() -> Any:
    return option(
        None,
        "--provider",
        help="price the GPU at this provider's offer (presets/prices.toml, dated), or 'all' for "
        "the cheapest; default: the preset's reference price",
        parse=_provider,
    )


def market() -> Any:
    return option(
        None,
        "--market",
        help="on-demand (default with --provider), reserved or spot (spot adds its published "
        "preemption rate to the failure rate)",
        parse=_market,
    )


def with_own(flag: str, what: str) -> Any:
    """A number that goes with estimate's --own (its refusals name ``flag``)."""
    return option(None, f"--{flag}", help=f"with --own: {what}", parse=lambda t: p.number(t, flag))


def host_memory() -> Any:
    return option(None, "--host-memory", help=h.HOST_MEMORY_HELP, parse=p.host_memory)


def pue() -> Any:
    return option(None, "--pue", help="datacentre PUE (default 1.1)", kind="number")


def region() -> Any:
    return option(None, "--region", help="grid region preset (us, eu, france, ...) or kg CO2e/kWh")


def host_power() -> Any:
    return option(None, "--host-power", help=h.HOST_POWER_HELP, parse=p.host_power)


def failure_rate() -> Any:
    return option(None, "--failure-rate", help=h.FAILURE_RATE_HELP, parse=p.failure_rate)


def restart() -> Any:
    return option(None, "--restart", help=h.RESTART_HELP, parse=p.restart)


def storage_bw() -> Any:
    return option(None, "--storage-bw", help=h.STORAGE_BW_HELP, parse=p.storage_bw)


def memory_headroom() -> Any:
    return option(None, "--memory-headroom", help=h.MEMORY_HEADROOM_HELP, parse=p.headroom)


def deploy_precision() -> Any:
    return option(None, "--deploy-precision", help=h.DEPLOY_PRECISION_HELP)


def runtime() -> Any:
    return option(None, "--runtime", help=h.RUNTIME_HELP)


def stack() -> Any:
    return option(None, "--stack", help=h.STACK_HELP, parse=p.stack)


def finetune() -> Any:
    return option(None, "--finetune", help=h.FINETUNE_HELP)


def trainable_layers() -> Any:
    return option(
        None,
        "--trainable-layers",
        help="with --finetune freeze: the last N layers train",
        parse=lambda t: p.whole(t, "trainable-layers"),
    )


def lora_rank() -> Any:
    return option(
        None,
        "--lora-rank",
        help="LoRA rank r (default 16)",
        parse=lambda t: p.whole(t, "lora-rank"),
    )


def lora_alpha() -> Any:
    return option(None, "--lora-alpha", help="LoRA alpha (default 32)", parse=p.lora_alpha)


def lora_targets() -> Any:
    return option(None, "--lora-targets", help=h.LORA_TARGETS_HELP)


def base_precision() -> Any:
    return option(None, "--base-precision", help=h.BASE_PRECISION_HELP)


def optimizer() -> Any:
    return option(None, "--optimizer", help=h.OPTIMIZER_HELP)


def trainer() -> Any:
    return option(None, "--trainer", help=h.TRAINER_HELP, parse=p.trainer)


def activation_offload() -> Any:
    return option(
        None,
        "--activation-offload/--no-activation-offload",
        help=h.ACTIVATION_OFFLOAD_HELP,
        kind="bool",
    )


def distill(what: str) -> Any:
    """--distill TEACHER (checked with --distill-saving by trilemma.quality.distill.distill_of); ``what``:
    what the verb does with the teacher."""
    return option(
        None,
        "--distill",
        help="a teacher model preset with its training tokens (e.g. llama3.1-8b): "
        + what
        + " (its "
        "forward on every token and its weights on every GPU priced; Minitron's token saving, never "
        "below the teacher's loss)",
    )


def distill_saving() -> Any:
    return option(
        None,
        "--distill-saving",
        help="with --distill: the tokens a distilled student saves against training from scratch, "
        "1 (none) to 40 (Minitron's best case, the default)",
        kind="number",
    )


def offload() -> Any:
    return option(None, "--offload", help=h.OFFLOAD_HELP)


def kl_reference() -> Any:
    return option(None, "--kl-reference/--no-kl-reference", help=h.KL_REFERENCE_HELP, kind="bool")


#: the fine-tune fields, as resolve.finetune_fields takes them
FINETUNE_FIELDS = (
    "finetune",
    "trainable_layers",
    "lora_rank",
    "lora_alpha",
    "lora_targets",
    "base_precision",
    "optimizer",
    "offload",
    "kl_reference",
)


def check_deploy(given: dict[str, Any]) -> None:
    """--deploy-precision and --context describe the device of --deploy: without it they would do
    nothing."""
    for name in ("deploy_precision", "context", "runtime", "device_kwh"):
        if given.get("deploy") is None and given.get(name) is not None:
            raise InputError(
                name.replace("_", "-"),
                given[name],
                "a value with --deploy DEVICE (the device the model will run on)",
            )
