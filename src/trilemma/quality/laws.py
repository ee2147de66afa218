"""Scaling laws as data: published fits shipped in ``presets/laws/*.toml`` and laws fitted by ``trilemma fit``.

A law is a functional form, its constants, and what they mean: which parameters N counts (with or
without embeddings), the loss unit, the data and tokenizer it was fitted on (absolute loss is specific
to them), its source, and its parameter uncertainty (a covariance or samples), from which every
prediction gets a band. The type, its forms and its uncertainty are ``trilemma.quality.law``
(re-exported here); this module reads and validates law documents, looks laws up by name or path,
holds the precision and repetition constants, and writes law files.

Nothing is read at import; loading is cached.
"""

from __future__ import annotations

import difflib
import math
import os
import sys
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from trilemma.errors import InputError
from trilemma.fileio import LAW_MAX_BYTES, read_toml, write_text_atomic
from trilemma.quality.law import (
    DEFAULT_LEVEL,
    DRAW_SEED,
    FORM_CONSTANTS,
    FORM_TEXT,
    LOG_PARAMS,
    LOSS_UNITS,
    N_COUNTS,
    N_DRAWS,
    Form,
    Law,
    Uncertainty,
    constants_problem,
)
from trilemma.quality.law_uncertainty import bad_law, uncertainty_from_dict
from trilemma.specs.enums import LossUnit, NCounts
from trilemma.tomlw import toml_dumps

__all__ = [
    "DEFAULT_LAW",
    "DEFAULT_LAW_REASON",
    "DEFAULT_LEVEL",
    "DRAW_SEED",
    "FORM_CONSTANTS",
    "FORM_TEXT",
    "LOG_PARAMS",
    "LOSS_UNITS",
    "N_COUNTS",
    "N_DRAWS",
    "SCHEMA",
    "Form",
    "Law",
    "Uncertainty",
    "get_law",
    "law_from_dict",
    "law_names",
    "law_to_dict",
    "laws_document",
    "precision_constants",
    "read_law_file",
    "repetition_constants",
    "shipped_laws",
    "write_law",
]

SCHEMA = "trilemma.law/1"

#: The law used when none is named.
DEFAULT_LAW = "besiroglu2024"
DEFAULT_LAW_REASON = (
    "Besiroglu et al. 2024 (arXiv 2404.10102) refit Chinchilla's Approach 3 on the runs of Hoffmann et al. "
    "Fig. 4 with the optimiser run to convergence; it is the only published Approach-3 fit consistent with "
    "the ~20 tokens/parameter of Hoffmann's Approaches 1-2 and of Chinchilla itself (70B on 1.4T tokens), "
    "and it comes with bootstrap uncertainty. Hoffmann's own constants imply 59-93 tokens/parameter at "
    "Gopher's budget (reference/scaling_laws.md §2)."
)


# ------------------------------------------------------------------ reading


#: the keys a law table may hold
LAW_KEYS = frozenset(
    "schema name title form constants n_counts loss_unit data tokenizer source notes aliases "
    "uncertainty range repetition precision fit formula".split()
)


def _str(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    """``d[key]`` as a non-empty string, else an InputError naming ``where``."""
    v = d.get(key, default)
    if not isinstance(v, str) or not v.strip():
        raise bad_law(where, f"a law table with a non-empty string `{key}`")
    return v


def _num_table(d: Any, where: str, what: str) -> dict[str, float]:
    """Table ``what`` of finite numbers (None → {}), else an InputError naming ``where``."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise bad_law(where, f"`{what}` to be a table of numbers")
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise bad_law(where, f"`{what}.{k}` to be a finite number, not {v!r}")
        out[k] = float(v)
    return out


def _enums(doc: Mapping[str, Any], where: str) -> tuple[Form, NCounts, LossUnit]:
    """A law table's form, what N counts and its loss unit; InputError naming what is allowed."""
    try:
        form = Form(str(doc.get("form", "")).lower())
    except ValueError:
        raise bad_law(where, "`form` = " + ", ".join(f'"{f}"' for f in Form)) from None
    try:
        n_counts = NCounts(str(doc.get("n_counts", "")).lower().replace("-", "_"))
    except ValueError:
        raise bad_law(
            where, '`n_counts` = "total" (all parameters, incl. embeddings) or "non_embedding"'
        ) from None
    try:
        loss_unit = LossUnit(str(doc.get("loss_unit", "")))
    except ValueError:
        raise bad_law(where, '`loss_unit` = "nats/token" or "bits/byte"') from None
    return form, n_counts, loss_unit


def law_from_dict(
    doc: Mapping[str, Any],
    where: str,
    *,
    path: str | None = None,
    lookup: Mapping[str, Law] | None = None,
) -> Law:
    """Validate one law table (a shipped preset or a user's file) into a Law."""
    name = _str(doc, "name", where)
    form, n_counts, loss_unit = _enums(doc, where)
    constants = _num_table(doc.get("constants"), where, "constants")
    problem = constants_problem(form, constants, loss_unit)
    if problem:
        raise bad_law(where, problem)
    unc = uncertainty_from_dict(doc.get("uncertainty"), constants, loss_unit, where, lookup)
    rng = _num_table(doc.get("range"), where, "range") or None
    for lo, hi in (("N_min", "N_max"), ("D_min", "D_max")):
        if rng and lo in rng and hi in rng and not 0 < rng[lo] <= rng[hi]:
            raise bad_law(
                where, f"`range.{lo}` ({rng[lo]:g}) positive and at most `range.{hi}` ({rng[hi]:g})"
            )
    if rng and "C_max" in rng and not rng["C_max"] > 0:
        raise bad_law(where, f"`range.C_max` ({rng['C_max']:g}) positive: the largest run's FLOP")
    rep = _num_table(doc.get("repetition"), where, "repetition") or None
    prec = _num_table(doc.get("precision"), where, "precision") or None
    if form is Form.MUENNIGHOFF and not (rep and {"R_D_star", "R_N_star"} <= set(rep)):
        raise bad_law(where, "a [repetition] table with R_D_star and R_N_star for form muennighoff")
    known = LAW_KEYS
    unknown = sorted(k for k in doc if k not in known)
    if unknown:
        raise bad_law(
            where, f"only the keys {', '.join(sorted(known))} (unknown: {', '.join(unknown)})"
        )
    if "schema" in doc and doc["schema"] != SCHEMA:
        raise bad_law(
            where,
            f"`schema` = {SCHEMA!r} (this trilemma reads that version), not {doc['schema']!r}",
        )
    return Law(
        name=name,
        form=form,
        constants=MappingProxyType(constants),
        n_counts=n_counts,
        loss_unit=loss_unit,
        data=_str(doc, "data", where),
        tokenizer=_str(doc, "tokenizer", where),
        source=_str(doc, "source", where),
        title=str(doc.get("title", "")),
        notes=tuple(str(x) for x in doc.get("notes", ())),
        aliases=tuple(str(x) for x in doc.get("aliases", ())),
        uncertainty=unc,
        repetition=None if rep is None else MappingProxyType(rep),
        precision=None if prec is None else MappingProxyType(prec),
        fit_range=None if rng is None else MappingProxyType(rng),
        fit_report=doc.get("fit"),
        path=path,
        extra=MappingProxyType({k: v for k, v in doc.items() if k not in known}),
    )


_ROOT = resources.files("trilemma") / "presets"


@cache
def _shipped() -> dict[str, Law]:
    """All laws in presets/laws/*.toml by canonical name (covariances first so others can borrow them)."""
    docs = []
    for f in sorted(_ROOT.joinpath("laws").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".toml"):
            docs.append((f.name, tomllib.loads(f.read_text(encoding="utf-8"))))
    docs.sort(key=lambda nd: "borrow" in nd[1].get("uncertainty", {}))
    out: dict[str, Law] = {}
    for fname, doc in docs:
        law = law_from_dict(doc, f"presets/laws/{fname}", lookup=out)
        out[law.name] = law
    return out


def law_names() -> list[str]:
    """Canonical names of the shipped laws, the default first."""
    names = sorted(_shipped())
    return [DEFAULT_LAW] + [n for n in names if n != DEFAULT_LAW]


def shipped_laws() -> dict[str, Law]:
    """The shipped laws by canonical name (a copy)."""
    return dict(_shipped())


def _looks_like_path(text: str) -> bool:
    """Whether ``--law`` text names a file rather than a law."""
    try:
        return text.endswith(".toml") or "/" in text or "\\" in text or Path(text).is_file()
    except (OSError, ValueError):  # too long for a file name, or a NUL: not a file
        return False


def read_law_file(path: str | Path) -> Law:
    """A law TOML file (as ``trilemma fit`` writes), validated; it may borrow a shipped law's covariance."""
    p = Path(path)
    if not os.path.exists(p):  # False for a name too long or with a NUL; read_toml refuses a FIFO
        raise InputError(
            "law",
            str(path),
            "an existing law TOML file (written by `trilemma fit`) or a law name ("
            + ", ".join(law_names())
            + ")",
        )
    doc = read_toml(p, "law", what="law TOML file", max_bytes=LAW_MAX_BYTES)
    return law_from_dict(doc, str(path), path=str(p), lookup=_shipped())


def get_law(name_or_path: str | Law | None = None) -> Law:
    """A shipped law by name or alias (case-insensitive), or a law TOML file; None → the default law."""
    if isinstance(name_or_path, Law):
        return name_or_path
    if name_or_path is not None and not isinstance(name_or_path, str):
        raise InputError(
            "law",
            name_or_path,
            "a law's name (trilemma optimal --law lists them) or a law TOML file",
        )
    text = (DEFAULT_LAW if name_or_path is None else name_or_path).strip()
    if not text:
        raise InputError(
            "law",
            name_or_path,
            f"a law's name or a law TOML file (leave --law out for the default, {DEFAULT_LAW})",
        )
    laws = _shipped()
    idx: dict[str, str] = {}
    for n, law in laws.items():
        idx[n.lower()] = n
        for a in law.aliases:
            idx[a.lower()] = n
    key = text.lower().replace("_", "-").replace(" ", "-")
    if key in idx:
        return laws[idx[key]]
    if _looks_like_path(text):
        return read_law_file(text)
    close = list(
        dict.fromkeys(idx[c] for c in difflib.get_close_matches(key, list(idx), n=6, cutoff=0.5))
    )[:3]
    hint = ("did you mean " + ", ".join(close) + "? ") if close else ""
    raise InputError(
        "law", text, f"{hint}a law name ({', '.join(law_names())}) or a path to a law TOML file"
    )


# ------------------------------------------------------------------ precision and repetition constants


@cache
def _precision_presets() -> dict[str, Any]:
    """presets/precision.toml, read once."""
    return tomllib.loads(_ROOT.joinpath("precision.toml").read_text(encoding="utf-8"))


def precision_table(name: str) -> dict[str, Any]:
    """presets/precision.toml's measured table of a named training precision ([fp8], [fp16]); {} if none."""
    t = _precision_presets().get(str(name).strip().lower(), {})
    return dict(t) if isinstance(t, dict) and name != "kumar2024" else {}


def precision_constants(law: Law) -> dict[str, Any]:
    """Kumar et al. 2024 constants (presets/precision.toml), overridden by the law file's [precision] table.

    ``status`` says whether the values are the assumed defaults or the user's own.
    """
    base = dict(_precision_presets()["kumar2024"])
    if law.precision:
        base.update(law.precision)
        base["status"] = f"from the law file {law.path or law.name}"
    return base


def repetition_constants(law: Law) -> dict[str, Any]:
    """R_D*, R_N* and the useful-epochs threshold: the law's own, else Muennighoff 2023's (stated in notes)."""
    if law.repetition:
        return {**law.repetition, "from": law.name}
    mu = _shipped()["muennighoff2023"]
    assert mu.repetition is not None
    return {**mu.repetition, "from": mu.name}


# ------------------------------------------------------------------ writing (trilemma fit)


def law_to_dict(law: Law) -> dict[str, Any]:
    """The TOML document of a law (what ``read_law_file`` reads back)."""
    unc = None
    if law.uncertainty is not None:
        u = law.uncertainty
        unc = {"kind": u.kind, "level": u.level, "params": list(u.params), "source": u.source}
        if u.covariance is not None:
            unc["covariance"] = [list(map(float, row)) for row in u.covariance]
        if u.samples is not None:
            unc["samples"] = [list(map(float, row)) for row in u.samples]
        if u.residual is not None:
            unc["residual"] = dict(u.residual)
    return {
        "schema": SCHEMA,
        "name": law.name,
        "title": law.title,
        "form": str(law.form),
        "formula": law.form_text,
        "n_counts": law.n_counts,
        "loss_unit": law.loss_unit,
        "data": law.data,
        "tokenizer": law.tokenizer,
        "source": law.source,
        "notes": list(law.notes) or None,
        "aliases": list(law.aliases) or None,
        "constants": dict(law.constants),
        "range": dict(law.fit_range) if law.fit_range else None,
        "repetition": dict(law.repetition) if law.repetition else None,
        "precision": dict(law.precision) if law.precision else None,
        "fit": dict(law.fit_report) if law.fit_report else None,
        "uncertainty": unc,
    }


def write_law(law: Law, path: str | Path) -> Path:
    """Write a law TOML file that ``--law PATH`` accepts; returns the path."""
    p = Path(path)
    text = (
        "# A scaling law written by `trilemma fit`; use it with --law "
        + str(p)
        + "\n"
        + toml_dumps(law_to_dict(law))
        + "\n"
    )
    write_text_atomic(p, text, "out")
    return p


def laws_document() -> dict[str, Any]:
    """The shipped laws for listing (e.g. a `trilemma presets laws`): the default, why, and each law."""
    return {
        "default": DEFAULT_LAW,
        "default_reason": DEFAULT_LAW_REASON,
        "laws": [
            _shipped()[n].describe() | {"aliases": list(_shipped()[n].aliases)} for n in law_names()
        ],
    }
