"""Scenario files: a TOML table whose keys are the `solve` flags (dashes or underscores).

    # examples/fast-and-good.toml
    deadline = "30d"
    target-loss = 2.0
    params = "1B..200B"

Flags given on the command line override the file.
"""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from trilemma.errors import InputError

KEYS = ("deadline", "budget", "target_loss", "minimize", "model", "params", "tokens", "unique_tokens", "gpu",
        "max_gpus", "precision", "seq", "global_batch", "law", "price", "memory_headroom", "frontier", "plot")


def read_scenario(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise InputError("scenario", path, "an existing TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError("scenario", path, f"valid TOML ({exc})") from None
    out = {}
    for k, v in data.items():
        key = k.replace("-", "_")
        if key == "description":
            continue
        if key not in KEYS:
            raise InputError(f"scenario {key}", v, "one of " + ", ".join(KEYS))
        if key in ("gpu", "precision") and isinstance(v, list):
            v = ",".join(str(x) for x in v)
        out[key] = v
    return out


def merge_scenario(path: str | None, flags: dict[str, Any]) -> dict[str, Any]:
    """Flags (non-None) over the file over None."""
    base = {k: None for k in KEYS}
    if path:
        base.update(read_scenario(path))
    base.update({k: v for k, v in flags.items() if v not in (None, [], ())})
    return base
