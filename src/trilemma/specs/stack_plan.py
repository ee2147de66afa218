"""The plan fields a software stack decides (TrainingPlan.flash_attention, softmax_passes,
fused_loss, compile, async_tp): their values under a stack, and which of them a flag set otherwise.

A stack's attention kernel says whether FlashAttention runs and, without it, the passes over the
score matrix (eager PyTorch 3: scale, mask, torch.softmax; a fused scale-mask-softmax 1); its
``fused_loss`` the loss kernel, its ``host`` torch.compile, its ``tp_overlap`` asynchronous TP.
trilemma.resolve.make_plan applies these where no flag gave a value (the one place defaults are
applied); the JSON's ``plan.stack.overrides`` names the fields a flag set against them.
"""

from __future__ import annotations

from typing import Any

from trilemma.specs.plan import EAGER_SOFTMAX_PASSES, TrainingPlan
from trilemma.specs.stack import AttentionKernel, HostMode, StackSpec

#: the TrainingPlan fields a stack decides, each overridden by its flag
PLAN_FIELDS = ("flash_attention", "softmax_passes", "fused_loss", "compile", "async_tp")


def plan_defaults(stack: StackSpec) -> dict[str, Any]:
    """The values of PLAN_FIELDS under ``stack`` (StackSpec's defaults: TrainingPlan's own)."""
    return {
        "flash_attention": stack.attention.flash,
        "softmax_passes": EAGER_SOFTMAX_PASSES if stack.attention == AttentionKernel.EAGER else 1,
        "fused_loss": stack.fused_loss,
        "compile": stack.host == HostMode.COMPILE,
        "async_tp": stack.tp_overlap,
    }


def overrides(plan: TrainingPlan) -> dict[str, Any]:
    """The PLAN_FIELDS whose value in ``plan`` is not its stack's (a flag set them), by name."""
    under = plan_defaults(plan.stack_features)
    return {k: getattr(plan, k) for k, v in under.items() if getattr(plan, k) != v}


def stack_document(plan: TrainingPlan) -> dict[str, Any]:
    """The JSON's ``plan.stack``: the stack's name (``default`` when none was given: ``given``
    false), its features and source, and the plan fields flags set against it."""
    st = plan.stack_features
    return {
        "name": st.name,
        "given": plan.stack is not None,
        "description": st.description,
        "features": st.features,
        "source": st.source,
        "overrides": overrides(plan),
    }


__all__ = ["PLAN_FIELDS", "overrides", "plan_defaults", "stack_document"]
