"""`trilemma solve`'s inputs checked and parsed: the model sizes, GPU types and precisions searched,
the pins, and the Python arguments refused as the CLI refuses them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trilemma.errors import InputError
from trilemma.presets import hardware_presets
from trilemma.quality.allocation import check_target_loss
from trilemma.quality.benchmarks import parse_target
from trilemma.solve.optimize import Pins, default_objective
from trilemma.specs import HardwareSpec, ModelSpec, Objective, Precision
from trilemma.specs.bounds import BOUNDS
from trilemma.units import parse_batch, parse_budget, parse_count, parse_duration, parse_power

DEFAULT_PARAMS = (5e7, 1e12)  # model sizes searched when no --model / --params is given
SIZES_PER_DECADE = 4


def law_fn(law: Any, unique_tokens: float | None, models: list[ModelSpec] | None = None):
    """The candidates' point loss (n_tot, n_non, tokens, precision arrays → losses). A search over one
    mixture of experts takes the MoE law at its active size (trilemma.quality.moe) instead."""
    from trilemma.quality.moe import moe_shape
    from trilemma.quality.moe_fast import moe_loss_mean
    from trilemma.quality.predict import loss_mean

    shape = moe_shape(models[0]) if models and len(models) == 1 else None

    def fn(
        n_tot: np.ndarray, n_non: np.ndarray, tokens: np.ndarray, precision: np.ndarray
    ) -> np.ndarray:
        if shape is not None:  # one model: every candidate's n_tot is its total
            out = moe_loss_mean(law, shape, tokens, unique_tokens, precision)
            return np.broadcast_arrays(np.asarray(out), np.asarray(n_tot))[0]
        return np.asarray(
            loss_mean(law, n_tot, n_non, tokens, unique_tokens=unique_tokens, precision=precision)
        )

    return fn


def models_for(
    model: str | ModelSpec | None, params: str | tuple[float, float] | None
) -> list[ModelSpec]:
    from trilemma.resolve import resolve_model
    from trilemma.shape import model_for_params

    if model is not None:
        if params is not None:
            raise InputError(
                "params", params, "no range with --model (the model given has its own size)"
            )
        return [resolve_model(model)[0]]
    lo, hi = DEFAULT_PARAMS
    if params is not None:
        if isinstance(params, str):
            parts = params.replace("...", "..").split("..")
            if len(parts) == 1:
                lo = hi = parse_count(parts[0], "params")
            elif len(parts) == 2:
                lo, hi = parse_count(parts[0], "params"), parse_count(parts[1], "params")
            else:
                raise InputError("params", params, "a size (7B) or a range such as 1B..70B")
        else:
            lo, hi = params
        if lo > hi:
            raise InputError("params", params, "a range low..high with low ≤ high")
    n = max(1, int(round(math.log10(hi / lo) * SIZES_PER_DECADE)) + 1)
    sizes = np.geomspace(lo, hi, n)
    out: dict[tuple, ModelSpec] = {}
    for s in sizes:
        m = model_for_params(float(s), field="params")
        out.setdefault((m.n_layers, m.d_model, m.ffn_dim), m)
    return list(out.values())


#: The most names one list of GPU types or precisions may hold (CLI, scenario, web and Python API all
#: reach them here): every preset and precision fits several times over; longer is a generated list,
#: not a search (200,000 repeats of one GPU searched it 200,000 times and hung).
MAX_LIST_NAMES = 64


def names_list(value: str | list[str], field: str) -> list[str]:
    """A comma-separated string or a list as stripped, non-empty names, at most MAX_LIST_NAMES."""
    names = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    if len(names) > MAX_LIST_NAMES:
        raise InputError(
            field,
            f"a list of {len(names):,} names",
            f"at most {MAX_LIST_NAMES} (each searched once: list every type once)",
        )
    return [n.strip() for n in names if n.strip()]


def gpus_for(gpu: str | list[str] | None) -> list[HardwareSpec]:
    """The GPU types to search, each once (an alias of a type already listed adds nothing)."""
    from trilemma.resolve import resolve_hardware

    if gpu is None:
        return [h for name, h in hardware_presets().items() if name != "local"]
    out = list({h.name: h for h in map(resolve_hardware, names_list(gpu, "gpu"))}.values())
    if not out:
        raise InputError(
            "gpu",
            gpu,
            "a hardware preset or a comma-separated list of them (`trilemma presets "
            "hardware` lists them)",
        )
    return out


def precisions_for(precision: str | list[str] | None) -> list[Precision]:
    """The precisions to search, each once, in the order given but bf16 before fp16: the two run at the same
    speed and memory and reach the same loss, so a tie goes to the first, and bf16 needs no loss scaling
    (fp16's overflow risk: presets/precision.toml [fp16])."""
    names = ["bf16"] if precision is None else names_list(precision, "precision")
    out: list[Precision] = []
    for n in names:
        try:
            p = Precision(n.strip().lower())
        except ValueError:
            raise InputError(
                "precision", n, "bf16, fp16, fp32, tf32 or fp8 (a comma-separated list)"
            ) from None
        if p not in out:
            out.append(p)
    if (
        Precision.BF16 in out
        and Precision.FP16 in out
        and out.index(Precision.FP16) < out.index(Precision.BF16)
    ):
        out.remove(Precision.BF16)
        out.insert(out.index(Precision.FP16), Precision.BF16)
    return out


def make_pins(
    deadline: str | float | None = None,
    budget: str | float | None = None,
    target_loss: float | None = None,
    minimize: str | None = None,
    target_score: str | None = None,
    max_power: str | float | None = None,
) -> Pins:
    """The pins, each parsed and checked (``max_power``: the site's facility power, W or text such as
    20MW), and the corner to minimise (the flag's, else the one left free)."""
    usd = gpuh = kwh = None
    watts = None if max_power is None else parse_power(max_power, "max-power")
    if watts is not None and not watts > 0:
        raise InputError("max-power", max_power, "a power above 0 W, e.g. 20MW")
    if budget is not None:
        kind, value = parse_budget(budget, "budget")
        if not value > 0:
            raise InputError(
                "budget",
                budget,
                "a positive budget: dollars ($2M), GPU-hours (100k GPUh) or energy (500MWh)",
            )
        usd, gpuh, kwh = (value if kind == k else None for k in ("usd", "gpu_hours", "kwh"))
    dl = None if deadline is None else parse_duration(deadline, "deadline")
    if target_loss is not None and not (
        isinstance(target_loss, (int, float)) and math.isfinite(target_loss) and target_loss > 0
    ):
        raise InputError(
            "target-loss", target_loss, "a positive loss in the law's unit (nats/token)"
        )
    if target_loss is not None:
        check_target_loss(float(target_loss))
    score = None if target_score is None else parse_target(target_score)
    p = Pins(
        deadline_s=dl,
        budget_usd=usd,
        budget_gpu_hours=gpuh,
        budget_kwh=kwh,
        target_loss=target_loss,
        target_score=score,
        max_power_w=watts,
    )
    if minimize is not None and not isinstance(minimize, str):
        raise InputError("minimize", minimize, "time, cost, loss or energy")
    obj = minimize.strip().lower() if minimize is not None else default_objective(p)
    choices = ", ".join(o.value for o in Objective)
    if not obj and minimize is not None:
        raise InputError("minimize", minimize, choices.replace(", energy", " or energy"))
    if not obj:
        raise InputError(
            "minimize",
            None,
            f"{choices.replace(', energy', ' or energy')} (pin two of --deadline, "
            "--budget (or --max-power) and --target-loss, or say what to minimise)",
        )
    try:
        objective = Objective(obj)
    except ValueError:
        raise InputError("minimize", obj, choices.replace(", energy", " or energy")) from None
    return Pins(
        deadline_s=dl,
        budget_usd=usd,
        budget_gpu_hours=gpuh,
        budget_kwh=kwh,
        target_loss=target_loss,
        minimize=objective,
        target_score=score,
        max_power_w=watts,
    )


def no_loss(
    n_tot: np.ndarray, n_non: np.ndarray, tokens: np.ndarray, precision: np.ndarray
) -> np.ndarray:
    """A fine-tune's loss corner: none (zeros keep the frontier's arithmetic; never printed)."""
    return np.zeros(np.broadcast(n_tot, tokens).shape)


def finetune_objective(
    model: Any, tokens: Any, target_loss: Any, minimize: str | None, deadline: Any, budget: Any
) -> str:
    """The corner a fine-tune's solve minimises: time or cost (the flag's, else cost with a deadline, time
    with a budget, cost with neither); InputError naming the flag for what a fine-tune cannot take."""
    if model is None:
        raise InputError("model", None, "the base model to fine-tune (--model) with --finetune")
    if tokens is None:
        raise InputError(
            "tokens", None, "the fine-tuning tokens (--tokens, e.g. 100M) with --finetune"
        )
    if target_loss is not None:
        raise InputError(
            "target-loss",
            target_loss,
            "no value with --finetune (a fine-tune has no predicted loss; "
            "pin a --deadline or a --budget)",
        )
    if minimize is not None and minimize not in ("time", "cost"):
        raise InputError(
            "minimize", minimize, "time or cost with --finetune (a fine-tune has no loss corner)"
        )
    return minimize or ("time" if budget is not None and deadline is None else "cost")


def checked_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """``solve``'s Python arguments (by name) of the wrong type refused as InputError naming the
    argument (as the CLI's are), counts given as text ("4M", "1T", "4k") parsed; the arguments back,
    with the parsed values."""
    gpu, precision, seq_len, params = (
        args["gpu"],
        args["precision"],
        args["seq_len"],
        args["params"],
    )
    prices, layout, finetune = args["prices"], args["layout"], args["finetune"]
    global_batch_tokens, inference_tokens = args["global_batch_tokens"], args["inference_tokens"]
    for name, v in (("gpu", gpu), ("precision", precision)):
        if v is not None and not (
            isinstance(v, str)
            or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))
        ):
            raise InputError(name, v, f"a {name} name or a list of them")
    if seq_len is not None:
        if isinstance(seq_len, str):
            seq_len = parse_count(seq_len, "seq")
        if isinstance(seq_len, bool) or not float(seq_len).is_integer() or seq_len < 1:
            raise InputError("seq", seq_len, "a positive whole number of tokens")
        seq_len = BOUNDS["seq_len"].check(int(seq_len))
    if (
        params is not None
        and not isinstance(params, str)
        and not (
            isinstance(params, (list, tuple))
            and len(params) == 2
            and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in params
            )
        )
    ):
        raise InputError(
            "params",
            params,
            "a size ('7B'), a range ('1B..70B') or a pair (low, high) of parameters",
        )
    if prices is not None:
        if not isinstance(prices, dict) or not all(
            isinstance(k, str)
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and v >= 0
            for k, v in prices.items()
        ):
            raise InputError(
                "prices", prices, "a dict of GPU name → non-negative dollars per GPU-hour"
            )
    if isinstance(global_batch_tokens, str):  # tokens or sequences: at the sequence length (setup)
        global_batch_tokens = parse_batch(global_batch_tokens, "global-batch")
    if isinstance(inference_tokens, str):
        inference_tokens = parse_count(inference_tokens, "inference-tokens")
    for name, v in (("layout", layout), ("finetune", finetune)):
        if v is not None and not isinstance(v, dict):
            raise InputError(name, v, "a dict of its fields")
    return args | {
        "seq_len": seq_len,
        "global_batch_tokens": global_batch_tokens,
        "inference_tokens": inference_tokens,
    }
