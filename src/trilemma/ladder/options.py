"""The ladder's options checked before anything is planned or trained (``trilemma.ladder.run``):
counts, price, plot, the output directory; and the price and power the cost columns use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trilemma.errors import InputError, check_output_file

__all__ = ["check_options", "out_dir", "price_and_power"]


def price_and_power(price: float | None, hw: Any, cores: int) -> tuple[float, float]:
    """Dollars per machine-hour (the flag's, else the profile's, else a price per core) and the
    machine's power in W (the profile's, else a stated estimate per core)."""
    from trilemma.ladder.assemble import CPU_WATTS_PER_CORE
    from trilemma.probe.profile import CPU_PRICE_PER_CORE_HOUR  # the probe's placeholder

    price_h = (
        price
        if price is not None
        else (hw.price_usd_per_hour if hw is not None else CPU_PRICE_PER_CORE_HOUR * cores)
    )
    machine_w = hw.board_power_w if hw is not None else CPU_WATTS_PER_CORE * cores
    return price_h, machine_w


def check_options(
    *,
    workers: int | None,
    threads: int | None,
    seed: int,
    n_boot: int,
    price: float | None,
    plot: str | Path | None,
    cores: int,
    local: bool = True,
) -> None:
    """InputError for a bad option: counts are whole numbers (workers at most ``cores``), ``price`` (USD per
    machine-hour) non-negative, and a ``plot`` needs matplotlib."""
    for name, v in (
        ("workers", workers),
        ("threads", threads),
        ("seed", seed),
        ("bootstrap", n_boot),
    ):
        if v is not None and (
            isinstance(v, bool)
            or not isinstance(v, int)
            or v < (0 if name in ("seed", "bootstrap") else 1)
        ):
            raise InputError(
                name,
                v,
                "a whole number" + ("" if name in ("seed", "bootstrap") else ", at least 1"),
            )
    if workers is not None and workers > cores and local:
        raise InputError("workers", workers, f"at most {cores}: this machine has {cores} cores")
    if threads is not None and threads > cores and local:
        raise InputError("threads", threads, f"at most {cores}: this machine has {cores} cores")
    if price is not None and not (isinstance(price, (int, float)) and price >= 0):
        raise InputError("price", price, "a non-negative price in USD per machine-hour")
    if plot is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise InputError(
                "plot", str(plot), "matplotlib installed (pip install 'trilemma[plot]')"
            )
        check_output_file("plot", plot)


def out_dir(out: str | Path) -> Path:
    """The output directory, created if missing; InputError if it cannot be."""
    if not str(out).strip():
        raise InputError("out", str(out), "a directory for runs.jsonl, law.toml and ladder.json")
    out_dir = Path(out).expanduser()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            "out", str(out), f"a directory that can be created ({exc.strerror})"
        ) from None
    if not out_dir.is_dir():
        raise InputError("out", str(out), "a directory")
    return out_dir
