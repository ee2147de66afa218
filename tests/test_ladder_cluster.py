"""`trilemma ladder --backend ray|slurm`: the tiny ladder on a local Ray cluster against the local
backend (same seeds, same losses), a driver killed mid-ladder and started again (each run recorded
once), a run that fails on every try, and the Slurm jobs' parameters checked by submitit itself.

The Ray cluster is started once for the module, in a temporary directory, with 2 CPUs
(``ray.init``); the drivers under test join it with ``--address``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from clitools import ladder_cli, run, save_stated_cpu_profile, short_ladder_runs

from trilemma.errors import InputError
from trilemma.ladder import plan as lp
from trilemma.ladder.records import read_records


@pytest.fixture(autouse=True)
def config_dir(tmp_path_factory, monkeypatch):
    d = tmp_path_factory.mktemp("trilemma-config")
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(d))
    return d


@pytest.fixture(scope="module")
def ray_address():
    """A Ray cluster of 2 CPUs started by this test process in a temporary directory (a short path:
    Ray's sockets live there); its GCS address, for the drivers' --address."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("torch")
    tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ctx = ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False)
    try:
        yield ctx.address_info["gcs_address"]
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def _cli(args):
    return ladder_cli(args)


def _no_profile(monkeypatch):
    import trilemma.ladder.run as run_mod

    monkeypatch.setattr(
        run_mod, "local_profile", lambda measure=True: (None, "no profile in this test")
    )


# ------------------------------------------------------------------ fast checks


def test_import_imports_neither_ray_nor_submitit():
    code = (
        "import sys, trilemma, trilemma.cli, trilemma.ladder.run, trilemma.ladder.dispatch, "
        "trilemma.ladder.cluster; assert 'ray' not in sys.modules and 'submitit' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bad_backend_and_foreign_options_are_one_line(tmp_path, monkeypatch, capsys):
    _no_profile(monkeypatch)
    out = str(tmp_path / "a")
    code, _, err = run(capsys, "ladder", "--tiny", "--out", out, "--backend", "kubernetes")
    assert code == 2 and err.count("\n") == 1
    assert "backend: 'kubernetes' is not allowed; expected local, ray or slurm" in err
    code, _, err = run(capsys, "ladder", "--tiny", "--out", out, "--address", "auto")
    assert code == 2 and err.count("\n") == 1 and "address" in err and "--backend ray" in err
    # Slurm for real on a machine without sbatch: one line, before any plan is printed
    monkeypatch.setenv("PATH", str(tmp_path))
    code, stdout, err = run(capsys, "ladder", "--tiny", "--out", out, "--backend", "slurm")
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "sbatch" in err


def test_progress_json_lines_count_runs_and_the_planners_time_left(capsys):
    """Three runs planned at 3, 2 and 1 s, two at a time: longest first, 3 s are left (3 | 2+1);
    after the 3-s run, 2 s (2 | 1); after a failure of the 2-s run, 1 s; then none."""
    from trilemma.ladder.progress import LadderProgress

    bar = LadderProgress(False, 3, predicted=[3.0, 2.0, 1.0], at_once=2, lines=True)
    assert bar.remaining_s() == 3.0
    bar.run_done("2x16", 2.5, "a", 3.0)
    bar.run_failed("2x24", "boom", "b", 2.0)
    bar.run_done("2x32", None, "c", 1.0)
    events = [json.loads(ln) for ln in capsys.readouterr().err.splitlines()]
    assert [e["event"] for e in events] == ["run_done", "run_failed", "run_done"]
    assert [(e["done"], e["failed"], e["total"]) for e in events] == [
        (1, 0, 3),
        (1, 1, 3),
        (2, 1, 3),
    ]
    assert [e["remaining_s"] for e in events] == [2.0, 1.0, 0.0]
    assert events[1]["error"] == "boom" and events[2]["loss"] is None
    assert LadderProgress(False, 2, predicted=[1.0, None]).remaining_s() is None


def test_a_gpu_run_on_a_machine_without_one_is_one_input_error():
    pytest.importorskip("torch")
    import torch

    from trilemma.ladder.train import device_and_cast

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(
        InputError, match="gpu: 'cuda' is not allowed; expected a worker with a CUDA GPU"
    ):
        device_and_cast("cuda")
    assert device_and_cast("cpu")[2] == "fp32"


def test_failed_records_are_kept_and_trained_again(tmp_path):
    """A run recorded as failed is not a finished run: resume trains it again and says why."""
    from trilemma.ladder.records import append_record, failed_record, record_head, resume
    from trilemma.ladder.train import run_to_dict

    plan = lp.make_plan(lp.TINY, hw=None, workers=1, threads=1)
    first, second = plan.runs[0].run, plan.runs[1].run
    path = tmp_path / "runs.jsonl"
    append_record(path, failed_record({"run": run_to_dict(first)}, "RayTaskError: out of memory"))
    append_record(path, record_head(second, 2.0))
    warnings, notes = [], []
    by_key, done = resume(plan, path, warnings, notes)
    assert done == {second.key} and warnings == []
    assert any("1 run(s) failed" in n and "out of memory" in n for n in notes)
    got = read_records(path).records
    assert got[0]["status"] == "failed" and got[0]["loss"] is None and got[0]["N"] == first.n


def test_slurm_dry_run_parameters_pass_submitit_validation(tmp_path):
    """Each run's job: submitit's own checks (its parameter names, then its sbatch script), one GPU
    per job, the partition, and a time limit of 2 × the planner's time + 5 s start-up, in minutes,
    rounded up (computed here from the plan's predicted seconds)."""
    pytest.importorskip("submitit")
    from submitit.slurm.slurm import SlurmExecutor, _make_sbatch_string

    r = _cli(
        [
            "--tiny",
            "--out",
            str(tmp_path / "lad"),
            "--backend",
            "slurm",
            "--gpu",
            "h100-sxm",
            "--partition",
            "gpu",
            "--dry-run",
            "--json",
        ]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    cluster = doc["plan"]["cluster"]
    predicted = {run["key"]: run["predicted_s"] for run in doc["plan"]["runs"]}
    assert cluster["backend"] == "slurm" and len(cluster["runs"]) == 10 == len(predicted)
    for row in cluster["runs"]:
        params = row["submitit"]
        assert set(params) <= SlurmExecutor._valid_parameters()
        script = _make_sbatch_string(
            command="true", folder=str(tmp_path / "lad" / "slurm"), **params
        )
        lines = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
        assert row["sbatch"] == [ln.removeprefix("#SBATCH").strip() for ln in lines]
        assert "#SBATCH --gpus-per-node=1" in lines and "#SBATCH --partition=gpu" in lines
        assert f"#SBATCH --job-name=trilemma-ladder-{row['key']}" in lines
        assert params["time"] == math.ceil((2 * predicted[row["key"]] + 5) / 60)
    # GPU-hours: the planner's seconds summed, one GPU per run
    assert cluster["predicted_gpu_hours"] == pytest.approx(sum(predicted.values()) / 3600)
    assert not (tmp_path / "lad" / "runs.jsonl").exists()


def test_ray_failed_run_and_a_run_back_twice(tmp_path, ray_address):
    """A run that raises on every try is reported once as failed, after Ray's retry; the same run
    coming back twice is appended once by the driver (its key)."""
    from trilemma.ladder.cluster import run_on_ray
    from trilemma.ladder.progress import LadderProgress
    from trilemma.ladder.train import corpus_view, run_to_dict
    from trilemma.ladder.training import TrainJob, _train_on_cluster

    view = corpus_view(None)
    failed, done = [], []
    good = run_to_dict(short_ladder_runs(view.fingerprint, [0])[0])
    bad = {"run": {**good, "no_such_field": 1}, "data": None}
    run_on_ray(
        [bad, {"run": good, "data": None, "threads": 1}],
        [{"num_cpus": 1}, {"num_cpus": 1}],
        address=ray_address,
        corpus=view.corpus,
        on_done=done.append,
        on_failed=lambda t, e: failed.append(e),
        at_once=1,  # one in flight: the second waits for the first to fail
    )
    assert len(failed) == 1 and "no_such_field" in failed[0]
    assert [r["key"] for r in done] == [short_ladder_runs(view.fingerprint, [0])[0].key]
    assert not (tmp_path / "runs.jsonl").exists()  # a worker writes no record: the driver does
    with pytest.raises(InputError, match="gpu: '1 per run' is not allowed.*has 0"):
        run_on_ray(  # the test cluster has no GPU: refused, not left waiting
            [bad],
            [{"num_cpus": 1, "num_gpus": 1}],
            address=ray_address,
            corpus=view.corpus,
            on_done=done.append,
            on_failed=lambda t, e: None,
        )

    run = short_ladder_runs(view.fingerprint, [7])[0]
    planned = lp.PlannedRun(run)
    plan = replace(lp.make_plan(lp.TINY, hw=None, workers=1, threads=1), runs=(planned,))
    job = TrainJob(
        plan=plan,
        view=view,
        data=None,
        runs_path=tmp_path / "runs.jsonl",
        out_dir=tmp_path,
        workers=2,
        threads=1,
        power_w=10.0,
        backend="ray",
        address=ray_address,
        dispatch={"runs": [{"key": run.key, "resources": {"num_cpus": 1, "num_gpus": 0}}]},
    )
    by_key: dict = {}
    warnings: list[str] = []
    _train_on_cluster(job, [planned, planned], by_key, LadderProgress(False, 2), warnings)
    got = read_records(tmp_path / "runs.jsonl")
    assert [r["key"] for r in got.records] == [run.key] and warnings == []
    assert got.records[0]["loss"] > 0 and got.records[0]["run"]["device"] == "cpu"


# ------------------------------------------------------------------ the tiny ladder on Ray


def _ladder_args(out: Path) -> list[str]:
    return ["--tiny", "--out", str(out), "--bootstrap", "20", "--json"]


#: runs the Ray driver trains itself (the cheapest by N·D); the others are the local ladder's records,
#: copied in as a resumed ladder would find them
ON_RAY = 4


def _seed_with_local_records(local_runs: Path, out: Path) -> set[str]:
    """Copy the local ladder's records of all but its ``ON_RAY`` cheapest runs (N·D) into ``out``'s
    runs.jsonl; the keys left for the Ray driver to train."""
    lines = [ln for ln in local_runs.read_text().splitlines() if ln.strip()]
    recs = sorted((json.loads(ln) for ln in lines), key=lambda r: r["N"] * r["D"])
    out.mkdir(parents=True)
    keep = recs[ON_RAY:]
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
    return {r["key"] for r in recs[:ON_RAY]}


@pytest.mark.slow
def test_tiny_ladder_on_ray_killed_resumed_and_equal_to_local(tmp_path, ray_address, tiny_ladder):
    """`ladder --tiny --backend ray` on a ladder directory holding the local ladder's records of its
    six costliest runs: the driver is killed (SIGKILL) once it has recorded a run of its own, the same
    command completes it with each run recorded exactly once; the four runs trained on Ray have the
    local backend's losses on the same seeds (1e-6), the law is the same and the held-out run is inside
    its band (the local ladder: conftest.tiny_ladder, trained once for the session)."""
    save_stated_cpu_profile()  # the drivers predict from it, and measure nothing
    out = tmp_path / "ray"
    on_ray = _seed_with_local_records(tiny_ladder.runs, out)
    seeded = 10 - ON_RAY
    cmd = [sys.executable, "-m", "trilemma.cli", "ladder", *_ladder_args(out)]
    cmd += ["--backend", "ray", "--address", ray_address]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    runs = out / "runs.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and runs.read_bytes().count(b"\n") < seeded + 1:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    before = read_records(runs)
    assert proc.returncode == -signal.SIGKILL and seeded + 1 <= len(before.records) < 10

    r = subprocess.run([*cmd, "--progress-json"], capture_output=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    ray_doc = json.loads(r.stdout)
    events = [json.loads(ln) for ln in r.stderr.decode().splitlines() if ln.startswith("{")]
    assert [e["done"] for e in events] == list(range(1, 11 - len(before.records)))
    assert {e["event"] for e in events} == {"run_done"} and events[-1]["remaining_s"] == 0
    assert all(a["remaining_s"] >= b["remaining_s"] for a, b in itertools.pairwise(events))
    ray_s = time.perf_counter() - t0
    keys = [x["key"] for x in read_records(runs).records]
    assert len(keys) == len(set(keys)) == 10  # each run exactly once: none lost, none repeated
    assert runs.read_bytes().count(b"\n") == 10
    assert ray_doc["complete"] and ray_doc["totals"]["resumed"] == len(before.records)
    assert ray_doc["totals"]["trained_now"] == 10 - len(before.records)
    ho = ray_doc["held_out"]
    assert ho["low"] <= ho["measured"] <= ho["high"] and ho["within_band"]

    local = tiny_ladder.result  # the local ladder on the same seeds (conftest.tiny_ladder)
    assert local.exit_code == 0, local.output
    local_doc = json.loads(local.stdout)
    ray_loss = {x["key"]: x["loss"] for x in ray_doc["runs"]}
    local_loss = {x["key"]: x["loss"] for x in local_doc["runs"]}
    assert ray_loss.keys() == local_loss.keys() and len(ray_loss) == 10
    trained_on_ray = {x["key"] for x in read_records(runs).records[seeded:]}
    assert trained_on_ray == on_ray  # the runs compared below were trained by Ray's workers
    for k in on_ray:
        assert abs(ray_loss[k] - local_loss[k]) <= 1e-6, (k, ray_loss[k], local_loss[k])
    for name in ("E", "A", "B", "alpha", "beta"):  # the same law
        v = local_doc["fit"]["law"][name]
        assert ray_doc["fit"]["law"][name] == pytest.approx(v, rel=1e-5)
    assert ho["predicted"] == pytest.approx(local_doc["held_out"]["predicted"], rel=1e-5)
    print(f"\nray ladder (killed, resumed) {ray_s:.1f} s")
