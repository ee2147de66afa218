"""One solve's inputs resolved before any plan is searched: the pins, the law, the model sizes
(those that fit a deploy device), the GPU types, precisions and GPU counts, and the fields every
plan and cluster of the search shares."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trilemma.errors import InfeasibleError, InputError
from trilemma.estimate.goodput import failure_rate
from trilemma.presets.prices import resolve_market
from trilemma.quality.predict import check_unique_tokens
from trilemma.solve.inputs import (
    checked_arguments,
    finetune_objective,
    gpus_for,
    make_pins,
    models_for,
    precisions_for,
)
from trilemma.solve.optimize import Pins
from trilemma.solve.rank import DEFAULT_RANK, check_rank
from trilemma.specs import HardwareSpec, ModelSpec, Precision, Task
from trilemma.units import SI, GlobalBatch, fmt_bytes, fmt_count, parse_count

DEFAULT_MAX_GPUS = 16384
DEFAULT_SEQ = 4096
#: ``solve``'s arguments that are ClusterSpec fields (None: the cluster's default), in this order
CLUSTER_FIELDS = (
    "host_memory_bytes",
    "host_power_w_per_node",
    "pue",
    "region",
    "failures_per_gpu_hour",
    "restart_s",
    "storage_write_bytes_per_s",
)


@dataclass(frozen=True)
class SolveSetup:
    """What one solve searches, each input checked: ``seq`` in tokens, ``fixed_tokens`` and
    ``unique_tokens`` in tokens (None: chosen by the search / unlimited), ``law_E`` the law's
    irreducible loss (nats/token), ``counts`` the GPU counts searched, ``args`` the checked
    arguments of ``solve`` by name (the rest of what it was given)."""

    pins: Pins
    is_ft: bool
    fixed_tokens: float | None
    unique_tokens: float | None
    law: Any
    law_E: float
    models: list[ModelSpec]
    seq: int
    deploy_note: str | None
    #: per model of ``models``, joules of one chat answer on the --deploy device (None: no device)
    deploy_answer_j: tuple[float, ...] | None
    plan_fields: dict[str, Any]
    cluster_fields: dict[str, Any]
    gpus: list[HardwareSpec]
    precisions: list[Precision]
    counts: list[int]
    args: dict[str, Any]


def _corner_minimize(
    is_ft: bool, task: str, model: Any, tokens: Any, unique_tokens: Any, pins_args: dict[str, Any]
) -> str | None:
    """The corner to minimise (a fine-tune's own choice, else the flag's) after refusing what a
    fine-tune or a classifier cannot take."""
    minimize = pins_args["minimize"]
    if is_ft:
        minimize = finetune_objective(
            model,
            tokens,
            pins_args["target_loss"],
            minimize,
            pins_args["deadline"],
            pins_args["budget"],
        )
        if unique_tokens is not None:
            raise InputError(
                "unique-tokens",
                unique_tokens,
                "no value with --finetune (it sets the loss corner's "
                "repetition; a fine-tune has no loss corner)",
            )
    if str(task) == Task.CLASSIFICATION and not is_ft:
        raise InputError(
            "task",
            task,
            "causal-lm without --finetune: the scaling laws predict next-token loss, so a "
            "classifier has no loss corner to trade (with --finetune, solve trades time "
            "and cost alone)",
        )
    return minimize


def _law_and_floor(law: str | None, pins: Pins) -> tuple[Any, float]:
    """The scaling law and its irreducible loss E (nats/token); InfeasibleError for a target at or
    below E."""
    from trilemma.quality.laws import get_law

    the_law = get_law(law)
    law_E = float(the_law.constants.get("E", 0.0) or 0.0)
    if pins.target_loss is not None and pins.target_loss <= law_E:
        raise InfeasibleError(
            f"target loss (--target-loss) {pins.target_loss} is at or below the law's irreducible loss "
            f"E = {law_E:.3f} ({getattr(the_law, 'name', law)}): no plan reaches it"
        )
    return the_law, law_E


def _at_offers(
    gpus: list[HardwareSpec], explicit: bool, provider: str, market: str
) -> list[HardwareSpec]:
    """The GPU types priced at ``provider``'s offers in ``market`` (trilemma.presets.prices): those
    named are refused without one; of the whole catalogue, those with none are left out."""
    from trilemma.presets.prices import offer_for, priced, priced_for

    if explicit:
        return [priced_for(h, provider, market) for h in gpus]
    kept = [priced(h, o) for h in gpus if (o := offer_for(h.name, provider, market))]
    if not kept:
        raise InputError("market", market, f"a market in which {provider} prices a GPU")
    return kept


def _hardware(
    gpu: str | list[str] | None,
    precision: str | list[str] | None,
    max_gpus: int | None,
    cluster_fields: dict[str, Any],
    offer: tuple[str, str] | None = None,
) -> tuple[list[HardwareSpec], list[Precision], list[int]]:
    """The GPU types, precisions and GPU counts searched: powers of two and the 1.5× steps between
    them (3·2^k: 24, 48, 96, 384 … — clusters and reservations are not only powers of two), and the
    cap itself. ``offer``: (provider, market) whose prices the GPU types take."""
    from trilemma.resolve import make_cluster

    gpus = gpus_for(gpu)
    if offer is not None:
        gpus = _at_offers(gpus, gpu is not None, *offer)
    make_cluster(
        gpus[0], 1, **cluster_fields
    )  # the cluster's own figures checked before the search
    precs = precisions_for(precision)
    if not any(p in g.peak_flop_per_s for g in gpus for p in precs):
        runs = "; ".join(
            f"{g.name}: {', '.join(sorted(str(q) for q in g.peak_flop_per_s))}" for g in gpus[:6]
        )
        raise InputError(
            "precision",
            ",".join(str(p) for p in precs),
            f"a precision the hardware searched runs ({runs}{'; …' if len(gpus) > 6 else ''})",
        )
    max_n = DEFAULT_MAX_GPUS if max_gpus is None else int(max_gpus)
    if max_n < 1:
        raise InputError("max-gpus", max_gpus, "a positive whole number")
    counts = sorted(
        {c for k in range(int(math.log2(max_n)) + 1) for c in (2**k, 3 * 2**k) if c <= max_n}
        | {max_n}
    )
    return gpus, precs, counts


def solve_setup(args: dict[str, Any]) -> SolveSetup:
    """``solve``'s arguments (by name) checked and resolved, in the order the CLI refuses them."""
    from trilemma.resolve import finetune_fields

    args = checked_arguments(args)
    args["rank"] = check_rank(args.get("rank", DEFAULT_RANK))
    model, tokens, unique_tokens = args["model"], args["tokens"], args["unique_tokens"]
    ft_args = {k: v for k, v in (args["finetune"] or {}).items() if v is not None}
    pins_args = {k: args[k] for k in ("deadline", "budget", "target_loss", "minimize")}
    is_ft = ft_args.get("finetune") is not None
    minimize = _corner_minimize(is_ft, args["task"], model, tokens, unique_tokens, pins_args)
    if is_ft and args["target_score"] is not None:
        raise InputError(
            "target-score",
            args["target_score"],
            "no value with --finetune (a fine-tune has no quality corner: it minimises time or cost)",
        )
    pins = make_pins(
        pins_args["deadline"],
        pins_args["budget"],
        pins_args["target_loss"],
        minimize,
        args["target_score"],
        max_power=args["max_power"],
    )
    fixed_tokens, uniq = _token_counts(tokens, unique_tokens)
    the_law, law_E = _law_and_floor(args["law"], pins)
    models = models_for(model, args["params"])
    seq = args["seq_len"] or DEFAULT_SEQ
    if isinstance(args["global_batch_tokens"], GlobalBatch):  # 1024seq, 4M: tokens at ``seq``
        args = args | {"global_batch_tokens": args["global_batch_tokens"].at(seq)[0]}
    note, answer_j = None, None
    if args["deploy"] is not None or args["min_tokens_per_s"] is not None:
        models, note, answer_j = deployable(
            models,
            args["deploy"],
            args["deploy_precision"],
            args["context"] or seq,
            args["min_tokens_per_s"],
            args.get("runtime"),
        )
    _check_inference_tokens(args["inference_tokens"])
    args["device_usd_per_kwh"] = _device_price(args.get("device_usd_per_kwh"), args["deploy"])
    plan_fields = finetune_fields(models[0], **ft_args) if ft_args else {}
    cluster_fields = {k: args[k] for k in CLUSTER_FIELDS if args[k] is not None}
    offer = resolve_market(args.get("provider"), args.get("market"))
    gpus, precs, counts = _hardware(
        args["gpu"], args["precision"], args["max_gpus"], cluster_fields, offer
    )
    if (
        offer is not None and offer[1] == "spot"
    ):  # per GPU on the smallest node searched: the upper rate
        per_node = min(g.devices_per_node for g in gpus)
        rate = failure_rate("spot", cluster_fields.get("failures_per_gpu_hour"), per_node)
        cluster_fields["failures_per_gpu_hour"] = rate
    return SolveSetup(
        pins=pins,
        is_ft=is_ft,
        fixed_tokens=fixed_tokens,
        unique_tokens=uniq,
        law=the_law,
        law_E=law_E,
        models=models,
        seq=seq,
        deploy_note=note,
        deploy_answer_j=answer_j,
        plan_fields=plan_fields
        | {"async_tp": args["async_tp"], "task": args["task"], "stack": _stack(args["stack"])}
        | {"trainer": args.get("trainer"), "activation_offload": args.get("activation_offload")}
        | ({"distill": args["distill"]} if args.get("distill") is not None else {}),
        cluster_fields=cluster_fields,
        gpus=gpus,
        precisions=precs,
        counts=counts,
        args=args,
    )


def _token_counts(
    tokens: str | float | None, unique_tokens: str | float | None
) -> tuple[float | None, float | None]:
    """(training tokens, unique tokens) parsed from counts like ``2T``; None where not given.
    InputError past the plan's limit of 1E (10^18) tokens or for a bad unique count."""
    fixed_tokens = None if tokens is None else parse_count(tokens, "tokens")
    if fixed_tokens is not None and fixed_tokens > SI["E"]:
        # the plan's limit (trilemma.specs.plan.Stage.tokens)
        raise InputError("tokens", tokens, "at most 1E (10^18) tokens")
    uniq = (
        None
        if unique_tokens is None
        else check_unique_tokens(parse_count(unique_tokens, "unique-tokens"))
    )
    return fixed_tokens, uniq


def _check_inference_tokens(inference_tokens: str | float | None) -> None:
    """InputError unless the tokens served over the model's life are a finite count ≥ 0 (or
    None: not given)."""
    if inference_tokens is not None and (
        not math.isfinite(float(inference_tokens)) or float(inference_tokens) < 0
    ):
        raise InputError(
            "inference-tokens", inference_tokens, "a non-negative number of tokens, e.g. 10T"
        )


def _device_price(usd_per_kwh: Any, deploy: str | None) -> float | None:
    """The electricity price of serving on the --deploy device (trilemma.solve.ondevice.device_price),
    None without a device; InputError for --device-kwh without --deploy."""
    from trilemma.solve.ondevice import device_price

    if deploy is None:
        if usd_per_kwh is not None:
            raise InputError(
                "device-kwh",
                usd_per_kwh,
                "a value with --deploy DEVICE (the device the model will run on)",
            )
        return None
    return device_price(usd_per_kwh)


def _stack(name: Any) -> Any:
    """The stack every plan runs on, resolved once before the search (trilemma.presets.stack: an
    unknown name refused); None: none given."""
    from trilemma.presets import stack

    return None if name is None else stack(name)


def deployable(
    models: list[ModelSpec],
    device: str | None,
    precision: str | None,
    context: int,
    min_tokens_per_s: float | None,
    runtime: str | None = None,
) -> tuple[list[ModelSpec], str, tuple[float, ...]]:
    """The model sizes that fit ``device`` at ``precision`` with ``context`` tokens of KV cache and decode at
    ``min_tokens_per_s`` or faster there (trilemma.estimate.deploy), a note of what the pin removed and
    the joules of one chat answer there per size kept; InfeasibleError when none does."""
    from trilemma.estimate.deploy import deploy_model, resolve_target
    from trilemma.estimate.params import param_counts
    from trilemma.presets import deploy_efficiency

    if device is None:
        raise InputError(
            "min-tokens-per-s",
            min_tokens_per_s,
            "a value with --deploy DEVICE (the device it is measured on)",
        )
    rate = 0.0 if min_tokens_per_s is None else float(min_tokens_per_s)
    if not math.isfinite(rate) or rate < 0:
        raise InputError(
            "min-tokens-per-s", min_tokens_per_s, "a non-negative number of tokens per second"
        )
    dev, rt, fmt = resolve_target(device, runtime, precision)
    eff, precision = deploy_efficiency(), fmt.name
    deps = [deploy_model(m, param_counts(m), dev, fmt, context, eff, rt) for m in models]
    kept = [(m, d) for m, d in zip(models, deps) if d.fits and d.decode_tokens_per_s >= rate]
    keep = [m for m, _ in kept]
    if not keep:
        fit = [(m, d) for m, d in zip(models, deps) if d.fits]
        why = (
            f"none of the {len(models)} model sizes searched fits {dev.name} at {precision} with a {context:,}-token "
            f"KV cache (the smallest needs {fmt_bytes(deps[0].total_bytes)} of {fmt_bytes(dev.usable_bytes)})"
            if not fit
            else f"the fastest model that fits {dev.name} ({fit[0][0].name}) decodes {fit[0][1].decode_tokens_per_s:.1f} "
            f"tokens/s there, under --min-tokens-per-s {rate:g}: allow smaller models (--params) or a lower rate"
        )
        raise InfeasibleError("no plan meets the pins: " + why)
    largest = max(keep, key=lambda m: param_counts(m).total)
    note = (
        f"deploy: {len(keep)} of {len(models)} model sizes fit {dev.name} at {precision} with a {context:,}-token "
        f"KV cache"
        + (f" and decode at ≥ {rate:g} tokens/s there" if min_tokens_per_s is not None else "")
        + f" (largest {fmt_count(param_counts(largest).total)} parameters)"
    )
    return keep, note, tuple(float(d.energy_per_answer_j) for _, d in kept)
