"""Presets are data: TOML files in this folder, one table per entry, each with its ``source``.

- ``models/*.toml``: ModelSpec fields (``[gpt2-124m]`` ...), one file per family.
- ``hardware.toml``: HardwareSpec fields; ``peak_flop_per_s`` is a sub-table by precision.
- ``regions.toml``: grid carbon intensity (kg CO2 per kWh) by region.
- ``stacks.toml``: StackSpec fields, one software stack (the training code) per table.
- ``constants.toml``: the planner's stated defaults and efficiency constants with their origin.

Loading is lazy and cached; nothing is read at import.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from trilemma.errors import InputError, UnknownPresetError
from trilemma.fileio import PROFILE_MAX_BYTES, read_json
from trilemma.specs import HardwareSpec, ModelSpec
from trilemma.specs.base import Spec
from trilemma.specs.constants import Constants
from trilemma.specs.device import DeviceSpec
from trilemma.specs.runtime import RuntimeSpec, WeightFormat
from trilemma.specs.stack import StackSpec
from trilemma.specs.trainer import TrainerSpec

S = TypeVar("S", bound=Spec)

_ROOT = resources.files(__package__)


def _read_toml(rel: str) -> dict[str, Any]:
    return tomllib.loads(_ROOT.joinpath(rel).read_text(encoding="utf-8"))


def _entry(name: str, fields: dict[str, Any], cls: type[S]) -> S:
    """Validate one ``[name]`` table of a preset file into a spec (name and aliases filled in)."""
    fields = {**fields, "aliases": tuple(fields.get("aliases", ()))}
    fields.setdefault("name", name)
    return cls.build(prefix=f"preset {name}", **fields)


def _entries(table: dict[str, Any], cls: type[S]) -> dict[str, S]:
    """Validate each ``[name]`` table of a preset file into a spec."""
    return {name: _entry(name, fields, cls) for name, fields in table.items()}


@cache
def _model_tables() -> dict[str, dict[str, Any]]:
    """Every model preset's raw table by canonical name, files in name order (parsed, not validated:
    resolving one name validates only that entry)."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(_ROOT.joinpath("models").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".toml"):
            out.update(tomllib.loads(f.read_text(encoding="utf-8")))
    return out


@cache
def _model(name: str) -> ModelSpec:
    return _entry(name, _model_tables()[name], ModelSpec)


@cache
def model_presets() -> dict[str, ModelSpec]:
    """All model presets by canonical name, files in name order."""
    return {name: _model(name) for name in _model_tables()}


@cache
def hardware_presets() -> dict[str, HardwareSpec]:
    """All hardware presets by canonical name."""
    return _entries(_read_toml("hardware.toml"), HardwareSpec)


@cache
def regions() -> dict[str, dict[str, Any]]:
    """Grid carbon intensity presets: name → {kg_co2_per_kwh, source}."""
    return _read_toml("regions.toml")


@cache
def device_presets() -> dict[str, DeviceSpec]:
    """Deployment targets (devices.toml): phones, laptops, desktops, with their sources."""
    table = {k: v for k, v in _read_toml("devices.toml").items() if k != "efficiency"}
    return _entries(table, DeviceSpec)


@cache
def deploy_efficiency() -> dict[str, Any]:
    """devices.toml [efficiency]: the fitted bandwidth efficiency per runtime class, with its fit."""
    return dict(_read_toml("devices.toml").get("efficiency", {}))


def get_device(name: str) -> DeviceSpec:
    """A deployment target by name or alias; a hardware preset (a datacentre GPU) serves as one too:
    its HBM less the CUDA context, its bandwidth, fp16/int8 peaks, board power, runtime class "gpu"."""
    devices = device_presets()
    try:
        return _lookup("devices", name, devices)
    except UnknownPresetError:
        try:
            hw = get_hardware(name)
        except UnknownPresetError:
            err = UnknownPresetError(
                "devices",
                name,
                [*difflib.get_close_matches(name.lower(), list(devices), n=3)],
                field="deploy",
            )
            err.args = (f"{err.args[0]}; known: {', '.join(devices)}",)
            raise err from None
    ctx = float(constants()["memory"]["cuda_context_bytes"])
    peaks = {str(k): float(v) for k, v in hw.peak_flop_per_s.items() if str(k) in ("fp16", "fp8")}
    return DeviceSpec.build(
        prefix=f"device {hw.name}",
        name=hw.name,
        kind="datacentre",
        chip=hw.name,
        ram_bytes=hw.hbm_bytes,
        usable_bytes=hw.hbm_bytes - ctx,
        usable_source="device memory less the CUDA context (constants.toml memory.cuda_context_bytes)",
        bandwidth_bytes_per_s=hw.hbm_bw_bytes_per_s,
        peak_flop_per_s=peaks,
        power_w=hw.board_power_w,
        runtime="llamacpp-cuda",
        source=hw.source,
    )


@cache
def runtime_presets() -> dict[str, RuntimeSpec]:
    """Inference runtimes on a device (runtimes.toml): compute units, bandwidth share, formats."""
    return _entries(_read_toml("runtimes.toml"), RuntimeSpec)


@cache
def weight_formats() -> dict[str, WeightFormat]:
    """Weight formats on a device (weight_formats.toml): bits per weight with scales, precision class."""
    return _entries(_read_toml("weight_formats.toml"), WeightFormat)


def _known(field: str, name: str, presets: dict[str, Any]) -> Any:
    """A preset by name or alias, else one line naming ``field`` and listing every known name."""
    idx = _key_index(presets)
    if isinstance(name, str) and _key(name) in idx:
        return presets[idx[_key(name)]]
    raise InputError(field, name, "one of " + ", ".join(presets))


def get_runtime(name: str) -> RuntimeSpec:
    """A runtime by name or alias; an unknown one is refused with the known names (field ``runtime``)."""
    return _known("runtime", name, runtime_presets())


def get_format(name: str) -> WeightFormat:
    """A weight format by name or alias; an unknown one is refused with the known names."""
    return _known("deploy-precision", name, weight_formats())


@cache
def stacks() -> dict[str, StackSpec]:
    """The software stacks (stacks.toml) by canonical name: each one's features, with their sources."""
    return _entries(_read_toml("stacks.toml"), StackSpec)


def stack(name: str | StackSpec) -> StackSpec:
    """A stack preset by name or alias (any case); a StackSpec as it is. An unknown name is one
    InputError naming the field, the value and every known stack (the closest first)."""
    if isinstance(name, StackSpec):
        return name
    known = stacks()
    allowed = "one of " + ", ".join(known)
    if isinstance(name, str) and _key(name) in _index(known):
        return known[_index(known)[_key(name)]]
    close = _close(name, known) if isinstance(name, str) else []
    raise InputError(
        "stack", name, allowed + (f" (did you mean {', '.join(close)}?)" if close else "")
    )


@cache
def trainers() -> dict[str, TrainerSpec]:
    """The fine-tuning trainers (trainers.toml) by canonical name: each one's memory features, with sources."""
    return _entries(_read_toml("trainers.toml"), TrainerSpec)


def trainer(name: str | TrainerSpec) -> TrainerSpec:
    """A trainer preset by name or alias (any case); a TrainerSpec as it is. An unknown name is one
    InputError naming the field, the value and every known trainer."""
    if isinstance(name, TrainerSpec):
        return name
    known = trainers()
    if isinstance(name, str) and _key(name) in _index(known):
        return known[_index(known)[_key(name)]]
    raise InputError("trainer", name, "one of " + ", ".join(known))


@cache
def precision_presets() -> dict[str, Any]:
    """presets/precision.toml: Kumar 2024's assumed form and the measured tables per named precision."""
    return _read_toml("precision.toml")


@cache
def constants() -> Constants:
    """Stated defaults (constants.toml) overlaid with the fitted ones (calibrated.toml, written by
    ``python scripts/calibrate.py``), frozen."""
    base = _read_toml("constants.toml")
    for section, values in calibration().get("constants", {}).items():
        base.setdefault(section, {}).update(values)
    return Constants(base)


@cache
def export_recipes() -> dict[str, Any]:
    """The training recipes `trilemma export` writes beside a plan (export.toml), each with its source."""
    return _read_toml("export.toml")


@cache
def uncalibrated_constants() -> Constants:
    """constants.toml alone: the starting point of a fit."""
    return Constants(_read_toml("constants.toml"))


@cache
def calibration() -> dict[str, Any]:
    """The last calibration's fitted constants, bands and summaries ({} if never run), without its
    per-row records: every estimate reads this, and the records (three quarters of the file,
    written last by trilemma.validate.calibration_file) are parsed only by ``calibration_rows``."""
    f = _ROOT.joinpath("calibrated.toml")
    if not f.is_file():
        return {}
    text = f.read_text(encoding="utf-8")
    head, sep, _ = text.partition("\n[[rows]]")
    return tomllib.loads(head if sep else text)


@cache
def calibration_rows() -> list[dict[str, Any]]:
    """The last calibration's per-row records: predicted, reported, leave-one-source-out predicted."""
    f = _ROOT.joinpath("calibrated.toml")
    return tomllib.loads(f.read_text(encoding="utf-8")).get("rows", []) if f.is_file() else []


#: the indexes built (_remembered_index) by (which index, id of the presets table): the table itself (kept
#: alive, so its id is not reused), the identity of its names and entries then, and the index
_INDEXES: dict[tuple[str, int], tuple[dict[str, Any], tuple, dict[str, str]]] = {}


def _remembered_index(
    which: str, presets: dict[str, Any], build: Callable[[dict[str, Any]], dict[str, str]]
) -> dict[str, str]:
    """``build(presets)``, built once per table while its names and entries are the same objects: a
    lookup re-indexed every preset on each call (validate's on-device rows look a runtime up 340,000
    times: two thirds of `trilemma validate`). Callers only read the index."""
    state = (tuple(presets), tuple(map(id, presets.values())))
    hit = _INDEXES.get((which, id(presets)))
    if hit is not None and hit[0] is presets and hit[1] == state:
        return hit[2]
    if len(_INDEXES) >= 256:  # tables built on each call (the user's profiles): keep it small
        _INDEXES.clear()
    idx = build(presets)
    _INDEXES[(which, id(presets))] = (presets, state, idx)
    return idx


def _build_index(presets: dict[str, Any]) -> dict[str, str]:
    idx: dict[str, str] = {}
    for name, spec in presets.items():
        idx[name.lower()] = name
        for a in spec.get("aliases", ()) if isinstance(spec, dict) else spec.aliases:
            idx[a.lower()] = name
    return idx


def _index(presets: dict[str, Any]) -> dict[str, str]:
    """Lower-case name and alias → canonical name, for specs or raw preset tables (not to be changed)."""
    return _remembered_index("lower", presets, _build_index)


def _key_index(presets: dict[str, Any]) -> dict[str, str]:
    """``_index`` with each name and alias as ``_key`` writes it (not to be changed)."""
    return _remembered_index(
        "key", presets, lambda p: {_key(k): v for k, v in _build_index(p).items()}
    )


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _close(name: str, presets: dict[str, Any]) -> list[str]:
    """Up to three canonical names (or their aliases') closest to ``name``, no repeats."""
    idx = _index(presets)
    close = difflib.get_close_matches(_key(name), list(idx), n=8, cutoff=0.5)
    return list(dict.fromkeys(idx[c] for c in close))[:3]


def _canonical(kind: str, name: str, presets: dict[str, Any]) -> str:
    idx = _index(presets)
    if _key(name) in idx:
        return idx[_key(name)]
    raise UnknownPresetError(kind, name, _close(name, presets))


def _lookup(kind: str, name: str, presets: dict[str, Any]) -> Any:
    return presets[_canonical(kind, name, presets)]


def get_model(name: str) -> ModelSpec:
    """A model preset by name or alias (case-insensitive); suggests close names when unknown."""
    return _model(_canonical("models", name, _model_tables()))


def get_hardware(name: str) -> HardwareSpec:
    """A hardware preset by name or alias (case-insensitive); then the user's own profiles
    (``local``, written by ``trilemma probe``). A packaged preset wins a name clash."""
    try:
        return _lookup("hardware", name, hardware_presets())
    except UnknownPresetError:
        user = user_hardware_presets()
        if not user:
            raise
        return _lookup("hardware", name, all_hardware_presets())


def is_model_preset(name: str) -> bool:
    return name.strip().lower().replace("_", "-") in _index(_model_tables())


# ------------------------------------------------------------------ the user's hardware profiles
# `trilemma probe` measures this machine and saves it as a hardware profile (``local``) in the
# user's config directory, one JSON file per profile: {"schema", "hardware": HardwareSpec fields,
# "measured": ...}. They are read on every lookup (not cached: the probe may write one while
# this process runs) and only when a name is not a packaged preset.

USER_PROFILE_SCHEMA = "trilemma.hardware-profile/1"


def user_config_dir() -> Path:
    """$TRILEMMA_CONFIG_DIR, else $XDG_CONFIG_HOME/trilemma, else ~/.config/trilemma."""
    if os.environ.get("TRILEMMA_CONFIG_DIR"):
        return Path(os.environ["TRILEMMA_CONFIG_DIR"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base).expanduser() / "trilemma"


def read_profile(path: Path) -> Any:
    """A saved hardware profile's JSON document, read by ``trilemma.fileio`` (a regular file of at
    most PROFILE_MAX_BYTES; any problem is one InputError)."""
    return read_json(
        path, "hardware profile", what="JSON file", max_bytes=PROFILE_MAX_BYTES, named=False
    )


def user_hardware_presets() -> dict[str, HardwareSpec]:
    """The user's measured hardware profiles (``<config>/hardware/*.json``) by name, each inside
    the physical bounds of ``trilemma.presets.profile_bounds``."""
    from trilemma.presets.profile_bounds import check_profile

    folder = user_config_dir() / "hardware"
    out: dict[str, HardwareSpec] = {}
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            fields = read_profile(f)["hardware"]  # an unreadable file: read_profile's one line
        except (KeyError, TypeError):
            raise InputError(
                "hardware profile",
                str(f),
                f"a {USER_PROFILE_SCHEMA} JSON file "
                "(rerun `trilemma probe --remeasure` to rewrite it)",
            ) from None
        fields = {**fields, "aliases": tuple(fields.get("aliases", ()))}
        hw = HardwareSpec.build(prefix=f"hardware profile {f}", **fields)
        check_profile(hw, hardware_presets(), str(f))
        out[fields.get("name", f.stem)] = hw
    return out


def all_hardware_presets() -> dict[str, HardwareSpec]:
    """Packaged presets, then the user's profiles whose names do not clash (for listings)."""
    packaged = hardware_presets()
    return {**packaged, **{k: v for k, v in user_hardware_presets().items() if k not in packaged}}
