"""The quality corner: final pre-training loss from scaling laws, and fitting laws to one's own runs.

- ``laws``: published laws as data (``presets/laws/*.toml``) and laws the user fitted (a TOML file).
- ``predict``: loss for (N, D) under a law, with repeated data (Muennighoff 2023), low-precision
  training (Kumar 2024) and a band from the law's parameter uncertainty.
- ``optimal``: compute-optimal N, D for a FLOP budget; the inference-aware variant (Sardana 2023).
- ``fit``: the Hoffmann 2022 fitting procedure on a table of runs, bootstrap intervals, leave-out check.

Nothing heavy is imported here: matplotlib loads inside plotting only, and the fitter needs only numpy.
"""

from __future__ import annotations

from trilemma.quality.laws import DEFAULT_LAW, DEFAULT_LAW_REASON, Law, get_law, law_names
from trilemma.quality.predict import (
    LossPrediction,
    loss_block,
    loss_mean,
    predict_loss,
    predict_loss_block,
)

__all__ = [
    "DEFAULT_LAW",
    "DEFAULT_LAW_REASON",
    "Law",
    "LossPrediction",
    "get_law",
    "law_names",
    "loss_block",
    "loss_mean",
    "predict_loss",
    "predict_loss_block",
]
