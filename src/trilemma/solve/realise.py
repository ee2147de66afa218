"""A solve's optimum realised: a configuration-table row as a full estimate, its deploy figures and
lifetime dollars, and the warnings its reader should see."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from trilemma.estimate.result import Estimate
from trilemma.quality.attach import scores_of
from trilemma.quality.batch import (
    NEAR_OPTIMAL_FACTOR,
    non_embedding_flop_per_token,
    optimal_batch_tokens,
)
from trilemma.quality.distill import learnt_tokens
from trilemma.quality.predict import LossPrediction, predict_loss_block
from trilemma.solve.optimize import Choice
from trilemma.solve.search import ConfigTable
from trilemma.solve.setup import SolveSetup
from trilemma.units import fmt_count, fmt_usd


def plan_maker(
    s: SolveSetup, table: ConfigTable
) -> Callable[[int, float], tuple[Estimate, LossPrediction | None]]:
    """``plan_at(i, tokens)``: config-table row ``i`` trained on ``tokens`` tokens, realised through
    estimate, with its predicted loss (None for a fine-tune)."""
    from trilemma.estimate.choose import estimate_plan
    from trilemma.resolve import make_cluster, make_plan

    def plan_at(i: int, tokens: float) -> tuple[Estimate, LossPrediction | None]:
        prices = s.args["prices"]
        m = table.models[table.model_idx[i]]
        hw = table.gpus[table.gpu_idx[i]]
        prec = table.precisions[table.prec_idx[i]]
        cl = make_cluster(
            hw,
            int(table.n_gpus[i]),
            memory_headroom=s.args["memory_headroom"],
            **s.cluster_fields,
            **({"price_usd_per_hour": prices[hw.name]} if prices and hw.name in prices else {}),
        )
        plan = make_plan(
            m,
            tokens,
            s.seq,
            float(table.batch_tokens[i]),
            prec,
            compile=s.args["compile"],
            **s.plan_fields,
        )
        plan = plan.replace(stages=(plan.stages[0].replace(explicit_batch=False),))
        est = estimate_plan(m, cl, plan, table.layout(i), "solver")
        if s.is_ft:
            return est, None
        learnt = learnt_tokens(m, plan, s.law, s.unique_tokens)  # a distilled student's: its worth
        est = replace(est, benchmarks=scores_of(est, learnt))  # the scores printed beside the loss
        return est, predict_loss_block(
            m, learnt, law=s.law, unique_tokens=s.unique_tokens, precision=str(prec)
        )

    return plan_at


def deployed(
    s: SolveSetup, opt: Estimate, serving_usd: np.ndarray | float, best: int
) -> tuple[Estimate, dict[str, Any] | None]:
    """The optimum with its deploy figures (on ``--deploy``'s device, a KV cache of ``--context``
    tokens) and, with ``inference_tokens``, its lifetime dollars: training plus serving (row
    ``best`` of ``serving_usd``, dollars per configuration)."""
    inference_tokens, deploy = s.args["inference_tokens"], s.args["deploy"]
    min_tokens_per_s = s.args["min_tokens_per_s"]
    lifetime = None
    if inference_tokens:
        serve_usd = float(np.asarray(serving_usd)[best])
        lifetime = {
            "inference_tokens": float(inference_tokens),
            "training_usd": opt.cost.usd,
            "serving_usd": serve_usd,
            "lifetime_usd": opt.cost.usd + serve_usd,
            "convention": "Sardana et al. 2023 (arXiv 2401.00448): 2·N FLOPs per served token, at the cheapest "
            "dollars per training FLOP among the plans searched (trilemma.solve.optimize.serving_usd)",
        }
    if deploy is not None:
        from trilemma.estimate.deploy import with_deploy
        from trilemma.solve.ondevice import CONVENTION, device_serving_kwh

        opt = with_deploy(
            opt, deploy, s.args["deploy_precision"], s.args["context"] or s.seq, s.args["runtime"]
        )
        if inference_tokens:
            price = s.args["device_usd_per_kwh"]
            lifetime |= {
                "serving_energy_kwh_on_device": float(
                    device_serving_kwh(float(inference_tokens), opt.deploy["energy_per_answer_j"])
                ),
                "device_usd_per_kwh": float(price),
                "convention": CONVENTION.format(price=fmt_usd(price)),
            }
        if min_tokens_per_s is not None:
            opt = replace(opt, deploy={**opt.deploy, "min_tokens_per_s": float(min_tokens_per_s)})
    return opt, lifetime


def solve_warnings(s: SolveSetup, table: ConfigTable, ch: Choice, best: int) -> tuple[str, ...]:
    """What the reader of a solve should know: a fine-tune's corner, an optimum at the edge of the
    sizes searched (no model was fixed) or of the GPU counts, a batch far from
    the batch law's (the batch was the solver's), a target met by one batch, and the
    deploy pin's note."""
    sizes_searched = s.args["model"] is None
    own_batch = s.args["global_batch_tokens"] is None
    warnings = []
    if s.is_ft:
        from trilemma.estimate.finetune import FINETUNE_NO_LOSS

        warnings.append(
            f"fine-tune: the search minimised {s.pins.minimize} under the pins (a fine-tune has no loss "
            "corner to trade); " + FINETUNE_NO_LOSS.removeprefix("quality: ")
        )
    if sizes_searched and table.model_idx[best] in (0, len(s.models) - 1):
        warnings.append("the optimum sits at the edge of the model sizes searched: widen --params")
    if own_batch and not s.is_ft:
        m_best = s.models[table.model_idx[best]]
        want = optimal_batch_tokens(
            non_embedding_flop_per_token(m_best, s.seq) * float(ch.tokens[best])
        )
        used = float(table.batch_tokens[best])
        if not 1 / NEAR_OPTIMAL_FACTOR <= used / want <= NEAR_OPTIMAL_FACTOR:
            warnings.append(
                f"the batch of {fmt_count(used)} tokens was set for {'20 tokens per parameter' if s.fixed_tokens is None else 'the given tokens'}; "
                f"the {fmt_count(float(ch.tokens[best]))} tokens chosen call for about {fmt_count(want)} "
                "(DeepSeek LLM's batch law): pass --global-batch to use it"
            )
    if s.pins.target_loss is not None and float(ch.tokens[best]) <= float(
        table.batch_tokens[best]
    ) * (1 + 1e-9):
        warnings.append(
            f"target loss {s.pins.target_loss:g} is met by a single global batch (the law gives "
            f"{float(ch.loss[best]):.3f} after {fmt_count(float(ch.tokens[best]))} tokens): the target does not "
            "bind; set one below that for a plan that trains"
        )
    if table.n_gpus[best] == max(s.counts):
        warnings.append(
            f"the optimum uses the most GPUs allowed ({max(s.counts)}): raise --max-gpus to go further"
        )
    if s.deploy_note:
        warnings.append(s.deploy_note)
    return tuple(warnings)
