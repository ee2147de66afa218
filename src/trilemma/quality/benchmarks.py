"""Expected benchmark scores of a pre-training plan, with 80% bands, from its compute and data.

Two steps, as in Llama 3 (arXiv:2407.21783 §3.2.1), Owen 2024 (arXiv:2401.04757) and Ruan et al. 2024
(arXiv:2405.10938): (1) a capability index from training compute C = 6·N·D (FLOP) and tokens per
parameter D/N, x = log10(C) + γ·log10(D/N); (2) accuracy as a sigmoid in x between the benchmark's
chance level and a fitted ceiling. The constants are fitted per benchmark on published scores
(``trilemma/data/benchmarks.csv``) by ``trilemma.quality.bench_fit`` and shipped in
``trilemma/presets/benchmarks.toml``: nothing is fitted at run time. The model family is not a
covariate; the band is the spread of the leave-one-family-out residuals, so it carries the differences
between data recipes and evaluation harnesses. Derivation: docs/derivations.md, "Benchmark scores".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

METHOD = (
    "compute and tokens per parameter -> capability index -> sigmoid between chance and a fitted "
    "ceiling (Llama 3 arXiv:2407.21783 §3.2.1; Owen 2024 arXiv:2401.04757; Ruan et al. 2024 "
    "arXiv:2405.10938), fitted on published scores (trilemma/data/benchmarks.csv); 80% band from "
    "leave-one-family-out residuals"
)
Z80 = 1.2816  # standard normal quantile of 0.9: ±Z80·sd holds 80%
EDGE = 0.1  # share of the chance-to-ceiling span under which (over which) a score is near chance (ceiling)


@dataclass(frozen=True)
class Benchmark:
    """A benchmark as it is fitted: its chance accuracy (fraction) and the settings whose rows count."""

    label: str
    chance: float
    settings: tuple[str, ...]
    setting: str  # in words, for the output


BENCHMARKS: dict[str, Benchmark] = {
    "mmlu": Benchmark("MMLU", 0.25, ("5-shot",), "5-shot, 4 choices"),
    "hellaswag": Benchmark("HellaSwag", 0.25, ("OLMES",), "Ai2 OLMES harness, 4 endings"),
    "arc_c": Benchmark(
        "ARC-C", 0.25, ("25-shot MC", "OLMES MC"), "multiple-choice format (choices in the prompt)"
    ),
    "gsm8k": Benchmark("GSM8K", 0.0, ("8-shot",), "8-shot, exact match"),
}


def capability_index(params: Any, tokens: Any, gamma: float) -> Any:
    """x = log10(6·N·D) + γ·log10(D/N): N parameters, D training tokens (log10 FLOP units)."""
    n, d = np.asarray(params, dtype=float), np.asarray(tokens, dtype=float)
    return np.log10(6.0 * n * d) + gamma * np.log10(d / n)


def expected_accuracy(x: Any, k: float, x0: float, chance: float, ceiling: float) -> Any:
    """chance + (ceiling − chance)·σ(k·(x − x0)): accuracy (fraction) at capability index ``x``."""
    return chance + (ceiling - chance) / (1.0 + np.exp(-k * (np.asarray(x, dtype=float) - x0)))


def index_shift(
    score: float, x: float, k: float, x0: float, chance: float, ceiling: float
) -> float:
    """The shift s with expected_accuracy(x + s) = score (score clipped just inside chance..ceiling)."""
    u = min(max((score - chance) / (ceiling - chance), 0.005), 0.995)
    return x0 + math.log(u / (1.0 - u)) / k - float(x)


@cache
def constants() -> dict[str, dict[str, Any]]:
    """The shipped fit (``trilemma/presets/benchmarks.toml``), one table per benchmark."""
    import sys
    from importlib import resources

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    text = resources.files("trilemma.presets").joinpath("benchmarks.toml").read_text("utf-8")
    return tomllib.loads(text)


def band(name: str, c: dict[str, Any], params: Any, tokens: Any) -> tuple[Any, Any, Any, Any]:
    """(value, low, high, u) of one benchmark at N ``params`` and D ``tokens`` (arrays broadcast):
    fractions 0-1 and u, the value's share of the chance-to-ceiling span. The 80% band is the wider of
    the index-shift band and ± the error 80% of held-out rows stay within: the second is wider where
    the sigmoid is flat (near chance or ceiling, where the index says little), and taking the wider
    everywhere keeps both ends rising with compute (no jump where a regime starts)."""
    b = BENCHMARKS[name]
    x = capability_index(params, tokens, c["gamma"])

    def acc(s: float) -> Any:
        return expected_accuracy(x + s, c["k"], c["x0"], b.chance, c["ceiling"])

    value, low, high = acc(0.0), acc(-Z80 * c["shift_sd"]), acc(Z80 * c["shift_sd"])
    u = (value - b.chance) / (c["ceiling"] - b.chance)
    w = c["lofo_p80_abs_error_points"] / 100.0
    low, high = np.minimum(low, value - w), np.maximum(high, value + w)
    return value, np.maximum(b.chance, low), np.minimum(1.0, high), u


def predict_one(name: str, c: dict[str, Any], params: float, tokens: float) -> dict[str, Any]:
    """One benchmark's expected score with its 80% band (fractions), widened near chance or ceiling."""
    b = BENCHMARKS[name]
    value, low, high, u = (float(v) for v in band(name, c, params, tokens))
    regime = "near chance" if u < EDGE else "near ceiling" if u > 1 - EDGE else None
    lo, hi = c["tokens_per_param_min"], c["tokens_per_param_max"]
    return {
        "name": name,
        "label": b.label,
        "setting": b.setting,
        "value": value,
        "low": low,
        "high": high,
        "chance": b.chance,
        "ceiling": c["ceiling"],
        "regime": regime,
        # tokens per parameter of the published rows: outside, the curve is extrapolated
        "fitted_tokens_per_param": [lo, hi],
        "outside_fitted_range": not lo <= tokens / params <= hi,
        "lofo_median_abs_error_points": c["lofo_median_abs_error_points"],
        "lofo_families": c["families"],
        "source": METHOD,
    }


def predict(
    params: float, tokens: float, fitted: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The ``quality.benchmarks`` block: each benchmark's value, low, high and chance (fractions 0-1)
    for a model of ``params`` parameters (active, for a mixture of experts) trained on ``tokens``
    tokens, and their average (its band averages the ends: the benchmarks move together)."""
    fitted = constants() if fitted is None else fitted
    items = [predict_one(name, fitted[name], params, tokens) for name in BENCHMARKS]
    mean = {k: sum(i[k] for i in items) / len(items) for k in ("value", "low", "high", "chance")}
    return {
        "items": items,
        "average": {"label": "avg", **mean},
        "compute_flop": 6.0 * params * tokens,
        "tokens_per_param": tokens / params,
        "level": 0.8,
        "method": METHOD,
    }


def parse_target(text: Any, field: str = "target-score") -> tuple[str, float]:
    """``"mmlu=0.65"`` → ("mmlu", 0.65): a benchmark and the score (fraction) the lower end of its 80%
    band must reach; InputError naming the benchmarks and the range allowed."""
    from trilemma.errors import InputError

    names = ", ".join(BENCHMARKS)
    allowed = f"BENCHMARK=SCORE with BENCHMARK one of {names} and SCORE a fraction above its chance level and below 1 (mmlu=0.65)"
    if not isinstance(text, str) or text.count("=") != 1:
        raise InputError(field, text, allowed)
    name, _, raw = (part.strip() for part in text.partition("="))
    name = name.lower()
    try:
        score = float(raw)
    except ValueError:
        raise InputError(field, text, allowed) from None
    if name not in BENCHMARKS or not math.isfinite(score):
        raise InputError(field, text, allowed)
    if not BENCHMARKS[name].chance < score < 1.0:
        raise InputError(
            field,
            text,
            f"a {BENCHMARKS[name].label} score above its chance level {BENCHMARKS[name].chance:g} and "
            f"below 1, as a fraction ({name}=0.65); benchmarks: {names}",
        )
    return name, score


def tokens_for_score(
    name: str, score: float, params: Any, *, d_min: float, d_max: float, iters: int = 48
) -> np.ndarray:
    """Smallest D (tokens) in [d_min, d_max] at which the lower end of the benchmark's 80% band reaches
    ``score`` for models of ``params`` parameters (an array), and no fewer than the fewest tokens per
    parameter of the published rows; inf where d_max falls short or the D needed is beyond their most
    tokens per parameter (the curve is not asked where no row was). Bisection in ln D:
    trilemma.quality.forms.tokens_for_loss on the negated lower end."""
    from trilemma.quality.forms import tokens_for_loss

    n = np.asarray(params, dtype=float)
    c = constants()[name]
    d = tokens_for_loss(
        lambda d: -band(name, c, n, d)[1], -score, n.shape, d_min=d_min, d_max=d_max, iters=iters
    )
    d = np.maximum(d, c["tokens_per_param_min"] * n)
    return np.where(d <= c["tokens_per_param_max"] * n, d, np.inf)


def most_tokens(name: str, params: Any) -> np.ndarray:
    """The most tokens (per model of ``params`` parameters) the published rows' tokens per parameter
    reach: beyond it a target score is not counted as met."""
    return constants()[name]["tokens_per_param_max"] * np.asarray(params, dtype=float)


def low_end(name: str, params: Any, tokens: Any) -> np.ndarray:
    """The lower end of the benchmark's 80% band (fraction) at N ``params``, D ``tokens`` (arrays)."""
    return np.asarray(band(name, constants()[name], params, tokens)[1])


def format_score(item: dict[str, Any]) -> str:
    """'66% (58–72)': one benchmark's expected score and its 80% band, in percent."""

    def pct(v: float) -> str:
        return f"{100 * v:.0f}"

    return f"{pct(item['value'])}% ({pct(item['low'])}–{pct(item['high'])})"


def shown_score(block: dict[str, Any] | None, name: str) -> str:
    """One benchmark of a ``quality.benchmarks`` block as a table cell ('66% (58–72)'); '—' without a
    block (a fine-tune, a classifier: no from-scratch scores)."""
    if block is None:
        return "—"
    item = next(i for i in block["items"] if i["name"] == name)
    return format_score(item)


def format_line(block: dict[str, Any]) -> str:
    """'MMLU 66% (58–72) · HellaSwag … · avg …', with a note for scores near chance or ceiling."""

    parts = [f"{i['label']} {format_score(i)}" for i in [*block["items"], block["average"]]]
    notes = [f"{i['label']} {i['regime']}" for i in block["items"] if i["regime"]]
    tail = f" [{'; '.join(notes)}: band widened]" if notes else ""
    outside = [i["label"] for i in block["items"] if i["outside_fitted_range"]]
    if outside:
        tail += (
            f" [{block['tokens_per_param']:.3g} tokens per parameter: outside the published rows' "
            f"range for {', '.join(outside)}, extrapolated]"
        )
    return " · ".join(parts) + tail
