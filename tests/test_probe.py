"""The probe: a real model from the spec, real training, records, the `local` profile, DDP.

Fast on 2 CPU cores (tiny models, few steps); skipped when torch is not installed. Every test
writes its machine measurements and hardware profile to a temporary config directory.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from trilemma.errors import InputError
from trilemma.estimate.params import param_counts
from trilemma.presets import get_hardware, hardware_presets, model_presets
from trilemma.probe.model import build_model
from trilemma.probe.profile import MachineMeasurement
from trilemma.request import ProbeRequest
from trilemma.specs import ModelSpec

# one thread per process: on a shared 2-core machine, two OpenMP threads that wait on a busy core
# make tiny steps ten times slower
TINY = {
    "layers": 2,
    "d_model": 64,
    "heads": 4,
    "ffn": 256,
    "seq": 64,
    "micro_batch": 4,
    "threads": 1,
}


@pytest.fixture(scope="module", autouse=True)
def config_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        d = tmp_path_factory.mktemp("trilemma-config")
        mp.setenv("TRILEMMA_CONFIG_DIR", str(d))
        yield d


def n_params(spec: ModelSpec) -> int:
    return sum(p.numel() for p in build_model(spec, "meta").parameters())


# ------------------------------------------------------------------ the model matches the planner


@pytest.mark.parametrize("name", sorted(model_presets()))
def test_param_count_equals_planner_on_meta(name):
    spec = model_presets()[name]
    assert n_params(spec) == param_counts(spec).total


STYLES = {
    "llama-gqa": {
        "n_kv_heads": 2,
        "ffn_type": "swiglu",
        "position": "rotary",
        "norm": "rmsnorm",
        "tied_embeddings": False,
        "qkv_bias": False,
        "out_bias": False,
        "mlp_bias": False,
    },
    "falcon-7b-like": {
        "n_kv_heads": 1,
        "position": "rotary",
        "parallel_block": True,
        "norms_per_layer": 1,
        "mlp_bias": False,
    },
    "alibi-3-heads": {"position": "alibi", "embedding_norm": True, "n_heads": 3, "d_model": 96},
    "relative": {"position": "relative", "norm": "rmsnorm", "head_dim": 32, "qkv_bias": False},
    "qwen2-moe-like": {
        "n_experts": 4,
        "top_k": 2,
        "n_shared_experts": 1,
        "shared_expert_gate": True,
        "expert_ffn_dim": 64,
        "first_dense_layers": 1,
        "moe_every": 2,
        "n_layers": 4,
        "ffn_type": "swiglu",
        "position": "rotary",
    },
    "bert": {
        "causal": False,
        "type_vocab_size": 2,
        "embedding_norm": True,
        "final_norm": False,
        "pooler": True,
        "dropout": True,
    },
    "geglu-untied-bias": {
        "ffn_type": "geglu",
        "tied_embeddings": False,
        "qkv_bias": True,
        "out_bias": False,
    },
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_styles_count_and_train(style):
    spec = ModelSpec(
        **{
            "n_layers": 2,
            "d_model": 64,
            "n_heads": 4,
            "ffn_dim": 128,
            "vocab_size": 257,
            "max_positions": 64,
            **STYLES[style],
        }
    )
    model = build_model(spec)
    assert sum(p.numel() for p in model.parameters()) == param_counts(spec).total
    x = torch.randint(0, 256, (2, 32))
    logits = model(x)
    assert logits.shape == (2, 32, 257)
    logits.float().logsumexp(-1).mean().backward()
    assert all(
        p.grad is not None
        for n, p in model.named_parameters()
        if "pooler" not in n and "experts" not in n
    )


def test_scaled_preset_keeps_its_style():
    from trilemma.probe.run import probe_model

    spec, how = probe_model("llama2-70b", layers=2, d_model=128)
    assert (spec.n_layers, spec.d_model, spec.vocab_size) == (2, 128, 256)
    assert (
        spec.n_heads == 1 and spec.kv_heads == 1
    )  # head width 128 kept; GQA 8:1 cannot go below one KV head
    assert (spec.ffn_type, spec.position, spec.norm, spec.tied_embeddings) == (
        "swiglu",
        "rotary",
        "rmsnorm",
        False,
    )
    assert "scaled down" in how
    spec, _ = probe_model("mixtral-8x7b", layers=2, d_model=128, heads=4)
    assert spec.n_experts == 8 and spec.kv_heads == 1 and n_params(spec) == param_counts(spec).total


# ------------------------------------------------------------------ data


def test_corpus_default_and_jsonl(tmp_path):
    from trilemma.probe.data import load_corpus

    c = load_corpus()
    assert (
        c.documents > 20 and c.held_out_documents >= 1 and len(c.train) > 1e6 and len(c.eval) > 1e4
    )
    f = tmp_path / "d.jsonl"
    f.write_text("\n".join(json.dumps({"text": f"document {i} " * 50}) for i in range(40)))
    c = load_corpus([str(f)])
    assert (c.documents, c.held_out_documents) == (40, 2)
    assert b"document 19 " in c.eval and b"document 19 " not in c.train
    (tmp_path / "bad.jsonl").write_text('{"body": "no text"}\n')
    with pytest.raises(InputError):
        load_corpus([str(tmp_path / "bad.jsonl")])
    with pytest.raises(InputError):
        load_corpus([str(tmp_path / "missing")])


# ------------------------------------------------------------------ a real run, its JSON and records


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """`trilemma probe --json --out` through a local Typer app: 30 steps of a tiny model."""
    import typer
    from typer.testing import CliRunner

    from trilemma.cli_probe import probe

    app = typer.Typer()
    app.command("probe")(probe)
    app.command("other")(lambda: None)
    out = tmp_path_factory.mktemp("records") / "records.jsonl"
    args = [
        "probe",
        "--layers",
        "2",
        "--d-model",
        "64",
        "--heads",
        "4",
        "--ffn",
        "256",
        "--seq",
        "64",
        "--micro-batch",
        "4",
        "--threads",
        "1",
        "--steps",
        "30",
        "--lr",
        "3e-3",
        "--json",
        "--out",
        str(out),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    return res, out


def test_json_document(cli_run):
    res, _ = cli_run
    doc = json.loads(res.stdout)
    assert doc["schema"] == "trilemma.probe/1" and isinstance(doc["warnings"], list)
    assert res.stderr == ""
    # the first key containing "ratio" is comparison.step_time.ratio
    text = res.stdout
    first = text.index('"ratio"')
    assert text.rfind('"step_time"', 0, first) > text.index('"comparison"')
    assert '"ratio' not in text[: text.index('"comparison"')]
    c = doc["comparison"]
    assert list(c)[:3] == ["step_time", "tokens_per_s", "memory"]
    assert c["step_time"]["ratio"] == pytest.approx(
        c["step_time"]["predicted"] / c["step_time"]["measured"]
    )
    m = doc["measured"]
    assert doc["model"]["params_measured"] == doc["model"]["params_planner"]
    assert m["tokens_per_s"] > 0 and 0 < m["mfu"] and m["memory_bytes"] > 0
    assert m["step_time"]["n"] == 30 - doc["run"]["warmup"]
    env = doc["environment"]
    assert env["torch"] == torch.__version__ and env["cores"] >= 1 and env["device"] == "cpu"


def test_loss_decreases_over_30_steps(cli_run):
    doc = json.loads(cli_run[0].stdout)
    losses = doc["steps"]["loss"]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0  # ln 256 = 5.55 nats at the start
    assert doc["measured"]["eval_loss"] < losses[0] - 1.0


def test_records_round_trip(cli_run):
    from trilemma.probe import ProbeResult, read_records

    res, out = cli_run
    records = read_records(out)
    assert len(records) == 1 and isinstance(records[0], ProbeResult)
    assert records[0].to_dict() == json.loads(json.dumps(json.loads(res.stdout)))
    again = ProbeResult.from_dict(records[0].to_dict())
    assert again == records[0]


def test_record_is_typed_its_schema_comes_from_the_type_and_it_prints(cli_run, capsys):
    from dataclasses import FrozenInstanceError

    from trilemma.probe import read_records
    from trilemma.probe.result import ProbeEnvironment, ProbeMachine, ProbeResult, ProbeRun
    from trilemma.report.probe import print_probe

    _, out = cli_run
    r = read_records(out)[0]
    assert isinstance(r.run, ProbeRun) and isinstance(r.environment, ProbeEnvironment)
    assert isinstance(r.machine, ProbeMachine) and r.machine.measurement.peak("fp32") > 0
    assert r.to_dict()["schema"] == ProbeResult.SCHEMA
    assert r.run.tokens_per_step == r.run.seq * r.run.micro_batch * r.run.grad_accum * r.run.nproc
    assert r.run.steps_done == r.run.steps and not r.run.interrupted
    with pytest.raises(FrozenInstanceError):
        r.run.steps = 1  # type: ignore[misc]
    with pytest.raises(ValueError):
        ProbeResult.from_dict({**r.to_dict(), "schema": "trilemma.ladder/1"})
    print_probe(r)
    shown = capsys.readouterr().out
    assert r.model.name in shown and r.environment.device_name in shown


def test_local_profile_is_a_hardware_preset(cli_run, config_dir):
    from trilemma.api import estimate

    hw = get_hardware("local")
    assert "local" not in hardware_presets()  # packaged presets stay packaged
    assert hw.devices_per_node == 1 and "measured" in hw.source and "placeholder" in hw.price_source
    assert {str(p) for p in hw.peak_flop_per_s} >= {"fp32"}
    assert (config_dir / "hardware" / "local.json").is_file()
    est = estimate(
        "gpt2-124m", "local", 1, tokens=1e6, seq_len=256, global_batch_tokens=2048, precision="fp32"
    )
    assert est.time.step_s > 0


def test_local_profile_carries_the_cpu_gemm_fit_and_is_refreshed_when_stale(cli_run, config_dir):
    """A CPU profile holds its own GEMM efficiency (fitted to its measured curve), its attention's by
    head dimension and its measured host seconds per eager operator; a profile written before those
    existed is rewritten from the cached measurement on the next probe."""
    from trilemma.probe.attention_rate import attention_constants
    from trilemma.probe.dispatch import host_constants
    from trilemma.probe.profile import gemm_constants, local_hardware, profile_path
    from trilemma.probe.run_inputs import stale_profile

    doc = json.loads(profile_path().read_text())
    meas = MachineMeasurement.from_dict(doc["measured"])
    hw = local_hardware(meas)
    assert hw.efficiency == {
        **gemm_constants(meas.matmul["fp32"]),
        **attention_constants(
            meas.host_dispatch.attention_head_dims,
            meas.host_dispatch.attention_flop_per_s,
            meas.matmul["fp32"].peak,
        ),
        **host_constants(meas.host_dispatch)[0],
    }
    assert hw.efficiency["host_op_s"] > 0 and hw.efficiency["host_opt_tensor_s"] > 0
    assert doc["hardware"]["efficiency"] == hw.efficiency and not stale_profile(hw)
    old = {**doc, "hardware": {k: v for k, v in doc["hardware"].items() if k != "efficiency"}}
    profile_path().write_text(json.dumps(old))
    assert stale_profile(hw)
    profile_path().write_text(json.dumps(doc))


# ------------------------------------------------------------------ impossible requests: exit status 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"seq": 4096}, "seq"),  # the default model has 1024 learned positions
        ({"nproc": 64}, "nproc"),
        ({"device": "tpu"}, "device"),
        ({"vocab": 100}, "vocab"),
        ({"steps": 3, "warmup": 3}, "warmup"),
        ({"model": "gpt3-175b", "steps": 2, "warmup": 1}, "memory"),
    ],
)
def test_impossible_requests(kwargs, field):
    from trilemma.probe import run_probe

    with pytest.raises(InputError) as err:
        run_probe(ProbeRequest(**kwargs))
    assert err.value.field == field and err.value.exit_code == 2


def test_interrupt_keeps_what_was_measured(monkeypatch, tmp_path):
    from trilemma.probe import read_records, run_probe
    from trilemma.probe.data import Batches

    real, calls = Batches.next, {"n": 0}

    def next_or_stop(self):
        calls["n"] += 1
        if calls["n"] > 8 and self.causal and self.batch == 2:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(Batches, "next", next_or_stop)
    out = tmp_path / "r.jsonl"
    r = run_probe(ProbeRequest(**{**TINY, "micro_batch": 2}, steps=30, warmup=2, out=out))
    assert r.run.interrupted and r.run.steps_done == 8
    assert r.measured.step_time.n == 6 and any("interrupted" in w for w in r.warnings)
    assert read_records(out)[0].run.steps_done == 8


# ------------------------------------------------------------------ several processes


def test_two_process_ddp_run_completes():
    from dataclasses import asdict

    from trilemma.probe.run import _launch, probe_model
    from trilemma.probe.train import Job

    spec, _ = probe_model(None, layers=2, d_model=64, heads=4, ffn=256)
    job = Job(
        spec=spec.model_dump(mode="json"),
        device="cpu",
        precision="fp32",
        seq=64,
        micro_batch=2,
        grad_accum=2,
        steps=4,
        warmup=1,
        threads=1,
    )
    raw = _launch(job, 2, quiet=True)
    assert raw["world"] == 2 and len(raw["step_s"]) == 4 and not raw["interrupted"]
    assert raw["params_measured"] == param_counts(spec).total and raw["eval_loss"] > 0
    assert asdict(job)  # the job is plain data (it travelled as JSON)


#: other processes' share of the CPU while a probe trained above which its timings hold their work
BUSY_SHARE = 0.2


@pytest.mark.slow
def test_nproc_2_scaling_measured_against_prediction(capsys):
    """Two DDP processes over gloo against one, same threads per process: the measured scaling efficiency
    against the planner's. The gradients' all-reduce is timed with gloo's own all-reduce, measured between
    two processes (trilemma.probe.collective: ~0.4 ms + M / 1.3-1.6 GB/s on this project's 2-core
    machine, against the 3.5 GB/s of one bulk TCP stream and NCCL's microsecond latencies, which
    predicted 0.95 and measured 0.46-0.77). The planner still over-predicts (0.87 predicted; 0.56-0.70
    measured in four runs): the two processes wait for the slower one each step, and the 2 cores are
    shared. Checked: the prediction is not below the measurement by more than 10%, nor more than twice
    it; skipped where the probe itself reports the machine busy while it trained (other processes' work
    inside its timings; the load average before it started, raised by the tests before it, is not)."""
    from trilemma.probe import run_probe

    r = run_probe(ProbeRequest(**{**TINY, "threads": None}, steps=8, warmup=2, nproc=2))
    sc = r.scaling
    assert (
        sc is not None
        and sc.nproc == 2
        and 0 < sc.efficiency < 1.5
        and 0 < sc.predicted_efficiency <= 1.0
    )
    assert r.run.parallelism == "DDP over gloo"
    # the processes' gradient all-reduce is timed with gloo's, measured between two of them
    gloo = r.machine.per_process.collective
    assert gloo is not None and r.predicted.dp_comm_s > gloo.latency_s
    from trilemma.report.probe import print_probe

    print_probe(r)
    assert "gloo all-reduce between 2 local processes" in capsys.readouterr().out
    others = r.environment.other_processes_cpu_share  # other processes' share while it trained
    if others is not None and others > BUSY_SHARE:  # their work is inside the timings
        pytest.skip(f"other processes used {others:.0%} of the CPU while the probe trained")
    assert 0.5 <= sc.efficiency / sc.predicted_efficiency <= 1.1, (
        sc.efficiency,
        sc.predicted_efficiency,
    )


@pytest.mark.slow
def test_fsdp_two_processes():
    from trilemma.probe import run_probe

    r = run_probe(
        ProbeRequest(
            **{**TINY, "threads": None}, steps=4, warmup=1, nproc=2, fsdp=True, grad_accum=2
        )
    )
    assert r.layout.zero == 3 and r.measured.step_time is not None
    assert r.run.parallelism == "FSDP (fully sharded) over gloo" and r.predicted.dp_comm_s >= 0


# ------------------------------------------------------------------ the planner never imports torch


def test_planner_and_cli_do_not_import_torch():
    code = (
        "import sys, trilemma, trilemma.api, trilemma.cli, trilemma.cli_probe, trilemma.probe, "
        "trilemma.probe.result, trilemma.probe.profile; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


_KEPT = """
import torch
from trilemma.probe.train import _mmap_large_allocations, _rss

def kept_after_free():
    before = _rss()[0]
    big, small = [], []
    for _ in range(64):
        big.append(torch.ones(1 << 20))  # 4 MiB
        small.append(torch.ones(1 << 14))  # 64 KiB after it, kept (under any threshold: from the heap)
    del big
    return _rss()[0] - before

kept_after_free()  # the first frees raise glibc's dynamic mmap threshold above 4 MiB
default = kept_after_free()
assert _mmap_large_allocations()
kept_after_free()
print(default, kept_after_free())
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc malloc and /proc/self/status"
)
def test_freed_tensors_leave_the_resident_set_with_the_mmap_threshold_fixed():
    """mallopt(3) M_MMAP_THRESHOLD: glibc's threshold is dynamic by default, raised by each freed mmapped block up
    to 32 MiB, so after a first round of 4 MiB tensors is freed the next round comes from the heap, which keeps
    its holes resident: 64 × 4 MiB freed between live 64 KiB blocks stay in the resident set. Held fixed at
    128 KiB (the probe's ``cpu_memory_baseline``), each 4 MiB tensor is its own mapping, unmapped when freed:
    only the 64 live 64 KiB blocks (4 MiB) remain."""
    out = subprocess.run(
        [sys.executable, "-c", _KEPT], check=True, capture_output=True, text=True
    ).stdout
    default, fixed = (float(x) for x in out.split())
    mib = 2**20
    assert default >= 64 * 4 * mib  # the freed 256 MiB (and the live 4 MiB) stay resident
    assert fixed <= 64 * 64 * 1024 + 2 * mib  # the live 4 MiB, within a few pages


def _fresh_probe(config_dir, *args: str) -> dict:
    """`trilemma probe ... --json` in a fresh process (the CLI's case): a process that trained before keeps
    freed heap blocks that serve the next run (``trilemma.probe.train._TRAINED_BEFORE``)."""
    import os

    env = {**os.environ, "TRILEMMA_CONFIG_DIR": str(config_dir)}
    res = subprocess.run(
        [sys.executable, "-m", "trilemma.cli", "probe", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr[-2000:]
    return json.loads(res.stdout)


@pytest.mark.slow
def test_default_probe_memory_within_25_percent(config_dir):
    """The memory floor: the probe's default run (`trilemma probe`, no flags) on this machine, its
    predicted training memory (tensors + the CPU runtime overhead the probe measures in a one-layer
    process, no GPU framework overhead or caching-allocator fragmentation) within 25% of the measured
    growth of the resident set, both measured from ``cpu_memory_baseline`` (the step's modules imported,
    glibc's mmap threshold fixed)."""
    doc = _fresh_probe(
        config_dir, "--steps", "4", "--warmup", "3"
    )  # memory is read over the first 2 steps
    c = doc["comparison"]["memory_training"]
    assert 0.75 <= c["ratio"] <= 1.25, c
    assert (
        doc["predicted"]["memory_breakdown"]["other"] > 0
    )  # the measured runtime overhead is in it


@pytest.mark.slow
def test_lora_probe_memory_within_25_percent(config_dir):
    """`trilemma probe --finetune lora` on its defaults (Llama-2-7B's shape scaled down, PEFT LoRA on
    all linears), the predicted training memory within 25% of the measured growth of the resident set."""
    pytest.importorskip("peft")
    doc = _fresh_probe(config_dir, "--finetune", "lora", "--steps", "4", "--warmup", "3")
    c = doc["comparison"]["memory_training"]
    assert 0.75 <= c["ratio"] <= 1.25, c
    assert not any("trained on the CPU before" in w for w in doc["warnings"])


def test_a_second_cpu_run_in_one_process_says_its_memory_is_an_upper_bound():
    from trilemma.probe import run_probe

    run_probe(ProbeRequest(**TINY, steps=2, warmup=1), eval_batches=0)
    r = run_probe(ProbeRequest(**TINY, steps=2, warmup=1), eval_batches=0)
    assert any("trained on the CPU before" in w for w in r.warnings)


def test_cpu_memory_per_process_prediction_adds_the_measured_runtime_baseline():
    """On a CPU the measured memory per process is the whole resident set (interpreter, torch, data and
    training): its prediction is the baseline measured before training plus the planner's total. By hand:
    362 MiB baseline + 200 MiB planned against 554 MiB measured → (362 + 200) / 554 = 1.0144; the training
    state compares the planner alone, 200 / 192."""
    from trilemma.probe.compare import comparison
    from trilemma.probe.result import Measured, Predicted
    from trilemma.units import MIB

    pred = Predicted(
        hardware="local",
        step_time_s=0.3,
        tokens_per_s=1.0,
        memory_bytes=200 * MIB,
        memory_training_bytes=200 * MIB,
        framework_overhead_bytes=0.0,
        mfu=0.5,
        compute_s=0.3,
        dp_comm_s=0.0,
        optimizer_s=0.0,
        memory_breakdown={},
    )
    meas = Measured(
        step_time=None,
        tokens_per_s=None,
        model_flop_per_token=1.0,
        hardware_flop_per_token=1.0,
        model_flop_per_s=None,
        mfu=None,
        hfu=None,
        peak_flop_per_s=1.0,
        mfu_datasheet=None,
        datasheet=None,
        memory_bytes=554 * MIB,
        memory_training_bytes=192 * MIB,
        memory_baseline_bytes=362 * MIB,
        memory_kind="VmHWM",
        loss_first=None,
        loss_last=None,
        train_loss=None,
        eval_loss=None,
        params=1,
    )
    c = comparison(pred, meas)
    assert c["memory"].ratio == pytest.approx(562 / 554) and c["memory"].predicted == 562 * MIB
    assert c["memory_training"].ratio == pytest.approx(200 / 192)
