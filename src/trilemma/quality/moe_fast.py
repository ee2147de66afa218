"""The MoE law's point loss, numpy-vectorised for the solver: the host law at the active size
(``trilemma.quality.predict``) carried by the fine-grained MoE law (``trilemma.quality.moe``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from trilemma.quality import moe
from trilemma.quality.laws import Law, get_law
from trilemma.quality.predict import _penalties, loss_mean


def moe_loss_mean(
    law: Law | str | None,
    shape: moe.MoeShape,
    tokens: ArrayLike,
    unique_tokens: ArrayLike | None = None,
    precision: Any = "bf16",
) -> np.ndarray:
    """Point loss of the MoE, numpy-vectorised over tokens (and precisions): the solver's fast path."""
    law = get_law(law)
    host = loss_mean(
        law, shape.active_total, shape.active_non_embedding, tokens, unique_tokens, precision
    )
    return moe.carried(law, moe.reducible_ratio(shape, tokens), host, _penalties(law, precision))
