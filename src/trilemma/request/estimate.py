"""``EstimateRequest``: every input of `trilemma estimate` (one plan), each field written once."""

from __future__ import annotations

from typing import Any, ClassVar

from trilemma.request import help as h
from trilemma.request import parsers as p
from trilemma.request import shared as s
from trilemma.request.field import Request, option
from trilemma.specs import ModelSpec, Precision, Recompute, Task, ZeroStage
from trilemma.specs.axes import AXES


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
    global_batch: int | None = option(
        None,
        "--global-batch",
        help="tokens per optimizer step, e.g. 4M (exact: fails if no layout divides it)",
        parse=lambda t: p.whole(t, "global-batch"),
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
    pue: float | None = option(None, "--pue", help="datacentre PUE (default 1.1)", kind="number")
    region: str | None = option(
        None, "--region", help="grid region preset (us, eu, france, ...) or kg CO2e/kWh"
    )
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
    host_power: float | None = option(
        None, "--host-power", help=h.HOST_POWER_HELP, parse=p.host_power
    )
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

    @classmethod
    def check(cls, given: dict[str, Any]) -> None:
        s.check_deploy(given)

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
        }

    def layout(self) -> dict[str, Any]:
        """The pinned layout axes (None: searched), as trilemma.api.estimate takes them."""
        return {a.name: getattr(self, a.name) for a in AXES if a.flag is not None}
