"""The probe's cache of machine measurements (one entry per device, CPU, cores, threads and
torch), and when a cached measurement is stale."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import torch

from trilemma.errors import InputError
from trilemma.fileio import PROFILE_MAX_BYTES, read_json, write_text_atomic
from trilemma.presets import user_config_dir
from trilemma.probe.machine import cpu_hash, cpu_model
from trilemma.probe.profile import MachineMeasurement
from trilemma.units import DAY

MAX_AGE_DAYS = 30.0  # a cached measurement older than this is measured again (drivers, BIOS, thermal paste age)


def cache_path() -> Path:
    """The cache file in the user's trilemma configuration folder."""
    return user_config_dir() / "probe" / "machine.json"


def cache_key(device: str, name: str, cores: int, threads: int) -> str:
    """One measurement's entry: device, its name, cores, threads and the torch version."""
    return f"{device}|{name}|cores={cores}|threads={threads}|torch={torch.__version__}"


def read_cache() -> dict:
    """The cache document; an empty one when missing, unreadable or of another schema."""
    try:
        doc = read_json(
            cache_path(), "probe cache", what="JSON file", max_bytes=PROFILE_MAX_BYTES, named=False
        )
        return doc if doc.get("schema") == MachineMeasurement.SCHEMA else empty_cache()
    except (InputError, AttributeError):  # missing or unreadable: measured again
        return empty_cache()


def empty_cache() -> dict:
    """A cache with no entries."""
    return {"schema": MachineMeasurement.SCHEMA, "entries": {}}


def write_cache(doc: dict) -> None:
    """Write the cache document atomically."""
    p = cache_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(p, json.dumps(doc, indent=1), "probe cache")


def device_name(device: str) -> str:
    """The GPU's name, or the CPU model."""
    return torch.cuda.get_device_name() if device == "cuda" else cpu_model()


def stale_reason(
    meas: MachineMeasurement, name: str, threads: int, busy_now: str, now: datetime | None = None
) -> str:
    """Why a cached measurement must be measured again ("" when it stands): no recorded conditions, older
    than ``MAX_AGE_DAYS``, another torch, thread count or CPU, or made on a busy machine that is idle now."""
    c = meas.conditions
    if c is None:
        return "it was measured before its conditions were recorded"
    try:
        age_days = (
            (now or datetime.now(timezone.utc)) - datetime.fromisoformat(meas.measured_at)
        ).total_seconds() / DAY
    except (TypeError, ValueError):
        return f"its date {meas.measured_at!r} cannot be read"
    if age_days > MAX_AGE_DAYS:
        return f"it is {age_days:.0f} days old (limit {MAX_AGE_DAYS:.0f})"
    if meas.torch_version != torch.__version__:
        return f"it was measured under torch {meas.torch_version} (now {torch.__version__})"
    if meas.threads != threads:
        return f"it was measured at {meas.threads} threads (now {threads})"
    if c.cpu_model_hash != cpu_hash(name):
        return "it was measured on another processor"
    if c.busy and not busy_now:
        return f"it was measured while the machine was busy ({c.why}) and the machine is idle now"
    return ""


def with_collective(meas: MachineMeasurement) -> MachineMeasurement:
    """``meas`` (a CPU's) with gloo's all-reduce between two local processes at its threads
    (``trilemma.probe.collective``), measured once and kept in its cache entry; unchanged on a GPU, or
    where the processes could not be run."""
    from dataclasses import replace

    from trilemma.probe.collective import gloo_all_reduce

    if meas.device != "cpu" or meas.collective is not None:
        return meas
    record = gloo_all_reduce(meas.threads)
    if record is None:  # pragma: no cover - best effort: the bulk TCP rate stays the link
        return meas
    meas = replace(meas, collective=record)
    doc = read_cache()
    key = cache_key(meas.device, meas.device_name, meas.cores, meas.threads)
    if key in doc["entries"]:
        doc["entries"][key]["collective"] = record.to_dict()
        write_cache(doc)
    return meas
