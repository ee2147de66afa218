"""Microbenchmarks of this machine: matmul FLOP/s against size per precision, memory bandwidth,
and the loopback link that gloo uses between processes on one host.

- Matmul: square n×n·n×n products, 2n³ FLOP each; for each n the best of a few timed chunks
  (the peak is what the machine can do, not what a noisy neighbour left it). The peak of a
  precision is the best rate over sizes; the whole curve is kept (small GEMMs are slower).
- Memory bandwidth: a copy of a buffer far larger than the last-level cache (CPU: 128 MiB;
  GPU: 1 GiB), counted as read + write bytes (STREAM "copy" convention, McCalpin 1995).
- Link: one TCP stream over 127.0.0.1 (what gloo does between processes of one host); on a
  GPU, the host-to-device copy rate.
- Host dispatch: seconds per eager PyTorch operator on tiny tensors, forward, backward and without
  grad (``trilemma.probe.dispatch``): what a step of small kernels costs the host.
- Runtime memory (CPU): what a fresh process's resident set grows by when it trains a one-layer
  model (d 64) for a few AdamW steps, less its tensors: the math libraries' scratch buffers
  (oneDNN/MKL), OpenMP thread stacks, code paged in. Measured from ``train.cpu_memory_baseline``,
  as the probe's training is: the modules a step imports loaded first (AdamW imports torch._dynamo,
  about 70 MiB of modules), glibc's mmap threshold held at 128 KiB (freed tensors leave the resident
  set). The planner adds it to a CPU plan's memory as that device's framework overhead (a GPU's is
  the calibrated constant).

Results are cached per machine fingerprint (device, CPU model, cores, torch version, threads)
in ``<config dir>/probe/machine.json``; ``--remeasure`` measures again. A measurement knows its
conditions (``profile.Conditions``: the 1-minute load average against the cores, other processes'
share of the CPU time before and while it ran, the torch version, threads and a hash of the CPU
model) and a cached one is measured again when it is stale: older than ``MAX_AGE_DAYS``, made
under another torch / thread count / CPU, made while the machine was busy (and it is idle now),
or inconsistent (a quick re-check of one matmul size disagrees with it by more than
``RECHECK_TOLERANCE``). The matmul curve is the best of ``_PASSES`` passes over the sizes, so a
neighbour's burst during one pass does not set the peak.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from trilemma.probe import machine as host
from trilemma.probe.bench_cache import (
    cache_key,
    device_name,
    read_cache,
    stale_reason,
    write_cache,
)
from trilemma.probe.dispatch import DISPATCH_METHOD, host_dispatch
from trilemma.probe.machine import LoadReading, OtherLoad, cpu_hash, ram_bytes
from trilemma.probe.profile import Conditions, MachineMeasurement, MatmulCurve
from trilemma.probe.train import MMAP_THRESHOLD_BYTES
from trilemma.units import GIB, KIB, MIB

__all__ = [
    "MachineMeasurement",
    "MatmulCurve",
    "dtype_of",
    "machine",
    "stale_reason",
]

#: down to 64, a small model's width (the probe's d 64 layers multiply 128×64 by 64×192 and 64×256):
#: one thread's rate falls there, and a curve starting at 128 fits a flat efficiency through it
CPU_SIZES = (64, 128, 256, 512, 1024, 2048)
GPU_SIZES = (512, 1024, 2048, 4096, 8192)
_CHUNK_S = 0.08  # one timed chunk of repeated matmuls
_CHUNKS = 2  # chunks per size in one pass
_PASSES = 3  # passes over the sizes; a size's rate is the best chunk of all passes
_SIZE_BUDGET_S = 1.5  # a size whose single product takes longer than this ends the curve
RECHECK_TOLERANCE = (
    0.3  # a re-check of one matmul size off the cached rate by more than this share: re-measure
)


def dtype_of(precision: str) -> torch.dtype:
    return {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }[precision]


# ------------------------------------------------------------------ measurements


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _chunk_rate(a: torch.Tensor, b: torch.Tensor, device: str) -> float:
    """FLOP/s of n×n matmuls repeated for one chunk of ``_CHUNK_S`` seconds (2n³ FLOP each)."""
    n = a.shape[0]
    calls, t0 = 0, time.perf_counter()
    while True:
        a @ b
        calls += 1
        if calls % 4 == 0 or device == "cpu":
            _sync(device)
            el = time.perf_counter() - t0
            if el >= _CHUNK_S:
                return 2.0 * n**3 * calls / el


def matmul_curve(
    device: str, precision: str, sizes: tuple[int, ...], passes: int = _PASSES
) -> MatmulCurve:
    """FLOP/s of n×n matmuls at each size: the best of ``_CHUNKS`` chunks in each of ``passes`` passes
    over the sizes (the passes spread a size's samples over the whole measurement)."""
    dt = dtype_of(precision)
    tf32 = precision == "tf32"
    old = torch.backends.cuda.matmul.allow_tf32 if device == "cuda" else None
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
    pairs = []
    try:
        for n in sizes:
            a = torch.randn(n, n, device=device).to(dt)
            b = torch.randn(n, n, device=device).to(dt)
            t0 = time.perf_counter()
            a @ b  # warm-up: thread pool, kernel selection
            _sync(device)
            pairs.append((a, b))
            if (
                time.perf_counter() - t0 > _SIZE_BUDGET_S
            ):  # e.g. bf16 emulated on a CPU without a native path
                break
        best = [0.0] * len(pairs)
        for _ in range(passes):
            for i, (a, b) in enumerate(pairs):
                best[i] = max([best[i]] + [_chunk_rate(a, b, device) for _ in range(_CHUNKS)])
    finally:
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = old
    return MatmulCurve(precision, tuple(sizes[: len(pairs)]), tuple(best))


def memory_bandwidth(device: str) -> float:
    """Copy bandwidth, read + write bytes per second (best of 5)."""
    n = int(GIB if device == "cuda" else 128 * MIB) // 4
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    _sync(device)
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        best = max(best, 2 * 4 * n / (time.perf_counter() - t0))
    del src, dst
    return best


def loopback_bandwidth(nbytes: int = int(64 * MIB)) -> float:
    """One TCP stream over 127.0.0.1, bytes per second (gloo's transport between local ranks)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    chunk = bytes(int(MIB))

    def send() -> None:
        with socket.create_connection(("127.0.0.1", port)) as c:
            for _ in range(nbytes // len(chunk)):
                c.sendall(chunk)

    t = threading.Thread(target=send, daemon=True)
    t0 = time.perf_counter()
    t.start()
    conn, _ = srv.accept()
    buf = bytearray(int(MIB))
    got = 0
    with conn:
        while got < nbytes:
            k = conn.recv_into(buf)
            if not k:
                break
            got += k
    el = time.perf_counter() - t0
    t.join()
    srv.close()
    return got / el


def host_to_device_bandwidth() -> float:  # pragma: no cover - GPU only
    x = torch.empty(int(256 * MIB), dtype=torch.uint8).pin_memory()
    y = torch.empty_like(x, device="cuda")
    y.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(4):
        y.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    return 4 * x.numel() / (time.perf_counter() - t0)


# ------------------------------------------------------------------ cache

#: how ``runtime_memory`` measures: from ``trilemma.probe.train.cpu_memory_baseline``, as the probe's training
#: does, with glibc's mmap threshold held fixed (a cached figure measured otherwise is measured again)
RUNTIME_MEMORY_METHOD = f"cpu_memory_baseline/2: step modules imported, mmap threshold {MMAP_THRESHOLD_BYTES / KIB:.0f} KiB"


def _runtime_memory_child(threads: int, out_path: str) -> None:
    """Run in a fresh process by ``runtime_memory``: a one-layer model's AdamW steps; writes the resident
    growth beyond its tensors (bytes) to the file ``out_path``."""
    from trilemma.probe.inputs import probe_model
    from trilemma.probe.model import build_model
    from trilemma.probe.train import _rss, cpu_memory_baseline

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    spec = probe_model(layers=1, d_model=64)
    spec = spec[0] if isinstance(spec, tuple) else spec
    _, base = cpu_memory_baseline()
    model = build_model(spec, "cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, spec.vocab_size, (1, 256))
    for _ in range(5):
        out = model(x)
        logits = out if torch.is_tensor(out) else out[0]
        torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), x.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    _, peak = _rss()
    n = sum(p.numel() for p in model.parameters())
    # less the tensors: fp32 weights, gradients and two AdamW moments
    Path(out_path).write_text(f"{max(peak - base - 16.0 * n, 0.0)}", encoding="utf-8")


def runtime_memory(threads: int) -> float:
    """Resident bytes a fresh CPU training process grows by beyond its tensors (this module's docstring),
    measured in a child process at ``threads`` threads; 0 when it cannot be measured."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "runtime_memory"
        code = (
            f"from trilemma.probe.bench import _runtime_memory_child; "
            f"_runtime_memory_child({int(threads)}, {str(out)!r})"
        )
        try:
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, timeout=300, check=True
            )
            return float(out.read_text(encoding="utf-8"))
        except (subprocess.SubprocessError, OSError, ValueError):  # pragma: no cover - best effort
            return 0.0


def recheck_reason(device: str, meas: MachineMeasurement, threads: int, busy_now: str) -> str:
    """Time one matmul size of the cached fp32 curve again (one pass); why the cache disagrees with it by more
    than ``RECHECK_TOLERANCE`` ("" when it agrees, or when it is slower now and the machine is busy now)."""
    curve = meas.matmul.get("fp32")
    if curve is None or not curve.sizes:
        return ""
    i = len(curve.sizes) // 2
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        now = matmul_curve(device, "fp32", (curve.sizes[i],), passes=1).flop_per_s[0]
    finally:
        torch.set_num_threads(before)
    ratio = now / curve.flop_per_s[i]
    if abs(ratio - 1.0) <= RECHECK_TOLERANCE or (ratio < 1.0 and busy_now):
        return ""
    return (
        f"a re-check of the {curve.sizes[i]}³ fp32 matmul ran at {ratio:.2f}× the cached rate "
        f"(tolerance ±{RECHECK_TOLERANCE:.0%})"
    )


def machine(
    device: str,
    precisions: tuple[str, ...],
    threads: int | None = None,
    remeasure: bool = False,
    reading: LoadReading | None = None,
) -> MachineMeasurement:
    """This machine's measurement for ``precisions`` at ``threads`` CPU threads, from the cache when the
    fingerprint matches and the cached one is neither stale nor inconsistent (``stale_reason``,
    ``recheck_reason``; precisions missing from the cache are measured and added). ``reading``: how busy
    the machine is now (default: read it here); a CPU measurement made while busy records so."""
    cores = host.usable_cores()
    threads = threads or (cores if device == "cpu" else 1)
    name = device_name(device)
    key = cache_key(device, name, cores, threads)
    reading = reading or host.load_reading(cores)
    busy_now = host.busy_reason(reading, cores) if device == "cpu" else ""
    doc = read_cache()
    old = None if remeasure else doc["entries"].get(key)
    meas = MachineMeasurement.from_dict(old) if old else None
    why = (
        ""
        if meas is None
        else (
            stale_reason(meas, name, threads, busy_now)
            or recheck_reason(device, meas, threads, busy_now)
        )
    )
    if why:
        meas = None
    missing = [p for p in precisions if meas is None or p not in meas.matmul]
    runtime_missing = device == "cpu" and (
        meas is None
        or not meas.runtime_memory_bytes
        or meas.runtime_memory_method != RUNTIME_MEMORY_METHOD
    )
    dispatch_missing = meas is None or (
        meas.host_dispatch is None or meas.host_dispatch.method != DISPATCH_METHOD
    )
    if meas is not None and not missing and not runtime_missing and not dispatch_missing:
        return replace(meas, from_cache=True, seconds=0.0)

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    during = OtherLoad(cores)
    try:
        sizes = GPU_SIZES if device == "cuda" else CPU_SIZES
        curves = dict(meas.matmul) if meas else {}
        for p in missing:
            curves[p] = matmul_curve(device, p, sizes)
        if meas is None:
            meas = _fresh_measurement(device, name, cores, threads)
        if runtime_missing:
            meas = replace(
                meas,
                runtime_memory_bytes=runtime_memory(threads),
                runtime_memory_method=RUNTIME_MEMORY_METHOD,
            )
        if dispatch_missing:
            meas = replace(meas, host_dispatch=host_dispatch(device))
        cond = _conditions(reading, during.share(), busy_now, name, cores, device)
        meas = replace(
            meas,
            matmul=curves,
            measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            from_cache=False,
            conditions=cond,
            remeasured_because=why,
        )
    finally:
        torch.set_num_threads(before)
    meas = replace(meas, seconds=time.perf_counter() - t0)
    doc["entries"][key] = {**meas.to_dict(), "from_cache": False, "remeasured_because": ""}
    write_cache(doc)
    return meas


def _fresh_measurement(device: str, name: str, cores: int, threads: int) -> MachineMeasurement:
    """A new measurement's memory (bytes), memory bandwidth and link (bytes/s), no matmul curves."""
    if device == "cuda":  # pragma: no cover - GPU only
        mem = float(torch.cuda.get_device_properties(0).total_memory)
        link, kind = host_to_device_bandwidth(), "host-to-device copy (PCIe/C2C)"
    else:
        mem = ram_bytes()
        link, kind = (
            loopback_bandwidth(),
            "TCP over 127.0.0.1 (gloo between local processes)",
        )
    return MachineMeasurement(
        device=device,
        device_name=name,
        cores=cores,
        threads=threads,
        torch_version=torch.__version__,
        memory_bytes=mem,
        memory_bw_bytes_per_s=memory_bandwidth(device),
        link_bw_bytes_per_s=link,
        link_kind=kind,
    )


def _conditions(
    reading: LoadReading, share: float, busy_now: str, name: str, cores: int, device: str
) -> Conditions:
    """How busy the machine was before (``reading``, ``busy_now``) and while measuring (``share``
    of the CPU other processes took): a CPU's figures hold what they did."""
    # a CPU's figures hold what other processes did while they were taken (a GPU's: the GPU's own work)
    during_why = host.busy_reason(LoadReading(None, share), cores) if device == "cpu" else ""
    busy = "; ".join(w for w in (busy_now, during_why and f"while measuring: {during_why}") if w)
    return Conditions(
        load_1min=reading.load_1min,
        cpus=cores,
        others_cpu_share=reading.others_cpu_share,
        others_cpu_share_during=share,
        busy=bool(busy),
        why=busy,
        cpu_model_hash=cpu_hash(name),
    )
