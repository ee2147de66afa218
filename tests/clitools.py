"""Calling the CLI in-process from tests (``tests/`` is on sys.path when pytest runs them)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from trilemma.cli import main

#: a Hugging Face config.json of a 45M-parameter Llama: the tests' smallest real model file
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
}


def run(capsys, *args: str) -> tuple[int, str, str]:
    """``trilemma ARGS`` through ``trilemma.cli.main``: (exit status, stdout, stderr) of that call only."""
    capsys.readouterr()  # drop anything earlier
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """TimeoutError (saying ``what`` ran over) if the block runs past ``seconds`` of wall time: a case
    that blocks on a FIFO or loops fails instead of hanging the suite (SIGALRM: the main thread only)."""

    def too_slow(signum, frame):
        raise TimeoutError(f"over {seconds} s: {what}")

    old = signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def save_stated_cpu_profile() -> None:
    """Write a stated `local` CPU profile (fp32 only, as `trilemma probe` writes one on a CPU) into the config
    directory $TRILEMMA_CONFIG_DIR names: tests that name `local` must not depend on whether this machine's user
    ever ran the probe, and must not measure anything."""
    from trilemma.probe.profile import (
        MachineMeasurement,
        MatmulCurve,
        local_hardware,
        save_local_profile,
    )

    meas = MachineMeasurement(
        device="cpu",
        device_name="test CPU",
        cores=2,
        threads=2,
        torch_version="0",
        memory_bytes=8e9,
        memory_bw_bytes_per_s=10e9,
        link_bw_bytes_per_s=1e9,
        link_kind="stated",
        matmul={"fp32": MatmulCurve("fp32", (128, 256, 512, 1024), (20e9, 40e9, 60e9, 70e9))},
        runtime_memory_bytes=50e6,
        measured_at="2025-01-01T00:00:00+00:00",
    )
    save_local_profile(local_hardware(meas), meas)


def short_ladder_runs(fingerprint: str, seeds) -> list:
    """Real ladder runs short enough for a test: the smallest shape (width 16), 6 optimizer steps
    (2 of warm-up), 2,048 evaluation tokens, one run per seed, on the corpus of ``fingerprint``."""
    from dataclasses import replace

    from trilemma.ladder import plan as lp

    run = lp.make_run(
        "fit", lp.shape_for_width(16), 5.0, eval_tokens=2048, data_fingerprint=fingerprint
    )
    return [replace(run, steps=6, warmup_steps=2, seed=s) for s in seeds]


def ladder_cli(args: list[str]):
    """``trilemma ladder ARGS`` in-process through Typer's runner: its Result (exit_code, stdout, stderr)."""
    import typer
    from typer.testing import CliRunner

    from trilemma.cli_ladder import ladder

    app = typer.Typer()
    app.command()(ladder)
    return CliRunner().invoke(app, args)
