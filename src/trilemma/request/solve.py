"""``SolveRequest``: every input of `trilemma solve` (two pinned corners, the limits of the search),
each field written once; a scenario file is this request in TOML (trilemma.request.scenario).

The pins and the search space (deadline, budget, params, tokens, gpu, precision, model, law) are held
as given and read by trilemma.solve, which words their refusals; the other values are parsed here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from trilemma.errors import InputError
from trilemma.request import help as h
from trilemma.request import parsers as p
from trilemma.request import shared as s
from trilemma.request.estimate import _model
from trilemma.request.field import Request, option
from trilemma.specs import ModelSpec, Task
from trilemma.units import GlobalBatch


def _price_items(v: Any) -> tuple[str, ...]:
    """--price as its items: ``GPU=USD`` (repeatable, a list, or a table of GPU → price) or one bare
    price for every GPU type searched; trilemma.request.parsers.prices reads them."""
    if isinstance(v, dict):
        return tuple(f"{k}={x}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return tuple(str(x) for x in v)
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise InputError("price", v, "text")
    return (str(v),)


class SolveRequest(Request):
    """Pin two of time, money and loss; get the best plan on the third, runners-up and the frontier.
    With finetune (needs model and tokens) there is no loss corner: it minimises time or cost."""

    VERB: ClassVar[str] = "solve"

    deadline: str | None = option(None, "--deadline", help="wall-clock limit, e.g. 30d")
    budget: str | None = option(
        None, "--budget", help="dollars ($2M), GPU-hours (100k GPUh) or energy (500MWh)"
    )
    target_loss: float | None = option(
        None, "--target-loss", help="loss to reach (nats/token, the law's data)", kind="number"
    )
    target_score: str | None = option(
        None,
        "--target-score",
        help="benchmark score to reach at the lower end of its 80% band, BENCHMARK=FRACTION "
        "(mmlu=0.65; mmlu, hellaswag, arc_c or gsm8k): pins the quality corner like --target-loss",
    )
    minimize: str | None = option(
        None, "--minimize", help="time, cost, loss or energy (default: the unpinned corner)"
    )
    model: str | ModelSpec | None = option(
        None,
        "--model",
        "-m",
        help="fix the model (preset, config.json or size)",
        kind="spec",
        parse=_model,
    )
    params: str | None = option(None, "--params", help="model sizes to search, e.g. 1B..70B")
    tokens: str | None = option(None, "--tokens", help="fix the training tokens")
    unique_tokens: str | None = option(
        None, "--unique-tokens", help="unique data available (repetition is priced in)"
    )
    gpu: str | None = option(
        None,
        "--gpu",
        help="GPU type(s), comma-separated (default: the whole catalogue)",
        listable=True,
    )
    max_gpus: int | None = option(
        None,
        "--max-gpus",
        help="most GPUs to use (default 16384)",
        parse=lambda t: p.whole(t, "max-gpus"),
    )
    precision: str | None = option(
        None,
        "--precision",
        help="precision(s), comma-separated (default bf16; fp8: float8 linears, as --precision of "
        "estimate)",
        listable=True,
    )
    seq: int | None = option(
        None, "--seq", help="sequence length, tokens; 4k = 4096 (default 4096)", parse=p.seq
    )
    global_batch: GlobalBatch | None = option(
        None,
        "--global-batch",
        help="per step: tokens (4Mi, 4M) or sequences (1024seq) (default: each model size its own, DeepSeek LLM's batch law B = "
        "0.292·C^0.3271 at its compute, rounded to a power of two sequences)",
        parse=p.batch,
    )
    law: str | None = option(None, "--law", help="scaling law name or a fitted law file")
    price: tuple[str, ...] | None = option(
        None,
        "--price",
        help="GPU=USD_PER_HOUR (repeatable) or one price for all",
        kind="items",
        parse=_price_items,
    )
    provider: str | None = s.provider()
    market: str | None = s.market()
    memory_headroom: float | None = s.memory_headroom()
    stack: str | None = s.stack()
    compile: bool | None = option(None, "--compile/--no-compile", help=h.COMPILE_HELP, kind="bool")
    async_tp: bool | None = option(
        None, "--async-tp/--no-async-tp", help=h.ASYNC_TP_HELP, kind="bool"
    )
    task: Task = option(Task.CAUSAL_LM, "--task", help=h.TASK_HELP, parse=p.task)
    frontier_all: bool = option(
        False,
        "--frontier-all",
        help="keep every plan on the frontier: by default it drops runs of fewer than 1,000 "
        "steps, under 10 minutes or over a year",
        kind="bool",
    )
    rank: str = option(
        "pessimistic",
        "--rank",
        help="pessimistic (default): rank plans at the pessimistic end of each one's 80% band of "
        "time and cost, so a chip the calibration never measured wins only where it wins at its "
        "worst too; point: on the point estimate",
        parse=lambda t: p.choice(t, "rank", ("pessimistic", "point")),
    )
    host_memory: float | None = s.host_memory()
    deploy: str | None = option(
        None, "--deploy", help=h.DEPLOY_HELP + ": only model sizes that fit it are searched"
    )
    deploy_precision: str | None = s.deploy_precision()
    runtime: str | None = s.runtime()
    context: int | None = option(
        None,
        "--context",
        help="tokens of KV cache on the device (default: --seq)",
        parse=lambda t: p.seq(t, "context"),
    )
    min_tokens_per_s: float | None = option(
        None,
        "--min-tokens-per-s",
        help="with --deploy: the model must decode at least this many tokens/s on the device",
        parse=lambda t: p.number(t, "min-tokens-per-s"),
    )
    inference_tokens: float | None = option(
        None,
        "--inference-tokens",
        help="tokens the model will serve, e.g. 10T: their cost (Sardana et al. 2023: 2N FLOPs "
        "each, at the plan's $ per FLOP) is added, and a $ budget holds training + serving",
        parse=p.inference_tokens,
    )
    device_kwh: float | None = option(
        None,
        "--device-kwh",
        help="with --deploy: the electricity price the devices' owners pay, USD per kWh; served "
        "tokens are then priced at the device's joules per answer × this (default 0.16, EIA's "
        "2023 US residential average), not at datacentre $ per FLOP",
        kind="number",
    )
    distill: str | None = s.distill(
        "solve also for a student distilled from it and keep the better"
    )
    distill_saving: float | None = s.distill_saving()
    max_power: float | None = option(
        None,
        "--max-power",
        help="the site's facility power while training, e.g. 20MW: devices × (board power + host "
        "share) × PUE of every plan stays within it",
        parse=p.max_power,
    )
    pue: float | None = s.pue()
    region: str | None = s.region()
    host_power: float | None = s.host_power()
    failure_rate: float | None = s.failure_rate()
    restart: float | None = s.restart()
    storage_bw: float | None = s.storage_bw()
    finetune: str | None = s.finetune()
    trainable_layers: int | None = s.trainable_layers()
    lora_rank: int | None = s.lora_rank()
    lora_alpha: float | None = s.lora_alpha()
    lora_targets: str | None = s.lora_targets()
    base_precision: str | None = s.base_precision()
    optimizer: str | None = s.optimizer()
    offload: str | None = s.offload()
    kl_reference: bool | None = s.kl_reference()
    trainer: str | None = s.trainer()
    activation_offload: bool | None = s.activation_offload()

    @classmethod
    def check(cls, given: dict[str, Any]) -> None:
        s.check_deploy(given)

    def ranking(self) -> dict[str, Any]:
        """--rank, --provider and --market as trilemma.solve.solve's keyword arguments."""
        return {"rank": self.rank, "provider": self.provider, "market": self.market}
