"""How long does `trilemma validate --data` take on a user's file of many rows?

    python benchmarks/validate_data_speed.py [--rows 5000] [--repeats 1]

Writes three throughput CSVs of ``--rows`` rows into a temporary folder and times `validate --data` on
each, in-process (the CLI's own code; process CPU time, which the shared machine's other load does not
inflate, beside wall time): one row repeated, rows drawn from ~100 configurations with the layout left
to the search, and rows whose pinned layouts make nearly every row its own configuration. Rows of one
configuration are searched and evaluated once (trilemma.validate.predict.predict), so the first two grow
with the configurations, the third with the rows.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import tempfile
import time
from pathlib import Path

from trilemma.cli import main

HEADER = "model,metric,reported,gpu,n_gpus,model_preset,seq_len,global_batch,precision"
MODELS = ("llama2-7b", "llama2-13b", "gpt3-1.3b", "llama2-70b")
GPUS = ("h100-sxm", "a100-80gb")


def _repeated(rows: int, rng: random.Random) -> list[str]:
    return ["my 7B,step_s,5.5,h100-sxm,16,llama2-7b,4096,64,bf16"] * rows


def _searched(rows: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(rows):
        n, gb = rng.choice((8, 16, 32, 64, 128)), rng.choice((256, 512, 1024))
        model, gpu = rng.choice(MODELS), rng.choice(GPUS)
        out.append(f"m{i},step_s,{rng.uniform(1, 20):.2f},{gpu},{n},{model},4096,{gb},bf16")
    return out


def _pinned(rows: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(rows):
        tp, pp, dp, mb = rng.choice((1, 2, 4, 8)), rng.choice((1, 2)), rng.choice((1, 2, 4, 8)), 1
        gb, model = dp * rng.choice((1, 4, 8, 16)), rng.choice(MODELS)
        cells = f"{rng.choice(GPUS)},{tp * pp * dp},{model},{rng.choice((2048, 4096))},{gb},bf16"
        out.append(f"m{i},step_s,{rng.uniform(1, 20):.2f},{cells},{tp},{pp},{dp},{mb}")
    return out


KINDS = {"one row repeated": (_repeated, ""), "~100 configurations, searched": (_searched, "")}
KINDS["pinned layouts, nearly all distinct"] = (_pinned, ",tp,pp,dp,micro_batch")


def run(path: Path, repeats: int) -> tuple[float, float]:
    """Best (CPU seconds, wall seconds) of ``validate --data PATH --json`` over ``repeats`` runs."""
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["validate", "--data", str(path), "--json"])
        if code != 0:
            raise SystemExit(f"validate --data {path} exited {code}")
        best = min(best, (time.process_time() - cpu, time.perf_counter() - wall))
    return best


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"validate --data, {args.rows:,} throughput rows (best of {args.repeats})")
        for name, (make, extra) in KINDS.items():
            p = Path(tmp) / "rows.csv"
            p.write_text("\n".join([HEADER + extra, *make(args.rows, rng)]) + "\n", "utf-8")
            cpu, wall = run(p, args.repeats)
            print(f"  {name:<38} {cpu:7.2f} s CPU  {wall:7.2f} s wall")


if __name__ == "__main__":
    cli()
