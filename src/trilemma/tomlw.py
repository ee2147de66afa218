"""Writing TOML (the standard library reads it, tomllib, but does not write it): law files from
`trilemma fit` / `trilemma ladder`, and ``presets/calibrated.toml`` from ``scripts/calibrate.py``."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["toml_dumps", "toml_value"]


def toml_value(v: Any) -> str:
    """One TOML value: bool, integer, float (nan/inf as TOML spells them), string, (nested) array."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f)
    if isinstance(v, str):  # a JSON string is a TOML basic string, but for DEL and lone surrogates
        text = v.encode("utf-8", "backslashreplace").decode("utf-8")
        return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, (list, tuple, np.ndarray)):
        items = [toml_value(x) for x in v]
        if any(isinstance(x, (list, tuple, np.ndarray)) for x in v):
            return "[\n  " + ",\n  ".join(items) + ",\n]"
        return "[" + ", ".join(items) + "]"
    if v is None:
        raise ValueError("TOML has no null")
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def toml_dumps(doc: Mapping[str, Any], _prefix: str = "") -> str:
    """A small TOML writer (law files, calibrated.toml): scalars, strings, (nested) arrays and tables; None is skipped."""
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for k, v in doc.items():
        if v is None:
            continue
        key = k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)
        if isinstance(v, Mapping):
            tables.append((key, v))
        else:
            lines.append(f"{key} = {toml_value(v)}")
    out = "\n".join(lines)
    for key, t in tables:
        name = f"{_prefix}{key}"
        body = toml_dumps(t, name + ".")
        out += ("\n\n" if out else "") + f"[{name}]\n" + body
    return out
