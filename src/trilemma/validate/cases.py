"""Map every row of ``trilemma/data/{runs,throughput,memory}.csv`` to a :class:`Case` or a :class:`Skipped`.

Nothing here knows a particular model or row: each field is mapped by one generic rule over the
row's columns and its ``notes``/``source`` text, and every default the mapping has to supply is
written into the case's ``assumptions``. The rules, in the order they are applied:

* **Metric** (one per row, first that applies). Runs: ``gpu_hours_reported`` → ``gpu_hours``;
  ``days_reported`` with a GPU count (unless the notes call the days a bound) → ``days``; a
  percentage labelled MFU (or HFU) in ``mfu_or_tflops_reported`` → ``mfu`` (``hfu`` when the
  source counts hardware FLOPs); a TFLOP/s figure → ``model_tflops_per_gpu`` or
  ``hardware_tflops_per_gpu`` by the source's convention; tokens/s per GPU. Throughput:
  ``tokens_per_s_reported`` (convention-free) → ``tflops_per_gpu_reported`` → ``mfu_reported``
  → ``step_time_s_reported``. Memory: ``peak_memory_gb_reported`` GiB → bytes.
* **Hardware**: the device named in ``gpu_type`` (memory rows: in the notes) resolved to a preset
  (``<device>-<N>gb`` first, then ``<device>``); a stated memory size or wattage that differs from
  the preset replaces ``hbm_bytes`` / ``board_power_w``. No preset → skipped.
* **Model**: the name normalised (lower case, parentheticals and `` - `` suffixes dropped, ``Llama
  2 13B`` → ``llama2-13b``, a minor version dropped as a fallback, each parenthetical tried as an
  alias, trailing words trimmed) and used when a preset within 5 % of the row's parameters agrees
  with every dimension the row gives (the row's sequence length and stated vocabulary override
  the preset's); otherwise a ModelSpec from the row's dimensions in the block of a family template
  (the nearest-sized preset of the family the name hints at: Llama 1/2/3, GPT-NeoX/Pythia, Falcon,
  OPT, BLOOM, BERT, GPT-3; MPT has two blocks, released ALiBi/no-bias and llm-foundry's defaults
  with learned positions and biases; with no hint, GPT-3- and Llama-style), the row's parameter
  count choosing among several candidate blocks; with no dimensions, a dense Llama-style model from
  :func:`trilemma.shape.model_for_params`. Mixture-of-experts rows are skipped (their expert
  shapes are not in the data).
* **Plan**: the row's tokens (throughput and memory rows: 100 × the global batch, any multiple
  would do), sequence length, global batch (given → ``explicit_batch``; rounded figures and
  batches the row's layout cannot divide become targets), precision, FlashAttention (off for
  sources dated before 2022-06), optimizer and gradient dtype.
* **Layout**: only the axes the row fixes (tp, pp, dp, cp, vp, sp, zero, recompute, micro_batch),
  checked against the GPU count; rows that contradict it, or that trilemma cannot lay out (a pp
  that does not divide the layers), are skipped. A run without a GPU count gets the largest power
  of two ≤ half its global batch in sequences, within [8, 2048].
* **Group** (the leave-one-source-out unit): the first arXiv id in ``source``, else its first
  URL-like token (GitHub paths cut to owner/repo), else the whole source.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from trilemma.specs.build import make_plan
from trilemma.errors import TrilemmaError
from trilemma.estimate.layouts import candidate_layouts, legal_mask, reason_text
from trilemma.estimate.params import param_counts
from trilemma.presets import get_hardware, get_model, is_model_preset, model_presets
from trilemma.shape import model_for_params
from trilemma.specs import (DtypeSpec, FfnType, HardwareSpec, ModelSpec, NormType, Optimizer, PositionType, Precision,
                            Stage, TrainingPlan)
from trilemma.validate import Case, Kind, Metric, Skipped

__all__ = ["KINDS", "load_cases", "read_rows"]

KINDS: tuple[Kind, ...] = ("runs", "throughput", "memory")

#: a preset stands for a row when its parameter count is within this of the row's
PRESET_TOLERANCE = 0.05
#: a mapped model further than this from the row's parameter count gets an assumption note
PARAM_WARN = 0.10
#: throughput and memory rows need one step: tokens = this many global batches
STEPS_FOR_RATE_ROWS = 100
#: FlashAttention (Dao et al. 2022, arXiv 2205.14135) is assumed off for sources dated before this
FLASH_FROM = (2022, 6)
#: a run row without a GPU count gets the largest power of two ≤ global batch (sequences) / 2,
#: clamped to this range (each data-parallel rank can then hold at least 2 sequences)
DERIVED_GPUS_RANGE = (8, 2048)
#: FLOP-counting conventions of sources (data/README.md): hardware FLOPs include recomputation
HARDWARE_FLOPS_SOURCES = frozenset({
    "arXiv:2104.04473",  # Narayanan et al. 2021, Megatron-LM PTD-P
    "arXiv:2211.05100",  # BLOOM
    "arXiv:2303.17564",  # BloombergGPT
    "arXiv:2201.11990",  # MT-NLG
})
MODEL_FLOPS_SOURCES = frozenset({
    "arXiv:2204.02311",  # PaLM
    "arXiv:2205.05198",  # Korthikanti et al. 2022
    "arXiv:2407.21783",  # Llama 3
    "github.com/mosaicml/llm-foundry",
})

GIB = 2.0**30
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                            "nov", "dec"))}


class _Skip(Exception):
    """A row that cannot be mapped; the message is the Skipped reason (one sentence)."""


# ------------------------------------------------------------------ reading

def read_rows(kind: Kind) -> list[dict[str, str]]:
    """The rows of ``trilemma/data/<kind>.csv`` as dicts of stripped strings."""
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not allowed; expected one of {', '.join(KINDS)}")
    text = (resources.files("trilemma") / "data" / f"{kind}.csv").read_text(encoding="utf-8")
    return [{k: (v or "").strip() for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]


def _num(cell: str | None) -> float | None:
    if cell is None or not cell.strip():
        return None
    try:
        v = float(cell.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _int(cell: str | None) -> int | None:
    v = _num(cell)
    return None if v is None else int(round(v))


# ------------------------------------------------------------------ source: group, date, convention

def group_of(source: str) -> str:
    """First arXiv id ('arXiv:NNNN.NNNNN'), else first URL-like token, else the whole source."""
    m = re.search(r"arXiv[:\s]*(\d{4}\.\d{4,5})", source, re.I)
    if m:
        return f"arXiv:{m.group(1)}"
    m = re.search(r"\b((?:[a-z0-9-]+\.)+(?:com|org|co|ai|io|net|dev|edu)(?:/[^\s;,()']*)?)", source, re.I)
    if m:
        tok = m.group(1).rstrip("/.,:")
        parts = tok.split("/")
        if parts[0].lower() == "github.com":
            tok = "/".join(parts[:3])
        return tok
    return source.strip()


def source_date(source: str) -> tuple[int, int | None] | None:
    """(year, month or None) of a source: its first arXiv id (yymm), a 'Mon YYYY', or a year."""
    m = re.search(r"arXiv[:\s]*(\d{2})(\d{2})\.\d{4,5}", source, re.I)
    if m:
        return 2000 + int(m.group(1)), int(m.group(2))
    m = re.search(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+((?:19|20)\d\d)(?!\d)", source, re.I)
    if m:
        return int(m.group(2)), _MONTHS[m.group(1).lower()]
    m = re.search(r"(?<![\d.@])((?:19|20)\d\d)(?!\d)", source)
    if m:
        return int(m.group(1)), None
    return None


def flash_attention_for(source: str) -> tuple[bool, str]:
    d = source_date(source)
    if d is None:
        return True, "FlashAttention on (the source is undated; the default)"
    year, month = d
    when = f"{year}-{month:02d}" if month else f"{year}"
    if month is None:
        on = year > FLASH_FROM[0]
    else:
        on = (year, month) >= FLASH_FROM
    return on, (f"FlashAttention {'on' if on else 'off'} (source dated {when}; assumed on from "
                f"{FLASH_FROM[0]}-{FLASH_FROM[1]:02d})")


def counts_hardware_flops(group: str, text: str) -> tuple[bool, str]:
    """Whether a source's TFLOP/s or utilisation counts hardware FLOPs (recompute included)."""
    if group in HARDWARE_FLOPS_SOURCES or re.search(r"includes? recompute|hardware flops", text, re.I):
        return True, f"{group} counts hardware FLOPs (recomputation included), per data/README"
    if group in MODEL_FLOPS_SOURCES:
        return False, f"{group} counts model FLOPs, per data/README"
    return False, f"FLOP-counting convention of {group} not listed in data/README; taken as model FLOPs"


# ------------------------------------------------------------------ text parsing

_PCT = r"(\d+(?:\.\d+)?)\s*%"


def _grad_accum(text: str) -> int | None:
    m = re.search(r"grad(?:ient)?[-_ ]?acc(?:um(?:ulation)?)?(?:[-_ ]steps)?\s*[=:]?\s*(\d+)", text, re.I)
    return int(m.group(1)) if m else None


def _vocab_from(text: str) -> int | None:
    m = re.search(r"vocab(?:ulary)?(?:\s+padded\s+to)?\s*[=:]?\s*(\d[\d,]*)", text, re.I)
    return int(m.group(1).replace(",", "")) if m else None


def _batch_seqs_from(text: str) -> tuple[int, bool] | None:
    """A global batch stated in sequences in the text: (final value, ramped?)."""
    m = re.search(r"\b(?:GBS|global batch|batch)\s*((?:\d[\d,]*\s*->\s*)*)(\d[\d,]*)\s*(?:seqs|sequences)\b",
                  text, re.I)
    if m:
        return int(m.group(2).replace(",", "")), bool(m.group(1))
    m = re.search(r"\bglobal batch\s*(?:size\s*)?[=:]?\s*(\d[\d,]*)\b(?!\s*(?:tokens|M|K))", text, re.I)
    if m:
        return int(m.group(1).replace(",", "")), False
    return None


def parse_precision(*texts: str) -> tuple[Precision | None, str]:
    """Compute precision named in the first text that names one: (precision, the text that named it)."""
    for t in texts:
        low = t.lower()
        if not low:
            continue
        for pat, prec in ((r"fp8|float8", Precision.FP8), (r"bf16|bfloat16", Precision.BF16),
                          (r"fp16|float16|mixed[ -]precision", Precision.FP16), (r"tf32", Precision.TF32),
                          (r"fp32|float32", Precision.FP32)):
            m = re.search(pat, low)
            if m:
                return prec, (t if len(t) <= 60 else f"...{t[max(0, m.start() - 25):m.end() + 25]}...")
    return None, ""


def parse_recompute(*texts: str) -> str | None:
    for t in texts:
        low = t.lower().strip()
        if not low:
            continue
        if low.startswith("full"):
            return "full"
        if low.startswith("selective"):
            return "selective"
        if low.startswith("none") or low == "no":
            return "none"
        if re.search(r"\b(?:no|without)\s+(?:activation\s+)?(?:checkpointing|recomput\w*)", low):
            return "none"
        if re.search(r"selective\s+(?:activation\s+)?recomput", low):
            return "selective"
        if re.search(r"full\s+(?:activation\s+)?recomput|activation checkpointing"
                     r"|gradient_checkpointing\s*=\s*true", low):
            return "full"
    return None


def parse_zero(text: str) -> int | None:
    low = text.lower()
    m = re.search(r"zero[- ]?(?:stage[- ]?)?([0-3])\b", low)
    if m:
        return int(m.group(1))
    if re.search(r"fsdp|full_shard|full shard", low):
        return 3
    if "distributed optimizer" in low:
        return 1
    if re.search(r"\bddp\b", low) or re.search(r"^none\b", low):
        return 0
    return None


# ------------------------------------------------------------------ hardware

_DEVICE = r"(a100|h100|h200|h800|b200|v100|l40s|mi250x|mi300x|rtx[- ]?4090|tpu\s*-?\s*v\s*\d+[a-z]?|tpu)"


def resolve_hardware_text(text: str) -> tuple[HardwareSpec, list[str]]:
    """A HardwareSpec from a device description ('H100-96GB (HBM2e, 500W)', 'Tesla V100-SXM2 16GB')."""
    low = text.lower()
    m = re.search(_DEVICE, low)
    if not m:
        raise _Skip(f"hardware '{text}' names no device trilemma has a preset for")
    dev = re.sub(r"[\s-]", "", m.group(1))
    if dev.startswith("tpu"):
        if dev == "tpu":
            raise _Skip(f"hardware '{text}' does not say which TPU generation, so no preset applies")
        dev = "tpu-" + dev[3:]
    tail = low[m.end():m.end() + 30]
    mm = re.search(r"(\d+)\s*gb\b", tail)
    mem = int(mm.group(1)) if mm else None
    mw = re.search(r"(\d{3,4})\s*w\b", low)
    watts = int(mw.group(1)) if mw else None
    notes: list[str] = []
    hw = None
    tried = ([f"{dev}-{mem}gb"] if mem else []) + [dev]
    for key in tried:
        try:
            hw = get_hardware(key)
            break
        except TrilemmaError:
            continue
    if hw is None:
        raise _Skip(f"hardware '{text}' has no preset ({', '.join(tried)} unknown)")
    if hw.name != tried[0]:
        notes.append(f"hardware '{text}' taken as preset {hw.name}")
    changes: dict[str, Any] = {}
    if mem and abs(hw.hbm_bytes - mem * GIB) > 0.5 * GIB:
        changes["hbm_bytes"] = float(mem * GIB)
        notes.append(f"device memory {mem} GiB as stated (preset {hw.name} has {hw.hbm_bytes / GIB:.0f} GiB)")
    if watts and watts != hw.board_power_w:
        changes["board_power_w"] = float(watts)
        notes.append(f"board power {watts} W as stated (preset {hw.board_power_w:.0f} W); "
                     f"peak FLOP/s kept at the preset's")
    elif not watts and re.search(r"tdp|power", low):
        notes.append(f"board power not stated in '{text}'; preset {hw.name}'s {hw.board_power_w:.0f} W kept")
    if changes:
        hw = hw.replace(name=f"{hw.name} ({text})", **changes)
    return hw, notes


# ------------------------------------------------------------------ model

_ARCH_FIELDS = ("family", "causal", "ffn_type", "tied_embeddings", "position", "norm", "norms_per_layer",
                "embedding_norm", "final_norm", "pooler", "type_vocab_size", "qkv_bias", "out_bias", "mlp_bias",
                "parallel_block", "dropout")

#: family hints: a regex over the normalised name (then the notes) → preset family used as template
_FAMILY_HINTS: tuple[tuple[str, str], ...] = (
    (r"\bmpt\b", "mpt"),
    (r"llama\s*-?\s*3", "llama3"),
    (r"llama\s*-?\s*2", "llama2"),
    (r"llama", "llama"),
    (r"neox|pythia", "pythia"),
    (r"falcon", "falcon"),
    (r"\bopt\b", "opt"),
    (r"bloom", "bloom"),
    (r"\bbert\b", "bert"),
    (r"\bgpt\b|gpt-?3", "gpt3"),
)
#: MosaicML MPT blocks: the released MPT models (ALiBi, no biases) and llm-foundry's MPTConfig
#: defaults (learned positions up to max_seq_len, biases), which the benchmark yamls leave as they are
_MPT_VARIANTS = (
    ("MPT block as released (ALiBi, no biases, GeLU MLP 4d, tied)",
     dict(family="mpt", ffn_type=FfnType.GELU, tied_embeddings=True, position=PositionType.ALIBI,
          norm=NormType.LAYERNORM, qkv_bias=False, out_bias=False, mlp_bias=False, dropout=False)),
    ("MPT block with llm-foundry MPTConfig defaults (learned positions to max_seq_len, biases, GeLU MLP 4d, tied)",
     dict(family="mpt", ffn_type=FfnType.GELU, tied_embeddings=True, position=PositionType.LEARNED,
          norm=NormType.LAYERNORM, qkv_bias=True, out_bias=True, mlp_bias=True, dropout=False)),
)
_MPT_VOCAB, _MPT_FFN_RATIO, _MPT_HEAD_DIM = 50368, 4.0, 128
#: a row's parameter count with at most this many significant digits is a rounded label ('6.7B')
_ROUNDED_DIGITS = 3


@dataclass(frozen=True)
class _Variant:
    label: str
    arch: dict
    ffn_ratio: float
    vocab: int
    vocab_from: str
    head_dim: int


def _variants(fam: str | None, tmpl: ModelSpec | None, params: float | None) -> list[_Variant]:
    """Block architectures to try for a row built from its dimensions, the default first."""
    if fam == "mpt":
        return [_Variant(lab, arch, _MPT_FFN_RATIO, _MPT_VOCAB, "MPT default", _MPT_HEAD_DIM)
                for lab, arch in _MPT_VARIANTS]

    def of(t: ModelSpec, why: str = "") -> _Variant:
        ratio = t.ffn_dim / t.d_model
        lab = (f"architecture of preset {t.name} ({t.ffn_type} MLP {ratio:.4g}d, {t.position} positions, {t.norm}, "
               f"{'tied' if t.tied_embeddings else 'untied'}){why}")
        return _Variant(lab, {k: getattr(t, k) for k in _ARCH_FIELDS}, ratio, t.vocab_size, f"template {t.name}",
                        t.d_head)

    if tmpl is not None:
        return [of(tmpl)]
    why = "; the name hints at no family"
    return [of(_template("gpt3", params) or get_model("gpt3-175b"), why + ", GPT-style"),
            of(_template("llama2", params) or get_model("llama2-7b"), why + ", Llama-style")]


def _significant_digits(x: float) -> int:
    return len(str(int(round(x))).rstrip("0"))


def _normalise(name: str) -> str:
    s = name.lower()
    s = s.split(" - ")[0]
    s = re.sub(r"\([^)]*\)", " ", s)
    s = s.replace("_", " ")
    # 'llama 2 13b' → 'llama2 13b', 'gpt-2 124m' → 'gpt2 124m': a version number between a word and a size
    s = re.sub(r"([a-z])[\s-]+(\d+(?:\.\d+)?)(?=[\s-]+\d+(?:\.\d+)?[kmbt]\b)", r"\1\2", s)
    s = re.sub(r"[\s-]+", "-", s.strip())
    return s.strip("-")


def _name_candidates(name: str) -> list[str]:
    """Preset keys to try for a row's model name (most specific first)."""
    bases = [_normalise(name)] + [_normalise(p) for p in re.findall(r"\(([^)]*)\)", name)]
    out: list[str] = []
    for b in bases:
        if not b:
            continue
        variants = [b, re.sub(r"^([a-z]+\d+)\.\d+", r"\1", b)]  # 'llama3.1-8b' → 'llama3-8b'
        for v in variants:
            toks = v.split("-")
            for k in range(len(toks), 0, -1):
                cand = "-".join(toks[:k])
                if (k >= 2 or k == len(toks)) and cand not in out:
                    out.append(cand)
    return out


def _family(name: str, notes: str) -> tuple[str | None, str]:
    for text in (_normalise(name).replace("-", " ") + " " + name.lower(), notes.lower()):
        for pat, fam in _FAMILY_HINTS:
            if re.search(pat, text):
                return fam, pat
    return None, ""


def _template(fam: str | None, params: float | None) -> ModelSpec | None:
    if fam is None or fam == "mpt":
        return None
    cands = [m for m in model_presets().values() if m.family == fam]
    if not cands:
        return None
    target = params or 1e9
    return min(cands, key=lambda m: abs(math.log(param_counts(m).total / target)))


def _round_up(x: float, k: int) -> int:
    return int(k * math.ceil(x / k - 1e-9))


@dataclass
class _Ctx:
    kind: Kind
    row: int
    cells: dict[str, str]
    label: str
    notes: str
    source: str
    assumptions: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text and text not in self.assumptions:
            self.assumptions.append(text)

    @property
    def text(self) -> str:
        return f"{self.label}; {self.notes}"


def _params_of(c: _Ctx) -> float | None:
    return _num(c.cells.get("params_total")) or _num(c.cells.get("params"))


_MOE_REASON = "mixture-of-experts model: the expert count and width needed to map it are not in the row"


def _is_moe(c: _Ctx) -> bool:
    total, active = _params_of(c), _num(c.cells.get("params_active"))
    if total and active and active < 0.95 * total:
        return True
    return bool(re.search(r"\bmoe\b|mixture[- ]of[- ]experts|\d+\s*routed\b", f"{c.label} {c.notes}", re.I))


def _row_dims(c: _Ctx) -> dict[str, int]:
    g = c.cells.get
    dims = {"n_layers": _int(g("n_layers")), "d_model": _int(g("d_model")), "n_heads": _int(g("n_heads")),
            "n_kv_heads": _int(g("n_kv_heads")), "ffn_dim": _int(g("ffn_dim"))}
    return {k: v for k, v in dims.items() if v}


def _row_vocab(c: _Ctx) -> tuple[int | None, str]:
    v = _int(c.cells.get("vocab"))
    if v:
        return v, "vocab column"
    v = _vocab_from(c.notes)
    return (v, "notes") if v else (None, "")


def resolve_model_row(c: _Ctx, seq_len: int | None, pp: int | None = None) -> ModelSpec:
    params = _params_of(c)
    if _is_moe(c):
        raise _Skip(_MOE_REASON)
    dims = _row_dims(c)
    vocab, vocab_from = _row_vocab(c)
    # 1. a preset that agrees with the row
    rejected = []
    for key in _name_candidates(c.label):
        if not is_model_preset(key):
            continue
        p = get_model(key)
        n = param_counts(p).total
        if params and abs(n / params - 1) > PRESET_TOLERANCE:
            rejected.append(f"{p.name} ({n / params - 1:+.0%} params)")
            continue
        clash = [f"{k} {v} vs {getattr(p, k) if k != 'n_kv_heads' else p.kv_heads}" for k, v in dims.items()
                 if (p.kv_heads if k == "n_kv_heads" else getattr(p, k)) != v]
        if clash:
            rejected.append(f"{p.name} ({', '.join(clash)})")
            continue
        changes: dict[str, Any] = {}
        c.note(f"model: preset {p.name} for '{c.label}' ({n:,} params vs {params:,.0f} reported)" if params
               else f"model: preset {p.name} for '{c.label}' (no parameter count to check)")
        if seq_len and seq_len != p.seq_len:
            changes["seq_len"] = seq_len
            if p.position == PositionType.LEARNED and seq_len > p.max_positions:
                changes["max_positions"] = seq_len
        if vocab and vocab != p.vocab_size:
            changes["vocab_size"] = vocab
            c.note(f"vocab {vocab} from the row's {vocab_from} (preset {p.name} has {p.vocab_size})")
        m = p.replace(**changes) if changes else p
        _check_params(c, m, params)
        return m
    if rejected:
        c.note("model: presets not used: " + "; ".join(rejected))
    fam, pat = _family(c.label, c.notes)
    tmpl = _template(fam, params)
    # 2. from the row's dimensions
    if "n_layers" in dims and "d_model" in dims:
        m = _model_from_dims(c, dims, fam, tmpl, vocab, vocab_from, seq_len, params)
        _check_params(c, m, params)
        return m
    # 3. from the parameter count alone
    if not params:
        raise _Skip("model has neither a preset, nor layers and width, nor a parameter count")
    v = vocab or (tmpl.vocab_size if tmpl else 32000)
    try:
        m = model_for_params(params, vocab_size=v)
    except TrilemmaError as exc:
        raise _Skip(f"no dimensions in the row and the shape rule cannot build {params:.3g} parameters "
                    f"({exc})") from None
    c.note(f"model: no dimensions in the row; Llama-style shape rule (trilemma.shape.model_for_params) for "
           f"{params:.4g} params: {m.n_layers} layers, d_model {m.d_model}, {m.n_heads} heads, ffn {m.ffn_dim}, "
           f"vocab {v} ({'from the row' if vocab else ('of template ' + tmpl.name) if tmpl else 'default'})")
    if pp and pp > 1 and m.n_layers % pp:
        layers = max(pp, pp * round(m.n_layers / pp))
        c.note(f"shape-rule layers {m.n_layers} → {layers}, the nearest multiple of the row's pp {pp}")
        m = m.replace(n_layers=layers, name=f"{m.name.split(' (')[0]} (L={layers}, d={m.d_model})")
    if seq_len:
        m = m.replace(seq_len=seq_len)
    _check_params(c, m, params)
    return m


def _model_from_dims(c: _Ctx, dims: dict[str, int], fam: str | None, tmpl: ModelSpec | None, vocab: int | None,
                     vocab_from: str, seq_len: int | None, params: float | None) -> ModelSpec:
    """The row's dimensions in a family's block. With several candidate blocks (MPT's two; GPT- and
    Llama-style when the name hints at no family) the row's parameter count decides: the nearest,
    except that a rounded count (≤ 3 significant digits) keeps the default unless it is > 5 % off."""
    built = []
    for v in _variants(fam, tmpl, params):
        notes: list[str] = []
        m = _build_from_dims(c, dims, v, vocab, vocab_from, seq_len, notes)
        built.append((v, m, notes, param_counts(m).total))
    pick = 0
    if len(built) > 1 and params:
        errs = [abs(n / params - 1) for *_, n in built]
        nearest = min(range(len(built)), key=errs.__getitem__)
        rounded = _significant_digits(params) <= _ROUNDED_DIGITS
        pick = 0 if rounded and errs[0] <= PRESET_TOLERANCE else nearest
        others = "; ".join(f"{v.label.split(' (')[0]}: {n:,}" for i, (v, _, _, n) in enumerate(built) if i != pick)
        c.note(f"model block chosen by the row's parameter count {params:,.0f} "
               f"({'rounded, so the default block' if pick == 0 and rounded else 'nearest'}; "
               f"other candidates {others})")
    v, m, notes, _ = built[pick]
    c.note(f"model: built from the row's dimensions with the {v.label}")
    for n in notes:
        c.note(n)
    return m


def _build_from_dims(c: _Ctx, dims: dict[str, int], v: _Variant, vocab: int | None, vocab_from: str,
                     seq_len: int | None, notes: list[str]) -> ModelSpec:
    d, layers = dims["d_model"], dims["n_layers"]
    text = c.text
    arch: dict[str, Any] = dict(v.arch)
    ratio = v.ffn_ratio
    heads = dims.get("n_heads")
    head_dim = None
    mh = re.search(r"head[_ ]?dim(?:ension)?\s*[=:]?\s*(\d+)", text, re.I)
    if mh:
        head_dim = int(mh.group(1))
    if heads is None:
        hd = head_dim or v.head_dim
        if d % hd:
            raise _Skip(f"the row gives no head count and d_model {d} is not a multiple of head_dim {hd}")
        heads = d // hd
        notes.append(f"n_heads {heads} = d_model / head_dim {hd} ({'notes' if head_dim else 'template default'})")
        head_dim = None
    elif head_dim and head_dim * heads == d:
        head_dim = None
    elif head_dim:
        notes.append(f"head_dim {head_dim} from the notes (n_heads × head_dim ≠ d_model)")
    kv = dims.get("n_kv_heads")
    if kv is None:
        mk = re.search(r"(\d+)\s*(?:kv|key[/-]value)\s*heads", text, re.I)
        if mk:
            kv = int(mk.group(1))
            notes.append(f"{kv} key/value heads from the notes")
        elif re.search(r"multi-?query|\bMQA\b", text, re.I):
            kv = 1
            notes.append("multi-query attention from the notes: 1 key/value head")
    ffn = dims.get("ffn_dim")
    if ffn is None:
        mf = re.search(r"d_?ff\s*=\s*(\d+(?:\.\d+)?)\s*d", text, re.I)
        if mf:
            ratio = float(mf.group(1))
        gated = arch["ffn_type"] in (FfnType.SWIGLU, FfnType.GEGLU)
        ffn = _round_up(ratio * d, 256) if gated else int(round(ratio * d))
        notes.append(f"ffn_dim {ffn} = {ratio:.4g} × d_model{' rounded up to 256' if gated else ''} "
                     f"({'notes' if mf else 'template'})")
    if vocab is None:
        vocab = v.vocab
        notes.append(f"vocab {vocab} assumed ({v.vocab_from})")
    else:
        notes.append(f"vocab {vocab} from the row's {vocab_from}")
    fields: dict[str, Any] = dict(arch, name=f"{c.label} (row dims)", n_layers=layers, d_model=d, n_heads=heads,
                                  n_kv_heads=kv, head_dim=head_dim, ffn_dim=ffn, vocab_size=vocab, seq_len=seq_len,
                                  source=f"trilemma.validate.cases from {c.kind}.csv row {c.row}: {c.source}")
    if arch.get("position") == PositionType.LEARNED:
        fields["max_positions"] = seq_len or 2048
    try:
        return ModelSpec.build(prefix="model", **fields)
    except TrilemmaError as exc:
        raise _Skip(f"the row's model dimensions are inconsistent ({exc})") from None


def _check_params(c: _Ctx, m: ModelSpec, params: float | None) -> None:
    if not params:
        c.note("no parameter count in the row to check the model against")
        return
    n = param_counts(m).total
    if abs(n / params - 1) > PARAM_WARN:
        c.note(f"mapped model has {n:,} params, {n / params - 1:+.0%} off the reported {params:,.0f}")


# ------------------------------------------------------------------ layout

_CP = r"\bCP\s*=?\s*(\d+)|context parallel(?:ism)?\s*(?:of\s*)?=?\s*(\d+)"


def _layout(c: _Ctx, n_gpus: int | None, model: ModelSpec, zero_text: str = "",
            extra_text: str = "") -> dict[str, Any]:
    """The axes the row fixes, checked against its GPU count."""
    g = c.cells.get
    text = c.text
    lay: dict[str, Any] = {}
    for k in ("tp", "pp", "dp"):
        v = _int(g(k))
        if v:
            lay[k] = v
    mcp = re.search(_CP, f"{c.label}; {zero_text}; {c.notes}", re.I)
    if mcp:
        lay["cp"] = int(mcp.group(1) or mcp.group(2))
    zero = parse_zero(zero_text) if zero_text else None
    if zero is None:
        zero = parse_zero(text)
    positive = re.sub(r"\bno\s+(?:TP|PP|tensor|pipeline)[\w/ -]*", " ", f"{text}; {zero_text}", flags=re.I)
    mentions_tp_pp = re.search(r"tensor|pipeline|\bTP\d*\b|\bPP\d*\b|megatron|\b[23]D\b", positive, re.I)
    pure_dp = re.search(r"fsdp|full_shard|full shard|\bddp\b", f"{text}; {zero_text}", re.I)
    if pure_dp and "tp" not in lay and "pp" not in lay and not mentions_tp_pp and n_gpus:
        lay.update(tp=1, pp=1)
        if "dp" not in lay:
            lay["dp"] = n_gpus // lay.get("cp", 1)
        c.note(f"{pure_dp.group(0)} with no tensor or pipeline parallelism stated: tp = pp = 1, "
               f"data parallel over all GPUs")
    if n_gpus and lay.get("dp") == n_gpus:
        lay.update(tp=1, pp=1)
    if zero is not None:
        if zero >= 2 and lay.get("pp", 1) > 1:
            zero = 1
            c.note("FSDP/ZeRO-3 with pipeline parallelism mapped to zero=1 (trilemma allows ZeRO-2/3 only without "
                   "PP; FSDP under PP keeps parameters unsharded between forward and backward)")
        lay["zero"] = zero
    rc = parse_recompute(g("recompute") or "", c.notes, extra_text)
    if rc:
        lay["recompute"] = rc
    mb = _int(g("micro_batch"))
    if mb is None:
        mm = re.search(r"micro[- _]?batch(?: size)?\s*[=:]?\s*(\d+)", c.notes, re.I)
        mb = int(mm.group(1)) if mm else None
    if mb:
        if re.search(r"local batch", c.notes, re.I) and lay.get("pp", 1) > 1:
            c.note(f"the row's batch {mb} is the per-data-parallel-rank ('local') batch; with PP it is split "
                   f"into micro-batches, so micro_batch is left to the search")
        else:
            lay["micro_batch"] = mb
    if lay.get("tp", 1) > 1:
        if re.search(r"\bno sequence parallel", text, re.I):
            lay["sp"] = False
        elif re.search(r"sequence parallel", text, re.I):
            lay["sp"] = True
    mv = re.search(r"interleaved schedule\s*m\s*=\s*(\d+)", text, re.I)
    if mv and lay.get("pp", 1) > 1:
        vp = int(mv.group(1))
        if model.n_layers % (lay["pp"] * vp) == 0:
            lay["vp"] = vp
        else:
            c.note(f"interleaved schedule m={vp} ignored: pp {lay['pp']} × {vp} does not divide "
                   f"{model.n_layers} layers")
    pp = lay.get("pp", 1)
    if model.n_layers % pp:
        raise _Skip(f"the row's pp {pp} does not divide the model's {model.n_layers} layers "
                    f"(trilemma models equal pipeline stages only)")
    # GPU-count consistency
    if n_gpus:
        known = {k: lay[k] for k in ("tp", "pp", "dp", "cp") if k in lay}
        prod = math.prod(known.values())
        if len({"tp", "pp", "dp"} & known.keys()) == 3:
            if prod != n_gpus:
                raise _Skip(f"the row's layout ({' × '.join(f'{k} {v}' for k, v in known.items())} = {prod}) "
                            f"does not multiply to its {n_gpus} GPUs")
        elif n_gpus % prod:
            raise _Skip(f"the row's layout ({' × '.join(f'{k} {v}' for k, v in known.items())}) does not divide "
                        f"its {n_gpus} GPUs")
        elif "dp" not in lay and "tp" in lay and "pp" in lay:
            lay["dp"] = n_gpus // prod
            c.note(f"dp {lay['dp']} = n_gpus / ({' × '.join(f'{k} {v}' for k, v in known.items())})")
    return lay


# ------------------------------------------------------------------ plan

def _optimizer(c: _Ctx, text: str) -> tuple[Optimizer, str | None]:
    low = text.lower()
    if re.search(r"8-?bit adam|adam8bit", low):
        c.note("8-bit Adam: AdamW with int8 optimizer states")
        return Optimizer.ADAMW, "int8"
    if re.search(r"\blion\b|\bsgd\b", low):
        c.note("LION/SGD optimizer: one momentum state per parameter (trilemma's sgd memory)")
        return Optimizer.SGD, None
    if "adafactor" in low:
        raise _Skip("the Adafactor optimizer (factored second moments) is not modelled by trilemma's "
                    "memory inventory")
    return Optimizer.ADAMW, None


def _stage(tokens: float, seq: int, batch_tokens: float, explicit: bool) -> Stage:
    return Stage.build(prefix="plan.stage", tokens=tokens, seq_len=seq, global_batch_tokens=batch_tokens,
                       explicit_batch=explicit)


def _any_legal(model: ModelSpec, hw: HardwareSpec, n_gpus: int, layout: dict,
               stage: Stage) -> tuple[bool, int]:
    """Whether some layout with the row's pinned axes is legal (memory aside), else the fewest reason bits."""
    pinned = {k: (int(v) if isinstance(v, bool) else v) for k, v in layout.items()}
    L = candidate_layouts(model, n_gpus, hw.devices_per_node, pinned, stage.seq_len)
    if len(L) == 0:
        return False, 1
    _, r = legal_mask(model, L, stage, n_gpus)
    if (r == 0).any():
        return True, 0
    nbits = [bin(int(b)).count("1") for b in r]
    return False, int(r[nbits.index(min(nbits))])


def _plan(c: _Ctx, model: ModelSpec, hw: HardwareSpec, n_gpus: int, layout: dict, precision: Precision,
          tokens: float | None, seq: int, batch_seqs: float | None, batch_exact: bool, grad: str,
          optimizer: Optimizer, opt_state: str | None) -> TrainingPlan:
    fa, fa_note = flash_attention_for(c.source)
    c.note(fa_note)
    if batch_seqs is None:
        gbt = model.global_batch_tokens or 512 * seq
        whence = "the model preset" if model.global_batch_tokens else "make_plan default"
        c.note(f"global batch not given: {gbt / seq:.0f} sequences ({whence}), as a target")
        batch_exact = False
    else:
        gbt = batch_seqs * seq
    if tokens is None:
        tokens = gbt * STEPS_FOR_RATE_ROWS
        c.note(f"tokens = {STEPS_FOR_RATE_ROWS} global batches (a rate needs only a step; any multiple works)")
    stage = _stage(tokens, seq, gbt, batch_exact)
    if batch_exact:
        ok, _ = _any_legal(model, hw, n_gpus, layout, stage)
        if not ok:
            alt = _stage(tokens, seq, gbt, False)
            ok_alt, _ = _any_legal(model, hw, n_gpus, layout, alt)
            if ok_alt:
                c.note(f"global batch {gbt / seq:.0f} sequences cannot be split by any layout the row allows: "
                       f"used as a target (rounded to a multiple of dp × micro-batch)")
                stage = alt
    ok, bits = _any_legal(model, hw, n_gpus, layout, stage)
    if not ok:
        why = "; ".join(reason_text(bits)) or "no candidate layout"
        raise _Skip(f"the row's layout cannot run in trilemma on {n_gpus} GPUs ({why})")
    dt = DtypeSpec.for_precision(precision, grad=grad)
    if opt_state:
        dt = dt.replace(optimizer_state=opt_state)
    try:
        hw.peak(precision)
    except TrilemmaError:
        raise _Skip(f"{hw.name} has no {precision} peak") from None
    return make_plan(model, stages=[stage], precision=precision, flash_attention=fa, dtypes=dt,
                     optimizer=optimizer)


def _precision(c: _Ctx, *texts: str) -> Precision:
    prec, how = parse_precision(*texts)
    if prec is None:
        c.note("precision not stated: bf16 assumed")
        return Precision.BF16
    c.note(f"precision {prec} from '{how}'")
    return prec


def _grad_dtype(c: _Ctx, precision: Precision, text: str) -> str:
    if precision in (Precision.FP32, Precision.TF32):
        return "fp32"
    if re.search(r"mixed-precision mode pure|pure bf16|bf16 (?:grads|gradients|reduce)", text, re.I):
        c.note("gradients kept in bf16 (FSDP mixed-precision mode PURE: bf16 params, grads and reductions)")
        return "bf16"
    return "fp32"


# ------------------------------------------------------------------ per kind

def _case(c: _Ctx, model: ModelSpec, hw: HardwareSpec, n_gpus: int, plan: TrainingPlan, layout: dict,
          metric: Metric, reported: float) -> Case:
    if not (math.isfinite(reported) and reported > 0):
        raise _Skip(f"the reported {metric} ({reported}) is not a positive number")
    return Case(kind=c.kind, row=c.row, label=c.label, source=c.source, group=group_of(c.source), model=model,
                hardware=hw, n_gpus=int(n_gpus), plan=plan, layout=layout, metric=metric, reported=float(reported),
                assumptions=tuple(c.assumptions))


def _runs_metric(c: _Ctx, n_gpus: int | None, tokens: float | None) -> tuple[Metric, float]:
    g = c.cells.get
    gh = _num(g("gpu_hours_reported"))
    if gh and tokens:
        return "gpu_hours", gh
    days = _num(g("days_reported"))
    if days and n_gpus and tokens:
        mb = re.search(r"(\d+(?:\.\d+)?)\s*days?\b[^.;]*\b(upper|lower) bound", c.notes, re.I)
        if mb and abs(float(mb.group(1)) - days) < 1e-9:
            c.note(f"days {days:g} not used: the notes call it an {mb.group(2)} bound")
        else:
            return "days", days
    text = g("mfu_or_tflops_reported") or ""
    hw_flops, conv = counts_hardware_flops(group_of(c.source), c.notes)
    m = re.search(r"MFU\s*" + _PCT, text) or re.search(_PCT + r"\s*MFU", text)
    if m:
        c.note(conv)
        return ("hfu" if hw_flops else "mfu"), float(m.group(1)) / 100
    m = re.search(r"HFU\s*" + _PCT, text) or re.search(_PCT + r"\s*HFU", text)
    if m:
        return "hfu", float(m.group(1)) / 100
    m = re.search(r"(\d+(?:\.\d+)?)\s*TFLOP/?s", text, re.I)
    if m:
        c.note(conv + f"; TFLOP/s from '{text}'")
        return ("hardware_tflops_per_gpu" if hw_flops else "model_tflops_per_gpu"), float(m.group(1))
    m = re.search(r"(\d[\d,.]*)\s*(k)?\s*tokens/s(?:/|\s+per\s+)GPU", f"{text}; {c.notes}", re.I)
    if m:
        return "tokens_per_s_per_gpu", float(m.group(1).replace(",", "")) * (1e3 if m.group(2) else 1)
    if not tokens and (gh or days):
        raise _Skip("the run reports GPU-hours or days but not its training tokens")
    if days and not n_gpus:
        raise _Skip("the run reports days but not its GPU count, and no rate (MFU, TFLOP/s, tokens/s) either")
    raise _Skip("no time or throughput figure (GPU-hours, days with a GPU count, MFU/HFU, TFLOP/s or "
                "tokens/s) in the row")


def _map_runs(c: _Ctx) -> Case:
    g = c.cells.get
    tokens = _num(g("tokens"))
    n_gpus = _int(g("n_gpus"))
    if not g("gpu_type"):
        raise _Skip("the row names no hardware")
    hw, hw_notes = resolve_hardware_text(g("gpu_type"))
    if _is_moe(c):
        raise _Skip(_MOE_REASON)
    metric, reported = _runs_metric(c, n_gpus, tokens)
    for n in hw_notes:
        c.note(n)
    seq = _int(g("seq_len"))
    model = resolve_model_row(c, seq, _int(g("pp")))
    if seq is None:
        seq = model.seq_len or 2048
        c.note(f"sequence length not given: {seq} ({'model' if model.seq_len else 'default'})")
        model = model.replace(seq_len=seq)
    # global batch: a count of sequences in the notes beats a rounded token figure
    gbt = _num(g("global_batch_tokens"))
    stated = _batch_seqs_from(c.notes)
    batch_seqs, exact = None, True
    if gbt and abs(gbt / seq - round(gbt / seq)) < 1e-6:
        batch_seqs = round(gbt / seq)
    elif stated:
        batch_seqs, ramp = stated
        exact = not ramp
        c.note(f"global batch {batch_seqs} sequences from the notes"
               + (" (the final value of a ramp, as a target)" if ramp else ""))
    elif gbt:
        batch_seqs, exact = gbt / seq, False
        c.note(f"global batch {gbt:,.0f} tokens is not a whole number of {seq}-token sequences: "
               f"a rounded figure, used as a target")
    if not n_gpus:
        bs = batch_seqs or (model.global_batch_tokens or 512 * seq) / seq
        lo, hi = DERIVED_GPUS_RANGE
        n_gpus = min(hi, max(lo, 2 ** int(math.floor(math.log2(max(bs / 2, 1))))))
        c.note(f"GPU count not reported: {n_gpus} = largest power of two ≤ global batch ({bs:.0f} seqs) / 2, "
               f"clamped to [{lo}, {hi}] (affects only layout efficiency for {metric})")
    precision = _precision(c, g("precision") or "", c.notes)
    optimizer, opt_state = _optimizer(c, c.notes)
    grad = _grad_dtype(c, precision, c.notes)
    layout = _layout(c, n_gpus, model, extra_text=g("mfu_or_tflops_reported") or "")
    plan = _plan(c, model, hw, n_gpus, layout, precision, tokens, seq, batch_seqs, exact, grad, optimizer, opt_state)
    return _case(c, model, hw, n_gpus, plan, layout, metric, reported)


def _throughput_metric(c: _Ctx) -> tuple[Metric, float]:
    g = c.cells.get
    v = _num(g("tokens_per_s_reported"))
    if v:
        return "tokens_per_s_per_gpu", v
    v = _num(g("tflops_per_gpu_reported"))
    if v:
        hw_flops, conv = counts_hardware_flops(group_of(c.source), c.notes)
        c.note(conv)
        return ("hardware_tflops_per_gpu" if hw_flops else "model_tflops_per_gpu"), v
    v = _num(g("mfu_reported"))
    if v:
        hw_flops, conv = counts_hardware_flops(group_of(c.source), c.notes)
        c.note(conv)
        return ("hfu" if hw_flops else "mfu"), v / 100
    v = _num(g("step_time_s_reported"))
    if v:
        return "step_s", v
    raise _Skip("no throughput figure (tokens/s, TFLOP/s, MFU or step time) in the row")


def _rate_batch(c: _Ctx, layout: dict, n_gpus: int, global_col: str | None) -> tuple[float | None, bool]:
    """Global batch in sequences for a measured configuration, and whether it is exact."""
    gb = _int(global_col) if global_col else None
    accum = _grad_accum(c.notes)
    mb, dp = layout.get("micro_batch"), layout.get("dp")
    if gb:
        if accum and mb and dp and gb != mb * dp * accum:
            c.note(f"global batch {gb} ≠ micro_batch {mb} × dp {dp} × grad-accum {accum}; the global batch kept")
        return gb, True
    stated = _batch_seqs_from(c.notes)
    if stated:
        c.note(f"global batch {stated[0]} sequences from the notes")
        return stated[0], not stated[1]
    local = _int(c.cells.get("micro_batch"))
    if local and dp:
        a = accum or 1
        if not accum:
            c.note("grad-accum not stated: 1")
        c.note(f"global batch = micro_batch {local} × dp {dp} × grad-accum {a} = {local * dp * a} sequences")
        return local * dp * a, True
    return None, False


def _map_throughput(c: _Ctx) -> Case:
    g = c.cells.get
    metric, reported = _throughput_metric(c)
    n_gpus = _int(g("n_gpus"))
    if not n_gpus:
        raise _Skip("the row gives no GPU count")
    hw, hw_notes = resolve_hardware_text(g("gpu_type") or c.notes)
    for n in hw_notes:
        c.note(n)
    seq = _int(g("seq_len"))
    if not seq:
        raise _Skip("the row gives no sequence length")
    model = resolve_model_row(c, seq, _int(g("pp")))
    precision = _precision(c, g("precision") or "", c.notes)
    optimizer, opt_state = _optimizer(c, c.notes)
    grad = _grad_dtype(c, precision, c.notes)
    layout = _layout(c, n_gpus, model)
    batch, exact = _rate_batch(c, layout, n_gpus, g("global_batch"))
    plan = _plan(c, model, hw, n_gpus, layout, precision, None, seq, batch, exact, grad, optimizer, opt_state)
    return _case(c, model, hw, n_gpus, plan, layout, metric, reported)


def _map_memory(c: _Ctx) -> Case:
    g = c.cells.get
    gib = _num(g("peak_memory_gb_reported"))
    if not gib:
        raise _Skip("no peak memory figure in the row")
    hw_text = g("gpu_type") or ""
    if not hw_text:
        m = re.search(_DEVICE + r"[^;]*", c.notes, re.I)
        if not m:
            raise _Skip("the row names no hardware (no gpu_type and no device in the notes)")
        hw_text = m.group(0).strip()
    hw, hw_notes = resolve_hardware_text(hw_text)
    for n in hw_notes:
        c.note(n)
    seq = _int(g("seq_len"))
    if not seq:
        raise _Skip("the row gives no sequence length")
    model = resolve_model_row(c, seq, _int(g("pp")))
    lay_prod = math.prod(v for v in (_int(g("tp")), _int(g("pp")), _int(g("dp"))) if v)
    mcp = re.search(_CP, f"{c.label}; {g('zero_stage_or_fsdp')}", re.I)
    lay_prod *= int(mcp.group(1) or mcp.group(2)) if mcp else 1
    mn = re.search(r"(\d+)\s*GPUs\b", f"{c.label}; {c.notes}", re.I)
    n_gpus = int(mn.group(1)) if mn else lay_prod
    if mn and lay_prod != n_gpus:
        raise _Skip(f"the row's layout multiplies to {lay_prod} GPUs but it states {n_gpus}")
    if not mn:
        c.note(f"GPU count {n_gpus} = the product of the row's parallel degrees")
    precision = _precision(c, g("precision") or "", c.notes)
    optimizer, opt_state = _optimizer(c, g("optimizer") or "")
    grad = _grad_dtype(c, precision, f"{g('precision')}; {c.notes}")
    layout = _layout(c, n_gpus, model, zero_text=g("zero_stage_or_fsdp") or "")
    batch, exact = _rate_batch(c, layout, n_gpus, None)
    plan = _plan(c, model, hw, n_gpus, layout, precision, None, seq, batch, exact, grad, optimizer, opt_state)
    if g("what_is_counted"):
        c.note(f"reported memory is: {g('what_is_counted')}")
    return _case(c, model, hw, n_gpus, plan, layout, "peak_memory_bytes", gib * GIB)


_MAPPERS = {"runs": _map_runs, "throughput": _map_throughput, "memory": _map_memory}


def _label_col(cells: dict[str, str]) -> str:
    return cells.get("model") or cells.get("model_or_size") or ""


@cache
def _load(kind: Kind) -> tuple[tuple[Case, ...], tuple[Skipped, ...]]:
    cases: list[Case] = []
    skipped: list[Skipped] = []
    for i, cells in enumerate(read_rows(kind)):
        c = _Ctx(kind=kind, row=i, cells=cells, label=_label_col(cells), notes=cells.get("notes", ""),
                 source=cells.get("source", ""))
        try:
            cases.append(_MAPPERS[kind](c))
        except _Skip as exc:
            skipped.append(Skipped(kind=kind, row=i, label=c.label, reason=str(exc)))
        except TrilemmaError as exc:  # a spec the row's numbers cannot build
            skipped.append(Skipped(kind=kind, row=i, label=c.label,
                                   reason=f"the row's values are not valid inputs ({exc})"))
    return tuple(cases), tuple(skipped)


def load_cases(kind: str | None = None) -> tuple[list[Case], list[Skipped]]:
    """Every row of the calibration CSVs (one kind, or all) as a Case or a Skipped, in row order.

    ``cases + skipped`` covers each row of each kind exactly once.
    """
    kinds = KINDS if kind is None else (kind,)
    cases: list[Case] = []
    skipped: list[Skipped] = []
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"kind: {k!r} is not allowed; expected one of {', '.join(KINDS)}")
        cs, sk = _load(k)  # type: ignore[arg-type]
        cases.extend(_copy(x) for x in cs)
        skipped.extend(sk)
    return cases, skipped


def _copy(c: Case) -> Case:
    """A Case whose layout dict the caller may change without touching the cache."""
    from dataclasses import replace
    return replace(c, layout=dict(c.layout))
