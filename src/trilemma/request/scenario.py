"""Scenario files: a `solve` request in TOML, its keys the fields of SolveRequest (dashes or
underscores), plus ``plot_range`` for the command line's plot.

    # examples/fast-and-good.toml
    deadline = "30d"
    target-loss = 2.0
    params = "1B..200B"

Flags given on the command line override the file.
"""

from __future__ import annotations

from typing import Any

from trilemma.errors import InputError
from trilemma.fileio import SCENARIO_MAX_BYTES, read_toml
from trilemma.request.solve import SolveRequest

#: keys that name a file to write: only the command line may (a scenario from someone else could
#: otherwise overwrite any file the user can write)
OUTPUT_KEYS = {"frontier": "--frontier", "plot": "--plot"}
#: every key a scenario may hold: the request's fields, and what frames the command line's plot
KEYS = (*SolveRequest.options(), *OUTPUT_KEYS, "plot_range")

#: keys whose value is text (a name, a size with its unit, a path); the others may also be numbers
_TEXT = frozenset(
    {
        "minimize",
        "model",
        "params",
        "gpu",
        "precision",
        "law",
        "frontier",
        "plot",
        "plot_range",
        "finetune",
        "base_precision",
        "optimizer",
        "offload",
        "deploy",
        "deploy_precision",
        "runtime",
        "task",
        "stack",
        "trainer",
    }
)
_OPTIONS = SolveRequest.options()
#: keys whose value is true or false
_BOOLS = frozenset(n for n, o in _OPTIONS.items() if o.kind == "bool")
#: keys that may be a list of names (joined with commas, as the flags take them)
_LISTS = frozenset({*(n for n, o in _OPTIONS.items() if o.listable), "price", "lora_targets"})


def _check_value(key: str, v: Any) -> Any:
    """A scenario value of an allowed type for its key, or a one-line error naming the key."""
    if key in _BOOLS:
        if not isinstance(v, bool):
            raise InputError(f"scenario {key}", v, "true or false")
        return v
    if key in _LISTS and isinstance(v, list):
        if not v or not all(isinstance(x, str) and x.strip() for x in v):
            raise InputError(
                f"scenario {key}", v, 'a non-empty list of names, e.g. ["a100-80gb", "h100-sxm"]'
            )
        return v if key == "price" else ",".join(v)
    if key == "price" and isinstance(v, dict):
        return v
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise InputError(f"scenario {key}", v, "text or a number")
    if key in _TEXT and not isinstance(v, str):
        raise InputError(f"scenario {key}", v, "text (a name or a size with its unit, in quotes)")
    return v


def read_scenario(path: str) -> dict[str, Any]:
    """The scenario file's keys (``-`` spelled ``_``), each checked for its type; any problem is one
    InputError naming the key or the file."""
    return scenario_values(
        read_toml(path, "scenario", what="TOML file", max_bytes=SCENARIO_MAX_BYTES)
    )


def scenario_values(data: dict[str, Any]) -> dict[str, Any]:
    """A parsed scenario's keys (``-`` spelled ``_``), each checked for its type (a file's, or the
    text the page loads); any problem is one InputError naming the key."""
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for k, v in data.items():
        key = k.replace("-", "_")
        if key == "description":
            continue
        if key not in KEYS:
            raise InputError(f"scenario {key}", v, "one of " + ", ".join(KEYS))
        if key in OUTPUT_KEYS:
            raise InputError(
                f"scenario {key}",
                v,
                f"no output path in a scenario file (give {OUTPUT_KEYS[key]} on the command line)",
            )
        if key in spelled:
            raise InputError(
                f"scenario {k}", v, f"one spelling of the key (the file also has {spelled[key]!r})"
            )
        spelled[key] = k
        out[key] = _check_value(key, v)
    return out


def merge_scenario(path: str | None, flags: dict[str, Any]) -> dict[str, Any]:
    """Flags (non-None) over the file: the values given, by key (a key given nowhere is absent)."""
    base = read_scenario(path) if path else {}
    base.update({k: v for k, v in flags.items() if v not in (None, [], ())})
    return base
