"""The degrees of a parallel layout, and the products of them the estimators use, written once.

GPUs = tp × cp × pp × dp; expert parallelism is carved out of data parallelism (Megatron-Core), so
ep does not multiply. Ranks are numbered tensor-parallel fastest, then context, pipeline and data
(Megatron-LM's order): a context- or data-parallel group has stride tp, an expert-parallel group
stride tp·cp. Sequence parallelism (Korthikanti et al. 2022 §4.2.2) splits the tensor-parallel
ranks' activations along the sequence, so it exists only with tp > 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def sequence_parallel(sp: Any, tp: Any) -> Any:
    """Sequence parallelism as it runs: only with tensor parallelism (tp > 1). Arrays (int codes,
    0/1) give an array of the codes; one layout's bool and int give a bool."""
    if np.ndim(sp) or np.ndim(tp):
        return np.where(np.asarray(tp) > 1, sp, 0)
    return bool(sp) and tp > 1


@dataclass(frozen=True)
class ParallelDims:
    """The degrees of one layout (ints) or of many (int64 arrays that broadcast together)."""

    tp: Any = 1
    cp: Any = 1
    pp: Any = 1
    dp: Any = 1
    ep: Any = 1
    sp: Any = 0

    @classmethod
    def over(cls, n_gpus: Any, tp: Any = 1, cp: Any = 1, pp: Any = 1, **rest: Any) -> ParallelDims:
        """The layout of ``n_gpus`` with dp derived: ⌊n_gpus / (tp·cp·pp)⌋ (``divides`` says whether
        it is exact; where it is not, the layout is illegal, reason R_GPUS)."""
        return cls(tp=tp, cp=cp, pp=pp, dp=n_gpus // (tp * cp * pp), **rest)

    @property
    def replica(self) -> Any:
        """GPUs one data-parallel replica spans: tp · cp · pp."""
        return self.tp * self.cp * self.pp

    @property
    def n_gpus(self) -> Any:
        """GPUs of the whole layout: tp · cp · pp · dp."""
        return self.replica * self.dp

    def divides(self, n_gpus: Any) -> Any:
        """Whether tp · cp · pp divides ``n_gpus``, so that a whole dp fills them."""
        return n_gpus % self.replica == 0

    @property
    def weight_shards(self) -> Any:
        """Ranks one copy of the weights is split over: tp · pp (cp and dp ranks hold copies)."""
        return self.tp * self.pp

    @property
    def shard_ranks(self) -> Any:
        """Ranks the gradients are reduced over and ZeRO shards the states across: dp · cp (stride tp)."""
        return self.dp * self.cp

    @property
    def expert_stride(self) -> Any:
        """Rank distance between the members of an expert-parallel group: tp · cp."""
        return self.tp * self.cp

    @property
    def sp_on(self) -> Any:
        """Sequence parallelism as it runs (``sequence_parallel``): a bool, or a bool array."""
        on = sequence_parallel(self.sp, self.tp)
        return on > 0 if np.ndim(on) else on


__all__ = ["ParallelDims", "sequence_parallel"]
