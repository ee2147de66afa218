"""Facts about this machine that need no torch: its usable cores, processor name and memory, and
how busy other processes keep it (the load average and their share of the CPU time, /proc/stat).

The probe's microbenchmarks (``probe.bench``), its launcher (``probe.launch``) and its input checks
(``probe.inputs``) read the machine here, so none of them imports another to know it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from trilemma.units import GIB, KIB

__all__ = [
    "BUSY",
    "BUSY_LOAD_PER_CORE",
    "LoadReading",
    "OtherLoad",
    "available_memory",
    "busy_reason",
    "cpu_hash",
    "cpu_model",
    "load_reading",
    "ram_bytes",
    "usable_cores",
]

BUSY = 0.1  # a share of the machine's CPU time used by other processes worth a warning
BUSY_LOAD_PER_CORE = 0.5  # a 1-minute load average above this many runnable tasks per core: busy
SAMPLE_S = 0.5  # how long other processes' CPU use is sampled before measuring, seconds


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask; else all of them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_model() -> str:
    """The processor's model name (/proc/cpuinfo; else what the platform module says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_bytes() -> float:
    """The machine's physical memory, in bytes (8 GiB when the system does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 8.0 * GIB


def available_memory() -> float:
    """Memory available to a new process, in bytes (/proc/meminfo's MemAvailable; else the RAM)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * KIB  # /proc/meminfo counts kB = KiB
    except OSError:  # pragma: no cover
        pass
    return ram_bytes()


class OtherLoad:
    """Share of the machine's CPU time that other processes used while this one ran: busy time
    from /proc/stat minus this process's and its reaped children's (torchrun workers) CPU time."""

    MIN_WINDOW_S = 0.2

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()

    @staticmethod
    def _busy() -> float | None:
        try:
            v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
            return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
            return None

    @staticmethod
    def _own() -> float:
        import resource

        a, b = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    def wall(self) -> float:
        """Seconds since this meter started."""
        return time.perf_counter() - self.t0

    def share(self) -> float | None:
        """Other processes' CPU time over all cores' time since the start (0 to 1); None off Linux, or
        when less than ``MIN_WINDOW_S`` has passed (/proc/stat counts in clock ticks of 10 ms)."""
        busy = self._busy()
        if busy is None or self.busy0 is None or self.wall() < self.MIN_WINDOW_S:
            return None
        others = (busy - self.busy0) - (self._own() - self.own0)
        return min(1.0, max(0.0, others) / (self.wall() * self.cores))


@dataclass(frozen=True)
class LoadReading:
    """How busy the machine is now: the 1-minute load average (None off Unix) and other processes' share
    0-1 of all cores' CPU time over a short sample (None off Linux)."""

    load_1min: float | None
    others_cpu_share: float | None


def load_reading(cpus: int, sample_s: float = SAMPLE_S) -> LoadReading:
    """Read the load average and sample other processes' CPU use for ``sample_s`` seconds (/proc/stat
    less this process's own time, ``OtherLoad``)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # pragma: no cover - not Unix
        load = None
    meter = OtherLoad(cpus)
    time.sleep(sample_s)
    return LoadReading(load_1min=load, others_cpu_share=meter.share())


def busy_reason(reading: LoadReading, cpus: int) -> str:
    """Why ``reading`` makes the machine busy ("" when it is idle enough to measure): a 1-minute load average
    above ``BUSY_LOAD_PER_CORE`` per core, or other processes using more than ``BUSY`` of the CPU time."""
    why = []
    if reading.load_1min is not None and reading.load_1min > BUSY_LOAD_PER_CORE * cpus:
        why.append(
            f"1-minute load average {reading.load_1min:.2f} on {cpus} core{'s' if cpus > 1 else ''}"
        )
    if reading.others_cpu_share is not None and reading.others_cpu_share > BUSY:
        why.append(f"other processes using {reading.others_cpu_share:.0%} of the CPU time")
    return "; ".join(why)


def cpu_hash(name: str) -> str:
    """The first 16 hex digits of the sha256 of a device's model name."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
