"""``run_probe``: measure real training on this machine and set it beside the planner's prediction.

1. Resolve the model (default: a small GPT-2-style model; a preset, scaled down by any of
   layers / d_model / heads / kv_heads / ffn / vocab; or a Hugging Face config.json).
2. Measure the machine (matmul FLOP/s against size per precision, memory bandwidth, loopback
   link; cached) and save it as the hardware profile ``local``.
3. Predict with the planner's own API: ``evaluate_layout(model, make_cluster(local, nproc),
   make_plan(...), Layout(dp=nproc, zero=0 or 3, recompute, micro_batch))``.
4. Train: in this process, or ``nproc`` processes through torchrun (DDP or FSDP; gloo on a CPU,
   NCCL on GPUs), and with ``nproc`` > 1 also one process at the same threads per process, for
   the scaling efficiency.
5. Compare: predicted / measured step time, tokens/s and memory.

The comparison tests the planner; nothing measured here feeds back into its constants.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trilemma.errors import InputError, TrilemmaError
from trilemma.specs import Layout, ModelSpec, PositionType, Recompute
from trilemma.units import GIB, GIGA, KIB

if TYPE_CHECKING:  # pragma: no cover
    from trilemma.probe.result import Measured, Predicted, ProbeResult

__all__ = ["DEFAULTS", "probe_model", "run_probe"]

log = logging.getLogger(__name__)

#: the bare `trilemma probe`: a 4-layer GPT-2-style byte-level model, 8 × 256 tokens per step,
#: 30 steps (5 warm-up); ~15 s of training on 2 idle cores, under a minute with the microbenchmark
DEFAULTS = {"layers": 4, "d_model": 256, "heads": 4, "ffn": 1024, "vocab": 256, "seq": 256, "micro_batch": 8,
            "steps": 30, "lr": 1e-3}
BYTE_VOCAB = 256
TINY_BF16_S = 120.0  # a bf16 run on a CPU without a native bf16 path must promise to end in this time
PRECISIONS = ("fp32", "bf16", "fp16")


# ------------------------------------------------------------------ model

def probe_model(model: str | ModelSpec | None = None, *, layers: int | None = None, d_model: int | None = None,
                heads: int | None = None, kv_heads: int | None = None, ffn: int | None = None,
                vocab: int | None = None) -> tuple[ModelSpec, str]:
    """The model to train and how it was chosen. Dimensions given replace the base model's and the
    rest follow its proportions (head width, GQA ratio, ffn/d_model); a scaled-down model reads
    bytes, so its vocabulary becomes 256 unless ``vocab`` is given."""
    from trilemma.presets import get_model
    from trilemma.shape import nearest_divisor
    from trilemma.specs.build import resolve_model

    dims = {"layers": layers, "d_model": d_model, "heads": heads, "kv_heads": kv_heads, "ffn": ffn, "vocab": vocab}
    for k, v in dims.items():
        if v is not None and (not isinstance(v, int) or v < 1):
            raise InputError(k.replace("_", "-"), v, "a positive whole number")
    if model is None:
        base = get_model("gpt2-124m")
        dims = {k: DEFAULTS[k] if k in DEFAULTS and v is None else v for k, v in dims.items()}
        base = base.replace(dropout=False)
        how = "default: a small GPT-2-style model (learned positions, LayerNorm, GELU, tied head), byte-level"
    else:
        base, how = resolve_model(model)
    if all(v is None for v in dims.values()):
        return base, how
    d = dims["d_model"] or base.d_model
    if dims["heads"]:
        h = dims["heads"]
    elif dims["d_model"]:
        h = nearest_divisor(d, max(1, round(d / base.d_head)), log_scale=False)
    else:
        h = base.n_heads
    if d % h:
        raise InputError("heads", h, f"a divisor of d-model ({d})")
    group = base.n_heads // base.kv_heads
    kv = dims["kv_heads"] or (1 if base.kv_heads == 1 else nearest_divisor(h, max(1, h // group), log_scale=False))
    if h % kv:
        raise InputError("kv-heads", kv, f"a divisor of heads ({h})")
    scale = d / base.d_model
    f = dims["ffn"] or max(8, round(base.ffn_dim * scale / 8) * 8)
    fields: dict[str, Any] = {
        "n_layers": dims["layers"] or base.n_layers, "d_model": d, "n_heads": h, "n_kv_heads": kv, "head_dim": None,
        "ffn_dim": f, "vocab_size": dims["vocab"] or (BYTE_VOCAB if base.causal else BYTE_VOCAB + 1),
        "seq_len": None, "global_batch_tokens": None, "tokens": None, "aliases": (),
    }
    if base.is_moe:
        fields["expert_ffn_dim"] = None if base.expert_ffn_dim is None else max(8, round(base.expert_ffn * scale / 8) * 8)
        fields["first_dense_layers"] = min(base.first_dense_layers, fields["n_layers"] - 1)
    spec = base.replace(**fields)
    tag = (f"L{spec.n_layers} d{spec.d_model} h{spec.n_heads}/{spec.kv_heads} f{spec.ffn_dim} V{spec.vocab_size}")
    name = f"{base.name}-scaled" if model is not None else "probe-gpt2-small"
    spec = spec.replace(name=f"{name} ({tag})")
    return spec, (how if model is None else f"{how}, scaled down to {tag}")


# ------------------------------------------------------------------ planner side

def _predict(spec: ModelSpec, hw, nproc: int, seq: int, micro_batch: int, grad_accum: int, steps: int,
             precision: str, recompute: str, fsdp: bool):
    """The planner's Estimate for this exact run (its own API, nothing fitted)."""
    from trilemma.estimate.choose import evaluate_layout
    from trilemma.specs import DtypeSpec
    from trilemma.specs.build import make_cluster, make_plan

    gbt = float(seq * micro_batch * grad_accum * nproc)
    # autocast keeps fp32 weights, gradients and Adam states; only activations are half precision
    act = "fp32" if precision == "fp32" else precision
    dtypes = DtypeSpec(weight="fp32", grad="fp32", master=None, optimizer_state="fp32", frozen_weight="fp32",
                       activation=act)
    plan = make_plan(spec, tokens=gbt * max(steps, 1), seq_len=seq, global_batch_tokens=gbt, precision=precision,
                     flash_attention=True, dtypes=dtypes)
    layout = Layout(tp=1, pp=1, dp=nproc, zero=3 if fsdp else 0, recompute=Recompute(recompute),
                    micro_batch=micro_batch)
    cluster = make_cluster(hw, nproc, gpus_per_node=nproc)
    return evaluate_layout(spec, cluster, plan, layout), layout


def _predicted(est) -> Predicted:
    from trilemma.presets import constants
    from trilemma.probe.result import Predicted

    overhead = float(constants()["memory"]["framework_overhead_bytes"])
    m = est.memory
    return Predicted(hardware=est.cluster.hardware.name, step_time_s=est.time.step_s, tokens_per_s=est.time.tokens_per_s,
                     memory_bytes=m.per_gpu_bytes, memory_training_bytes=max(m.per_gpu_bytes - overhead, 0.0),
                     framework_overhead_bytes=overhead, mfu=est.time.mfu, compute_s=est.time.compute_s,
                     dp_comm_s=est.time.dp_comm_s, optimizer_s=est.time.optimizer_s,
                     memory_breakdown={"weights": m.weights, "gradients": m.gradients, "optimizer": m.optimizer,
                                       "activations": m.activations, "other": m.other})


# ------------------------------------------------------------------ running

def _available_memory() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * KIB  # /proc/meminfo counts kB = KiB
    except OSError:  # pragma: no cover
        pass
    from trilemma.probe.bench import ram_bytes
    return ram_bytes()


_BUSY = 0.1  # a share of the machine's CPU time used by other processes worth a warning


class _OtherLoad:
    """Share of the machine's CPU time that other processes used while this one ran: busy time
    from /proc/stat minus this process's and its reaped children's (torchrun workers) CPU time."""

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

        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    def wall(self) -> float:
        return time.perf_counter() - self.t0

    def share(self) -> float | None:
        busy = self._busy()
        if busy is None or self.busy0 is None:
            return None
        others = (busy - self.busy0) - (self._own() - self.own0)
        return max(0.0, others) / max(self.wall() * self.cores, 1e-9)


def _launch(job, nproc: int, quiet: bool) -> dict[str, Any]:
    """Run ``job`` as ``nproc`` torchrun processes; rank 0's figures come back as a dict."""
    with tempfile.TemporaryDirectory(prefix="trilemma-probe-") as tmp:
        jobfile, result, logfile = Path(tmp) / "job.json", Path(tmp) / "result.json", Path(tmp) / "log.txt"
        jobfile.write_text(json.dumps({"job": job.to_dict(), "result": str(result)}), encoding="utf-8")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "trilemma.probe.worker", str(jobfile)]
        env = {**os.environ, "OMP_NUM_THREADS": str(max(job.threads, 1))}
        with logfile.open("w") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=logf if quiet else None, env=env)
            try:
                rc = proc.wait()
            except KeyboardInterrupt:  # the workers got SIGINT too: let rank 0 write what it measured
                try:
                    rc = proc.wait(timeout=60)
                except (subprocess.TimeoutExpired, KeyboardInterrupt):
                    proc.kill()
                    rc = proc.wait()
        doc = json.loads(result.read_text()) if result.is_file() else None
        if doc is not None and "error" in doc:
            raise InputError(doc["error"]["field"], doc["error"]["value"], doc["error"]["allowed"])
        if doc is None:
            tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-15:])
            raise TrilemmaError(f"probe: torchrun with {nproc} processes failed (exit {rc}):\n{tail}")
        return doc


def _train(job, nproc: int, quiet: bool) -> dict[str, Any]:
    if nproc == 1 and not job.fsdp:
        from trilemma.probe.train import run_training
        return run_training(job)
    return _launch(job, nproc, quiet)


def _measured(raw: dict, job, spec: ModelSpec, nproc: int, peak: float, datasheet) -> Measured:
    from trilemma.estimate.flops import hardware_flop_per_token, model_flop_per_token
    from trilemma.probe.result import Measured, StepStats

    times = raw["step_s"][job.warmup:]
    stats = StepStats.of(times)
    tokens = job.seq * job.micro_batch * job.grad_accum * nproc
    mfpt = float(model_flop_per_token(spec, job.seq))
    hfpt = float(hardware_flop_per_token(spec, job.seq, Recompute(job.recompute)))
    tps = tokens / stats.median_s if stats else None
    per_proc = None if tps is None else tps / nproc * mfpt
    sheet_peak = datasheet.peak(job.precision) if datasheet is not None and job.precision in {
        str(p) for p in datasheet.peak_flop_per_s} else None
    losses = raw["losses"]
    mem = raw["memory"]
    return Measured(step_time=stats, tokens_per_s=tps, model_flop_per_token=mfpt, hardware_flop_per_token=hfpt,
                    model_flop_per_s=per_proc, mfu=None if per_proc is None else per_proc / peak,
                    hfu=None if per_proc is None else per_proc * hfpt / mfpt / peak, peak_flop_per_s=peak,
                    mfu_datasheet=None if per_proc is None or sheet_peak is None else per_proc / sheet_peak,
                    datasheet=None if datasheet is None else datasheet.name,
                    memory_bytes=mem["peak_bytes"], memory_training_bytes=mem["training_bytes"],
                    memory_baseline_bytes=mem["baseline_bytes"], memory_kind=mem["kind"],
                    loss_first=losses[0] if losses else None, loss_last=losses[-1] if losses else None,
                    train_loss=sum(losses[-5:]) / len(losses[-5:]) if losses else None,
                    eval_loss=raw["eval_loss"], params=int(raw["params_measured"]))


def _comparison(pred, meas) -> dict:
    from trilemma.probe.result import Comparison

    out = {}
    pairs = [("step_time", pred.step_time_s, meas.step_time.median_s if meas.step_time else None),
             ("tokens_per_s", pred.tokens_per_s, meas.tokens_per_s),
             ("memory", pred.memory_bytes, meas.memory_bytes),
             ("memory_training", pred.memory_training_bytes, meas.memory_training_bytes)]
    for k, p, m in pairs:
        if m:
            out[k] = Comparison(predicted=float(p), measured=float(m), ratio=float(p) / float(m))
    return out


def run_probe(model: str | ModelSpec | None = None, *, layers: int | None = None, d_model: int | None = None,
              heads: int | None = None, kv_heads: int | None = None, ffn: int | None = None,
              vocab: int | None = None, seq: int | None = None, micro_batch: int = DEFAULTS["micro_batch"],
              grad_accum: int = 1, steps: int = DEFAULTS["steps"], warmup: int | None = None,
              precision: str | None = None, recompute: str = "none", compile: bool = False, device: str = "auto",
              nproc: int = 1, fsdp: bool = False, threads: int | None = None,
              data: list[str] | str | None = None, seed: int = 0,
              lr: float = DEFAULTS["lr"], eval_batches: int = 8, remeasure: bool = False, progress: bool = False,
              out: str | Path | None = None) -> ProbeResult:
    """Train the model for ``steps`` optimizer steps on this machine and compare with the planner.

    ``threads`` is CPU threads per process (default: the cores shared out over ``nproc``).
    Raises InputError (exit status 2) for what cannot run: no torch, an unknown device, more
    processes than cores or GPUs, a sequence longer than the model's positions, a run that
    would not fit in memory (predicted before, or met while training).
    """
    try:
        import torch
    except ImportError:
        raise InputError("probe", "torch", "PyTorch installed: pip install 'trilemma[probe]'") from None
    from trilemma.presets import user_config_dir
    from trilemma.probe import bench
    from trilemma.probe.profile import (
        datasheet_match,
        local_hardware,
        profile_path,
        save_local_profile,
    )
    from trilemma.probe.result import (
        ProbeEnvironment,
        ProbeMachine,
        ProbeResult,
        ProbeRun,
        Scaling,
        append_record,
    )
    from trilemma.probe.train import Job

    warnings: list[str] = []
    # ---- where and how
    if device not in ("auto", "cpu", "cuda"):
        raise InputError("device", device, "auto, cpu or cuda")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("device", "cuda", "cpu: this torch sees no CUDA device")
    for k, v in (("micro-batch", micro_batch), ("grad-accum", grad_accum), ("steps", steps), ("nproc", nproc),
                 ("threads", 1 if threads is None else threads)):
        if not isinstance(v, int) or v < 1:
            raise InputError(k, v, "a positive whole number")
    cores = bench.usable_cores()
    if device == "cpu" and nproc > cores:
        raise InputError("nproc", nproc, f"at most {cores}: this machine has {cores} cores and each process needs one")
    if device == "cuda" and nproc > torch.cuda.device_count():
        raise InputError("nproc", nproc, f"at most {torch.cuda.device_count()}: one process per visible GPU")
    if fsdp and nproc == 1:
        warnings.append("--fsdp with one process shards nothing (ZeRO-3 over a data-parallel group of 1)")
    if recompute not in ("none", "full"):
        raise InputError("recompute", recompute, "none or full")
    if precision is None:
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if device == "cuda" else "fp32"
    if precision not in PRECISIONS:
        raise InputError("precision", precision, "fp32, bf16 or fp16")
    warmup = warmup if warmup is not None else min(5, max(1, steps // 6)) + (2 if compile else 0)
    if warmup < 0 or warmup >= steps:
        raise InputError("warmup", warmup, f"fewer than --steps ({steps}): warm-up steps count inside --steps")

    spec, how = probe_model(model, layers=layers, d_model=d_model, heads=heads, kv_heads=kv_heads, ffn=ffn, vocab=vocab)
    seq = seq or min(DEFAULTS["seq"], spec.max_positions)
    if not isinstance(seq, int) or seq < 2:
        raise InputError("seq", seq, "a whole number of tokens, at least 2")
    if spec.position == PositionType.LEARNED and seq > spec.max_positions:
        raise InputError("seq", seq, f"at most {spec.max_positions}: {spec.name} has {spec.max_positions} learned positions")
    if seq > spec.max_positions:
        warnings.append(f"seq {seq} is longer than {spec.name}'s context ({spec.max_positions})")
    need = BYTE_VOCAB if spec.causal else BYTE_VOCAB + 1
    if spec.vocab_size < need:
        raise InputError("vocab", spec.vocab_size, f"at least {need}: tokens are bytes" + ("" if spec.causal else " plus [MASK]"))

    # ---- the machine: all of it (the `local` profile), and one process's share of it
    per_proc_threads = (threads or max(1, cores // nproc)) if device == "cpu" else 1
    if device == "cpu" and per_proc_threads * nproc > cores:
        warnings.append(f"{nproc} process(es) × {per_proc_threads} threads oversubscribe {cores} cores")
    precs = tuple(dict.fromkeys(("fp32", precision)))
    meas = bench.machine(device, precs, threads=cores if device == "cpu" else 1, remeasure=remeasure)
    hw_local = local_hardware(meas)
    if not meas.from_cache or _stale_profile(hw_local):
        save_local_profile(hw_local, meas)
    shared = device == "cpu" and (nproc > 1 or per_proc_threads != cores)
    sliced = bench.machine(device, precs, threads=per_proc_threads, remeasure=remeasure) if shared else meas
    hw = local_hardware(sliced, share=nproc) if shared else hw_local
    if device == "cpu" and precision != "fp32":
        p16, p32 = meas.peak(precision), meas.peak("fp32")
        if p16 < p32:
            warnings.append(f"{precision} on this CPU: no native {precision} matmul path (measured {p16 / GIGA:.0f} "
                            f"GFLOP/s vs {p32 / GIGA:.0f} GFLOP/s in fp32), so {precision} runs are kept tiny; "
                            "fp32 is the CPU default")
        else:
            warnings.append(f"{precision} on this CPU: autocast runs matmuls in {precision} ({p16 / GIGA:.0f} GFLOP/s "
                            f"measured vs {p32 / GIGA:.0f} in fp32); weights, gradients and Adam stay fp32")

    est, layout = _predict(spec, hw, nproc, seq, micro_batch, grad_accum, steps, precision, recompute, fsdp)
    pred = _predicted(est)
    # ---- impossible requests, before anything big is allocated
    if device == "cpu":
        avail = _available_memory()
        if pred.memory_training_bytes * nproc > 0.9 * avail:
            raise InputError("memory", f"{spec.name}, micro-batch {micro_batch}, seq {seq}, {nproc} process(es)",
                             f"a run that fits: the planner predicts {pred.memory_training_bytes / GIB:.1f} GiB per "
                             f"process and {avail / GIB:.1f} GiB is available; scale the model down (--layers, "
                             "--d-model), use a smaller --micro-batch or --seq, or --recompute full")
        if precision != "fp32" and meas.peak(precision) < meas.peak("fp32"):
            est_s = steps * micro_batch * grad_accum * seq * nproc * est.hardware_flop_per_token / meas.peak(precision)
            if est_s > TINY_BF16_S:
                raise InputError("precision", precision,
                                 f"fp32 on this CPU, or a tiny model: without a native {precision} path this run "
                                 f"would take about {est_s:.0f} s of {precision} matmuls (limit {TINY_BF16_S:.0f} s)")
    elif pred.memory_bytes > meas.memory_bytes:
        warnings.append(f"the planner predicts {pred.memory_bytes / GIB:.1f} GiB per GPU, more than the "
                        f"{meas.memory_bytes / GIB:.1f} GiB this GPU has")

    job = Job(spec=spec.model_dump(mode="json"), device=device, precision=precision, seq=seq, micro_batch=micro_batch,
              grad_accum=grad_accum, steps=steps, warmup=warmup, recompute=recompute, compile=compile, fsdp=fsdp,
              threads=per_proc_threads if device == "cpu" else 0, data=tuple([data] if isinstance(data, str) else data)
              if data else None, seed=seed, lr=lr, eval_batches=eval_batches, progress=progress)
    meter = _OtherLoad(cores)
    raw = _train(job, nproc, quiet=not progress)
    wall = meter.wall()
    others = meter.share()
    if raw["interrupted"]:
        warnings.append(f"interrupted after {len(raw['step_s'])} of {steps} steps: figures cover the steps done")
    if len(raw["step_s"]) <= warmup:
        warnings.append("no step after the warm-up finished: no steady-state figures")
    if device == "cpu" and others is not None and others > _BUSY:
        warnings.append(f"other processes used {others:.0%} of this machine's CPU time during the run: "
                        "their work is inside these timings")

    datasheet = datasheet_match(meas.device_name) if device == "cuda" else None
    measured = _measured(raw, job, spec, nproc, sliced.peak(precision), datasheet)
    comparison = _comparison(pred, measured)
    st = measured.step_time
    if st is not None and st.n >= 5 and st.spread > 0.5:
        warnings.append(f"step times are noisy (p10 {st.p10_s:.3g} s, p90 {st.p90_s:.3g} s): other work shared the "
                        "machine; the median is reported")
    if measured.mfu is not None and measured.mfu > 1.0:
        warnings.append(f"MFU {measured.mfu:.0%} is above 100%: the matmul microbenchmark ran while the machine was "
                        "busier than during training; rerun with --remeasure on an idle machine")

    # ---- scaling: one process at the same threads, and (CPU) one process with every core
    scaling = None
    if nproc > 1 and measured.tokens_per_s and not raw["interrupted"]:
        meter = _OtherLoad(cores)
        one = _launch(job, 1, quiet=True) if device == "cpu" else _train(job, 1, quiet=True)
        one_tps = job.seq * micro_batch * grad_accum / _median_step(one, warmup)
        est1, _ = _predict(spec, hw, 1, seq, micro_batch, grad_accum, steps, precision, recompute, False)
        whole_tps = pred_whole = None
        if device == "cpu" and per_proc_threads < cores:
            from dataclasses import replace as dc_replace
            whole = _train(dc_replace(job, threads=cores, fsdp=False), 1, quiet=True)
            whole_tps = job.seq * micro_batch * grad_accum / _median_step(whole, warmup)
            est_w, _ = _predict(spec, hw_local, 1, seq, micro_batch, grad_accum, steps, precision, recompute, False)
            pred_whole = est.time.tokens_per_s / est_w.time.tokens_per_s
        others_base = meter.share()
        if device == "cpu" and others_base is not None and others_base > _BUSY:
            warnings.append(f"other processes used {others_base:.0%} of the CPU time while the one-process baselines "
                            "ran: the scaling figures carry their work")
        scaling = Scaling(nproc=nproc, threads_per_process=per_proc_threads, tokens_per_s=measured.tokens_per_s,
                          one_process_tokens_per_s=one_tps, efficiency=measured.tokens_per_s / (nproc * one_tps),
                          predicted_efficiency=est.time.tokens_per_s / (nproc * est1.time.tokens_per_s),
                          whole_machine_tokens_per_s=whole_tps,
                          speedup_vs_whole_machine=None if whole_tps is None else measured.tokens_per_s / whole_tps,
                          predicted_speedup_vs_whole_machine=pred_whole)

    env = ProbeEnvironment(torch=torch.__version__, python=platform.python_version(), platform=platform.platform(),
                           device=device, device_name=meas.device_name, cores=cores,
                           threads_per_process=raw.get("threads", per_proc_threads), nproc=nproc,
                           cuda=torch.version.cuda if device == "cuda" else None, other_processes_cpu_share=others)
    run = ProbeRun(device=device, precision=precision, seq=seq, micro_batch=micro_batch, grad_accum=grad_accum,
                   nproc=nproc, fsdp=fsdp, recompute=recompute, compile=compile, steps=steps, warmup=warmup,
                   steps_done=len(raw["step_s"]), interrupted=raw["interrupted"],
                   tokens_per_step=seq * micro_batch * grad_accum * nproc, lr=lr, seed=seed,
                   optimizer="AdamW (betas 0.9, 0.95; weight decay 0.1)", wall_s=wall,
                   parallelism=("FSDP (fully sharded)" if fsdp else "DDP") + (" over gloo" if device == "cpu" else
                                                                            " over NCCL")
                   if nproc > 1 else "single process")
    machine = ProbeMachine(profile=str(profile_path()), config_dir=str(user_config_dir()), measurement=meas,
                           per_process=None if sliced is meas else sliced)
    result = ProbeResult(model=spec, model_resolution=how, params_planner=int(est.params.total), layout=layout,
                         run=run, comparison=comparison, measured=measured, predicted=pred, scaling=scaling,
                         machine=machine, environment=env, data=raw["corpus"], step_s=tuple(raw["step_s"]),
                         losses=tuple(raw["losses"]), warnings=tuple(warnings))
    if measured.params != result.params_planner:  # pragma: no cover - guarded by tests
        log.warning("model has %d parameters, the planner counts %d", measured.params, result.params_planner)
    if out:
        append_record(out, result)
    return result


def _median_step(raw: dict, warmup: int) -> float:
    from trilemma.probe.result import StepStats

    stats = StepStats.of(raw["step_s"][warmup:])
    if stats is None:
        raise TrilemmaError("probe: the one-process baseline finished no step after its warm-up")
    return stats.median_s


def _stale_profile(hw: Any) -> bool:
    """The saved `local` profile is missing, unreadable, or lacks what this version derives from the same
    measurement (a CPU's own GEMM efficiency, added after the first profiles were written)."""
    from trilemma.probe.profile import profile_path

    try:
        saved = json.loads(profile_path().read_text(encoding="utf-8"))["hardware"]
    except (OSError, ValueError, KeyError, TypeError):
        return True
    return saved.get("efficiency", {}) != hw.efficiency
