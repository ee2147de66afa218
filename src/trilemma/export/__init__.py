"""`trilemma export`: a plan (from `estimate`, or `solve`'s optimum or a frontier point) as the
config of the engine that will run it — torchtitan (job TOML), Megatron-LM (launch script),
DeepSpeed (JSON config) or Hugging Face's Trainer with PEFT (TrainingArguments, LoraConfig,
BitsAndBytesConfig as JSON, and a script).

    >>> from trilemma.api import estimate
    >>> from trilemma.export import export
    >>> doc = export(estimate("llama2-7b", "a100-80gb", 64, tokens=2e11), "megatron")
    >>> doc.files["train_megatron.sh"]  # the launch script; doc.to_dict() is --json's document

Every exporter takes the same integers (trilemma.export.plan.PlanNumbers: GPUs = tp × pp × cp × dp,
global batch = micro-batch × accumulation × dp, steps = ⌈tokens / batch tokens⌉) and writes only
argument names read from the engine's source (each module cites its release or commit). A plan
feature an engine cannot express is an ExportError (exit status 2) that says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from trilemma.errors import InputError
from trilemma.export.document import SCHEMA, ExportDocument
from trilemma.export.plan import ENGINES, ExportError, FineTune, PlanNumbers, finetune_of
from trilemma.specs import Task


def _exporter(engine: str) -> Any:
    from trilemma.export import deepspeed, hf, megatron, torchtitan

    return {"torchtitan": torchtitan, "megatron": megatron, "deepspeed": deepspeed, "hf": hf}[
        engine
    ]


def check_engine(engine: str, field: str = "to") -> str:
    """The engine name (any case), or an InputError listing the engines."""
    key = str(engine).strip().lower()
    aliases = {
        "megatron-lm": "megatron",
        "nemo": "megatron",
        "huggingface": "hf",
        "transformers": "hf",
        "peft": "hf",
        "titan": "torchtitan",
    }
    key = aliases.get(key, key)
    if key not in ENGINES:
        raise InputError(field, engine, " or ".join(ENGINES))
    return key


def export(
    est: Any, engine: str, *, finetune: FineTune | None = None, source: str = "estimate"
) -> ExportDocument:
    """One Estimate (trilemma.api.estimate, or a solve's plan) as ``engine``'s config.
    ``finetune``: the fine-tune fields (default: read from the plan, trilemma.export.plan.finetune_of)."""
    engine = check_engine(engine)
    if est.plan.task != Task.CAUSAL_LM:
        raise ExportError(
            engine,
            "task",
            est.plan.task,
            "every exporter writes causal-LM training (an LM head over "
            "the vocabulary and its cross-entropy); a sequence classifier is not one",
        )
    n = PlanNumbers.of(est)
    ft = finetune if finetune is not None else finetune_of(est.plan)
    hw = est.cluster.hardware
    plan = {
        "source": source,
        "model": est.model.name,
        "hardware": hw.name,
        "n_gpus": est.cluster.n_gpus,
        "precision": str(est.plan.precision),
        "layout": est.layout.summary(),
        "finetune": None if ft is None else ft.method,
        "title": f"{est.model.name} on {est.cluster.n_gpus}× {hw.name}, {est.layout.summary()}, "
        f"{est.plan.precision}",
    }
    doc = _exporter(engine).export(est.model, est.plan, n, ft, plan)
    return ExportDocument(
        engine=doc.engine,
        engine_version=doc.engine_version,
        files=doc.files,
        config=doc.config,
        numbers=doc.numbers,
        plan=doc.plan,
        notes=doc.notes,
        warnings=tuple(est.warnings),
    )


#: ExportError features that name a layout axis: another layout of the same plan may be expressible
LAYOUT_FEATURES = frozenset(
    {"tp", "pp", "vp", "cp", "ep", "sp", "ZeRO stage", "recompute", "pp × vp"}
)


def expressible(engine: str) -> Callable[[Any], bool]:
    """A check for trilemma.estimate.choose.estimate_plan's ``accept``: True when ``engine`` writes the
    estimate's plan, False when it refuses one of its layout axes (LAYOUT_FEATURES: the search tries the next
    layout), and the exporter's own ExportError when it refuses the model or the plan (no layout helps)."""
    engine = check_engine(engine)

    def accept(est: Any) -> bool:
        try:
            export(est, engine)
        except ExportError as exc:
            if exc.feature in LAYOUT_FEATURES:
                return False
            raise
        return True

    return accept


def export_solve(
    result: Any, engine: str, point: int | None = None, *, finetune: FineTune | None = None
) -> ExportDocument:
    """A solve's optimum (``point`` None) or the frontier point of that index (the row of
    ``solve --frontier``'s CSV, 0-based) as ``engine``'s config."""
    check_engine(engine)
    est = result.optimum if point is None else result.frontier_plan(point)
    source = "solve optimum" if point is None else f"solve frontier point {point}"
    try:
        return export(est, engine, finetune=finetune, source=source)
    except ExportError as exc:
        if (
            exc.feature in LAYOUT_FEATURES
        ):  # the same plan in the fastest layout the engine can write
            from trilemma.estimate.choose import estimate_plan

            alt = estimate_plan(
                est.model, est.cluster, est.plan, None, "solver", accept=expressible(engine)
            )
            change = alt.time.total_s / est.time.total_s - 1
            alt = replace(
                alt,
                warnings=(
                    *alt.warnings,
                    (
                        f"layout: the {source}'s, {est.layout.label(compact=True)}, cannot be written ({exc.feature} "
                        f"{exc.value}: {exc.why}); this is the fastest layout of the same plan that can, "
                        f"{abs(change):.1%} {'longer' if change >= 0 else 'shorter'}"
                    ),
                ),
            )
            try:  # refused when no layout of the plan is expressible (estimate_plan then returns the fastest)
                return export(alt, engine, finetune=finetune, source=source)
            except ExportError:
                pass
        if "pin --" not in exc.why:
            raise
        # the layout flags an exporter names belong to `estimate`: solve searches the layout
        raise ExportError(
            exc.engine,
            exc.feature,
            exc.value,
            (
                f"{exc.why}; `solve` searches the layout and has no such flag: give `trilemma export --to {engine} "
                f"estimate` this plan's model, hardware and GPU count ({est.cluster.n_gpus}) with it"
            ),
        ) from None


__all__ = [
    "ENGINES",
    "LAYOUT_FEATURES",
    "SCHEMA",
    "ExportDocument",
    "ExportError",
    "FineTune",
    "PlanNumbers",
    "check_engine",
    "export",
    "export_solve",
    "expressible",
    "finetune_of",
]
