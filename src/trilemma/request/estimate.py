"""``EstimateRequest``: every input of `trilemma estimate` (one plan), each field written once."""

from __future__ import annotations

from typing import Any, ClassVar

from trilemma.errors import InputError
from trilemma.request import help as h
from trilemma.request import parsers as p
from trilemma.request import shared as s
from trilemma.request.field import Request, option
from trilemma.specs import ModelSpec, Precision, Recompute, Task, ZeroStage
from trilemma.specs.axes import AXES
from trilemma.units import GlobalBatch


def _model(v: Any) -> Any:
    """A ModelSpec given as an object (a JSON object: InputError naming ``model.<key>``)."""
    if isinstance(v, ModelSpec):
        return v
    if not isinstance(v, dict):
        from trilemma.errors import InputError

        raise InputError("model", v, "text")
    from pydantic import ValidationError

    from trilemma.specs.base import validation_to_input_error

    try:
        return ModelSpec.model_validate(v)
    except ValidationError as exc:
        raise validation_to_input_error(exc, "model") from None


def axis(name: str) -> Any:
    """A layout axis of the registry (trilemma.specs.axes.AXES) as a request field: pins the axis."""
    a = next(a for a in AXES if a.name == name)
    if a.kind is bool:
        return option(None, a.flag, help=a.help + " (default on)", kind="bool")
    return option(None, a.flag.split("/")[0], help=a.help, parse=a.parse)  # type: ignore[union-attr]


class EstimateRequest(Request):
    """Time, GPU-hours, $, kWh, CO2 and memory per GPU for one training plan. A layout field (tp, pp,
    cp, ep, vp, sp, zero, recompute, micro_batch) pins that axis; the rest are searched."""

    VERB: ClassVar[str] = "estimate"

    model: str | ModelSpec = option(
        "llama2-7b",
        "--model",
        "-m",
        help="preset name, path to a Hugging Face config.json, or a size such as 3B",
        kind="spec",
        parse=_model,
    )
    gpu: str = option(
        "a100-80gb", "--gpu", "-g", help="hardware preset, e.g. a100-80gb, h100-sxm", listable=True
    )
    gpus: int = option(
        2048, "--gpus", "-n", help="number of devices", parse=lambda t: p.whole(t, "gpus")
    )
    tokens: float | None = option(
        None,
        "--tokens",
        "-t",
        help="training tokens, e.g. 2T (default: the model's published count)",
        parse=lambda t: p.parse_count(t, "tokens"),
    )
    seq: int | None = option(
        None,
        "--seq",
        help="sequence length, tokens; 4k = 4096 (default: the model's published one)",
        parse=p.seq,
    )
    global_batch: GlobalBatch | None = option(
        None,
        "--global-batch",
        help="per optimizer step: tokens (4Mi = 4,194,304 exact; 4M a target rounded to whole "
        "sequences) or sequences (1024seq); exact fails if no layout divides it",
        parse=p.batch,
    )
    precision: Precision = option(
        Precision.BF16, "--precision", help=h.PRECISION_HELP, parse=p.precision, listable=True
    )
    tp: int | None = axis("tp")
    pp: int | None = axis("pp")
    cp: int | None = axis("cp")
    ep: int | None = axis("ep")
    vp: int | None = axis("vp")
    sp: bool | None = axis("sp")
    zero: ZeroStage | None = axis("zero")
    recompute: Recompute | None = axis("recompute")
    micro_batch: int | None = axis("micro_batch")
    price: float | None = option(
        None,
        "--price",
        help="USD per GPU-hour (default: the preset's reference price)",
        parse=p.price,
    )
    provider: str | None = s.provider()
    market: str | None = s.market()
    own: str | None = option(
        None,
        "--own",
        help="also cost the run on owned hardware: capital per GPU ($30k) or per system "
        "($300k/node), with --amortise, --site-kwh and --utilisation",
    )
    amortise: float | None = s.with_own("amortise", "years the hardware is written off over")
    site_kwh: float | None = s.with_own("site-kwh", "the site's electricity price, USD per kWh")
    utilisation: float | None = s.with_own(
        "utilisation", "the share of those years the GPUs run jobs, 0-1"
    )
    gpus_per_node: int | None = option(
        None,
        "--gpus-per-node",
        help="devices per scale-up node",
        parse=lambda t: p.whole(t, "gpus-per-node"),
    )
    intra_node_bw: float | None = option(
        None,
        "--intra-node-bw",
        help="per device, per direction, e.g. 450GB/s",
        parse=lambda t: p.link(t, "intra-node-bw"),
    )
    inter_node_bw: float | None = option(
        None,
        "--inter-node-bw",
        help="per device, per direction, e.g. 400Gb/s",
        parse=lambda t: p.link(t, "inter-node-bw"),
    )
    pue: float | None = s.pue()
    region: str | None = s.region()
    memory_headroom: float | None = s.memory_headroom()
    goodput: float | None = option(None, "--goodput", help=h.GOODPUT_HELP, kind="number")
    stack: str | None = s.stack()
    flash: bool | None = option(
        None,
        "--flash/--no-flash",
        help="flash attention (no s² attention matrix stored); default: the stack's attention "
        "kernel (on without --stack)",
        kind="bool",
    )
    softmax_passes: int | None = option(
        None, "--softmax-passes", help=h.SOFTMAX_PASSES_HELP, kind="int", parse=p.softmax_passes
    )
    fused_loss: bool | None = option(
        None, "--fused-loss/--eager-loss", help=h.FUSED_LOSS_HELP, kind="bool"
    )
    compile: bool | None = option(None, "--compile/--no-compile", help=h.COMPILE_HELP, kind="bool")
    async_tp: bool | None = option(
        None, "--async-tp/--no-async-tp", help=h.ASYNC_TP_HELP, kind="bool"
    )
    task: Task = option(Task.CAUSAL_LM, "--task", help=h.TASK_HELP, parse=p.task)
    law: str | None = option(
        None, "--law", help="scaling law for the loss (name or fitted law file)"
    )
    unique_tokens: float | None = option(
        None,
        "--unique-tokens",
        help="unique data available; repetition is priced in",
        parse=lambda t: p.parse_count(t, "unique-tokens"),
    )
    host_memory: float | None = s.host_memory()
    host_power: float | None = s.host_power()
    failure_rate: float | None = s.failure_rate()
    restart: float | None = s.restart()
    storage_bw: float | None = s.storage_bw()
    deploy: str | None = option(None, "--deploy", help=h.DEPLOY_HELP)
    deploy_precision: str | None = s.deploy_precision()
    runtime: str | None = s.runtime()
    context: int | None = option(
        None, "--context", help=h.CONTEXT_HELP, parse=lambda t: p.seq(t, "context")
    )
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
    distill: str | None = s.distill("the plan trains a student distilled from it")
    distill_saving: float | None = s.distill_saving()

    @classmethod
    def check(cls, given: dict[str, Any]) -> None:
        s.check_deploy(given)
        if "own" not in given:
            for name, flag in (
                ("amortise", "amortise"),
                ("site_kwh", "site-kwh"),
                ("utilisation", "utilisation"),
            ):
                if name in given:
                    raise InputError(flag, given[name], "a value with --own CAPITAL")

    def pricing(self) -> dict[str, Any]:
        """--provider, --market and --own (with its companions) as trilemma.api.estimate's
        ``provider``, ``market`` and ``own`` (None: not given)."""
        own = None
        if self.own is not None:
            own = {
                "capital": self.own,
                "years": self.amortise,
                "usd_per_kwh": self.site_kwh,
                "utilisation": self.utilisation,
            }
        return {"provider": self.provider, "market": self.market, "own": own}

    def plan_flags(self) -> dict[str, Any]:
        """The stack and the plan fields it decides as given (None: the stack's), as
        trilemma.resolve.make_plan takes them."""
        return {
            "stack": self.stack,
            "flash_attention": self.flash,
            "softmax_passes": self.softmax_passes,
            "fused_loss": self.fused_loss,
            "compile": self.compile,
            "async_tp": self.async_tp,
            "trainer": self.trainer,
            "activation_offload": self.activation_offload,
        }

    def cluster_fields(self) -> dict[str, Any]:
        """The cluster fields as given (None: the preset's), as trilemma.resolve.make_cluster takes them."""
        return {
            "memory_headroom": self.memory_headroom,
            "gpus_per_node": self.gpus_per_node,
            "intra_node_bw_bytes_per_s": self.intra_node_bw,
            "inter_node_bw_bytes_per_s": self.inter_node_bw,
            "price_usd_per_hour": self.price,
            "pue": self.pue,
            "region": self.region,
            "host_memory_bytes": self.host_memory,
            "host_power_w_per_node": self.host_power,
            "failures_per_gpu_hour": self.failure_rate,
            "restart_s": self.restart,
            "storage_write_bytes_per_s": self.storage_bw,
        }

    def layout(self) -> dict[str, Any]:
        """The pinned layout axes (None: searched), as trilemma.api.estimate takes them."""
        return {a.name: getattr(self, a.name) for a in AXES if a.flag is not None}
