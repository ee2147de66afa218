"""A minimal plain PyTorch training loop: the reference `trilemma probe` must keep up with.

Same model (trilemma.probe.model.build_model), same data (the default corpus, same seeded
batches), same AdamW, same thread count — and nothing else: no per-step clock, no progress
bar, no records. Tokens/s = tokens of the post-warm-up steps / their wall time.

    python benchmarks/plain_loop.py                       # the plain loop alone
    python benchmarks/plain_loop.py --compare --repeats 3 # plain loop and probe, alternating,
                                                          # each in a fresh process; medians

The probe's figure is computed the same way (post-warm-up tokens / the sum of its step times),
so both sides count the same work; the acceptance bar is the probe within 5% of the plain loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def plain(
    layers: int,
    d_model: int,
    heads: int,
    ffn: int,
    seq: int,
    micro_batch: int,
    steps: int,
    warmup: int,
    threads: int,
    lr: float,
) -> float:
    import torch
    import torch.nn.functional as F

    from trilemma.probe.data import Batches, load_corpus
    from trilemma.probe.model import build_model
    from trilemma.probe.run import probe_model

    torch.set_num_threads(threads)
    spec, _ = probe_model(None, layers=layers, d_model=d_model, heads=heads, ffn=ffn)
    batches = Batches(load_corpus().train, seq, micro_batch, seed=0)
    torch.manual_seed(0)
    model = build_model(spec)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    for i in range(steps):
        if i == warmup:
            t0 = time.perf_counter()
        x, y = batches.next()
        logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    loss.item()
    return (steps - warmup) * seq * micro_batch / (time.perf_counter() - t0)


def probe(
    layers: int,
    d_model: int,
    heads: int,
    ffn: int,
    seq: int,
    micro_batch: int,
    steps: int,
    warmup: int,
    threads: int,
    lr: float,
) -> float:
    from trilemma.probe import run_probe

    r = run_probe(
        layers=layers,
        d_model=d_model,
        heads=heads,
        ffn=ffn,
        seq=seq,
        micro_batch=micro_batch,
        steps=steps,
        warmup=warmup,
        threads=threads,
        lr=lr,
        eval_batches=0,
    )
    done = r.step_s[warmup:]
    return len(done) * seq * micro_batch / sum(done)


def wait_for_quiet(max_wait_s: float, threshold: float = 0.1) -> None:
    """Wait (up to max_wait_s) until the machine's CPUs are idle: others' work would land in the timings."""
    from pathlib import Path

    def busy(window_s: float) -> float:
        def snap() -> tuple[int, int]:
            v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
            return sum(v), v[3] + v[4]

        t0, i0 = snap()
        time.sleep(window_s)
        t1, i1 = snap()
        return 1.0 - (i1 - i0) / max(t1 - t0, 1)

    end = time.monotonic() + max_wait_s
    while busy(1.0) > threshold and time.monotonic() < end:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: all cores)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--which", choices=["plain", "probe"], default="plain")
    ap.add_argument(
        "--compare", action="store_true", help="alternate plain and probe in fresh processes"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--wait",
        type=float,
        default=60.0,
        help="seconds to wait for an idle machine before each run",
    )
    a = ap.parse_args()
    if not a.threads:
        import os

        a.threads = len(os.sched_getaffinity(0))
    kw = {
        "layers": a.layers,
        "d_model": a.d_model,
        "heads": a.heads,
        "ffn": a.ffn,
        "seq": a.seq,
        "micro_batch": a.micro_batch,
        "steps": a.steps,
        "warmup": a.warmup,
        "threads": a.threads,
        "lr": a.lr,
    }
    if not a.compare:
        tps = (plain if a.which == "plain" else probe)(**kw)
        print(json.dumps({"which": a.which, "tokens_per_s": tps, **kw}))
        return
    got: dict[str, list[float]] = {"plain": [], "probe": []}
    args = [sys.executable, __file__] + [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
    for _ in range(a.repeats):
        for which in ("plain", "probe"):
            wait_for_quiet(a.wait)
            out = subprocess.run(
                args + [f"--which={which}"], capture_output=True, text=True, check=True
            ).stdout
            got[which].append(json.loads(out.strip().splitlines()[-1])["tokens_per_s"])
    p, q = statistics.median(got["plain"]), statistics.median(got["probe"])
    print(
        json.dumps(
            {
                "plain_tokens_per_s": got["plain"],
                "probe_tokens_per_s": got["probe"],
                "plain_median": p,
                "probe_median": q,
                "probe_over_plain": q / p,
                **kw,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
