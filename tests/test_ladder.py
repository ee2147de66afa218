"""`trilemma ladder`: the records file (atomic appends from two processes, corrupt lines), the plan's
rules, resume and Ctrl-C with a fake trainer, a real pool of two workers, and the tiny ladder end to end.

Every test writes to temporary directories and its own config directory (no `local` profile unless
the test makes one).
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing as mp
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clitools import ladder_cli

from trilemma.errors import InputError
from trilemma.ladder import choose
from trilemma.ladder import plan as lp
from trilemma.ladder.records import SCHEMA, append_record, encode_record, read_records
from trilemma.request import LadderRequest


@pytest.fixture(autouse=True)
def config_dir(tmp_path_factory, monkeypatch):
    d = tmp_path_factory.mktemp("trilemma-config")
    monkeypatch.setenv("TRILEMMA_CONFIG_DIR", str(d))
    return d


def record(key: str, pad: int = 0, **extra) -> dict:
    return {
        "schema": SCHEMA,
        "key": key,
        "role": "fit",
        "N": 1000,
        "D": 5000,
        "loss": 2.5,
        "pad": "x" * pad,
        **extra,
    }


# ------------------------------------------------------------------ the records file


def test_append_and_read_back(tmp_path):
    p = tmp_path / "runs.jsonl"
    for i in range(3):
        append_record(p, record(f"k{i}"))
    raw = p.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 3
    got = read_records(p)
    assert [r["key"] for r in got.records] == ["k0", "k1", "k2"] and got.warnings == ()


def test_encode_refuses_what_would_not_read_back():
    with pytest.raises(ValueError):
        encode_record(
            {"schema": "trilemma.probe/1", "key": "k", "role": "fit", "N": 1, "D": 1, "loss": 1}
        )
    with pytest.raises(ValueError):
        encode_record(record("k", loss=math.nan))
    assert encode_record(record("k", note="two\nlines")).count(b"\n") == 1


def _writer(path: str, tag: str, n: int, pad: int) -> None:
    for i in range(n):
        append_record(path, record(f"{tag}-{i}", pad=pad))


def test_atomic_append_two_processes(tmp_path):
    """Two processes append 150 records of ~100 kB each at the same time: every line whole, none lost."""
    p = tmp_path / "runs.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(p), tag, 150, 100_000)) for tag in ("a", "b")]
    for q in procs:
        q.start()
    for q in procs:
        q.join(60)
        assert q.exitcode == 0
    lines = p.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 301
    got = read_records(p)
    assert got.warnings == ()
    keys = [r["key"] for r in got.records]
    assert sorted(keys) == sorted([f"a-{i}" for i in range(150)] + [f"b-{i}" for i in range(150)])
    for tag in ("a", "b"):  # each writer's records in its own order
        mine = [k for k in keys if k.startswith(tag)]
        assert mine == [f"{tag}-{i}" for i in range(150)]


def test_corrupt_and_foreign_lines_are_skipped_with_warnings(tmp_path):
    p = tmp_path / "runs.jsonl"
    append_record(p, record("good-1"))
    with p.open("ab") as fh:
        fh.write(b"{not json at all\n")
        fh.write(json.dumps({"schema": "trilemma.probe/1", "x": 1}).encode() + b"\n")
        fh.write(b"[1, 2, 3]\n")
        fh.write(b"\n")
        fh.write(json.dumps(record("bad-n", N=-3)).encode() + b"\n")
        fh.write(b'{"schema": "trilemma.ladder/1", "key": "torn", "ro')  # a writer died mid-line
    got = read_records(p)
    assert [r["key"] for r in got.records] == ["good-1"]
    text = "\n".join(got.warnings)
    assert len(got.warnings) == 5
    assert (
        ":2: skipped a line that is not JSON" in text and ":3: skipped not a ladder record" in text
    )
    assert ":4: skipped not a JSON object" in text and "N is not a positive number" in text
    assert "unfinished last line" in text
    # the next record starts on a line of its own; the torn line stays one (skipped) line
    append_record(p, record("good-2"))
    got = read_records(p)
    assert [r["key"] for r in got.records] == ["good-1", "good-2"]
    assert any(":7: skipped a line that is not JSON" in w for w in got.warnings)


def test_missing_file_reads_empty(tmp_path):
    got = read_records(tmp_path / "none.jsonl")
    assert got.records == () and got.warnings == ()


# ------------------------------------------------------------------ the plan


def test_default_and_tiny_grids_follow_the_issue():
    for grid, min_runs in ((lp.DEFAULT, 6), (lp.TINY, 6)):
        plan = lp.make_plan(grid, hw=None, workers=1, threads=1)
        fit, held = plan.fit_runs, plan.held_out
        sizes = sorted({r.n for r in fit})
        assert len(fit) + 1 >= min_runs and len(fit) >= 5 and len(sizes) >= 3
        assert sizes[-1] < held.n <= 4 * sizes[-1]
        assert min(grid.ratios) <= held.tokens_per_param <= max(grid.ratios)
        for r in (*fit, held):
            assert r.tokens == r.steps * r.seq * r.batch_seqs
            assert abs(r.tokens / r.n - r.tokens_per_param) / r.tokens_per_param < 0.05
            assert 0 < r.warmup_steps < r.steps
        assert len({r.key for r in plan.fit_runs} | {held.key}) == len(plan.runs)


def test_lr_rule_and_schedule():
    from trilemma.ladder.train import lr_at

    assert lp.lr_for(2e4) > lp.lr_for(1e5) > lp.lr_for(5e5)
    run = lp.make_run("fit", lp.shape_for_width(32), 10.0)
    lrs = [lr_at(s, run) for s in range(run.steps)]
    assert lrs[run.warmup_steps - 1] == pytest.approx(run.lr)
    assert max(lrs) == pytest.approx(run.lr)
    assert lrs[-1] == pytest.approx(run.lr * run.lr_final_ratio)
    assert all(a >= b - 1e-15 for a, b in zip(lrs[run.warmup_steps :], lrs[run.warmup_steps + 1 :]))


def test_shape_rule_and_sizes():
    s = lp.shape_for_width(96)
    assert (s.layers, s.d_model, s.heads) == (6, 96, 6)
    assert lp.shape_for_width(32).layers == 2 and lp.shape_for_width(1024).heads == 8
    assert lp.shape_for_params(lp.params_of(s)) == s
    # by hand, non-embedding = layers·(4d² + 3·d·f + 2d) + d with f = 8·ceil(d/3) (SwiGLU, widths of 8):
    # 2x16: 2·(1024 + 3·16·48 + 32) + 16 = 6,736; 2x24: 2·(2304 + 3·24·64 + 48) + 24 = 13,944
    with pytest.raises(InputError, match=r"nearest: 6,736 \(2x16\)"):
        lp.shape_for_params(10)
    with pytest.raises(InputError, match=r"'10,000'.*nearest: 6,736 \(2x16\) and 13,944 \(2x24\)"):
        lp.shape_for_params(1e4)  # between two rungs, 25% from neither
    with pytest.raises(InputError):  # held out more than 4x the largest fitted size
        lp.make_plan(
            lp.GridChoice((16, 24, 32), (5.0, 20.0), 64, 10.0), hw=None, workers=1, threads=1
        )
    with pytest.raises(InputError):  # held-out ratio outside the grid
        lp.make_plan(
            lp.GridChoice((16, 24, 32), (5.0, 20.0), 48, 40.0), hw=None, workers=1, threads=1
        )


def _cpu_profile():
    from trilemma.specs import HardwareSpec

    # as `trilemma probe` writes a CPU's profile: with the GEMM curve it measured (a CPU has no GPU's tile
    # and wave quantisation, so small matmuls keep most of the peak), not the GPU-fitted constants
    return HardwareSpec(
        name="local",
        vendor="CPU",
        peak_flop_per_s={"fp32": 8e10},
        hbm_bytes=16e9,
        hbm_bw_bytes_per_s=2e10,
        intra_node_bw_bytes_per_s=2e9,
        inter_node_bw_bytes_per_s=2e9,
        devices_per_node=1,
        board_power_w=20.0,
        price_usd_per_hour=0.04,
        efficiency={"gemm_max": 0.9, "gemm_half_dim": 8.0, "balance_exponent": 0.0},
    )


def test_predicted_times_and_minutes():
    hw = _cpu_profile()
    one = lp.make_plan(lp.DEFAULT, hw=hw, workers=1, threads=2)
    two = lp.make_plan(lp.DEFAULT, hw=hw, workers=2, threads=1)
    assert all(p.predicted_s > 0 for p in one.runs)
    # a worker with half the machine takes up to twice as long per run (its matmuls and memory traffic
    # twice as long, the fixed per-kernel dispatch cost the same); the schedule overlaps them
    for a, b in zip(one.runs, two.runs):
        assert 1.5 * a.predicted_s < b.predicted_s <= 2 * a.predicted_s * (1 + 1e-9)
    longest = max(p.predicted_s for p in two.runs) + lp.STARTUP_S
    assert two.predicted_wall_s <= max(one.predicted_wall_s, longest) * 1.01
    small = choose.grid_for_minutes(3, hw=hw, workers=1)
    big = choose.grid_for_minutes(60, hw=hw, workers=1)
    assert small.held_out_width <= big.held_out_width
    assert lp.make_plan(small, hw=hw, workers=1, threads=1).predicted_wall_s <= 180
    with pytest.raises(InputError):
        choose.grid_for_minutes(0.01, hw=hw, workers=1)


# ------------------------------------------------------------------ resume and Ctrl-C (fake trainer)

LAW = {"E": 1.2, "A": 40.0, "B": 300.0, "alpha": 0.35, "beta": 0.45}


class FakeTrainer:
    """Stands in for trilemma.ladder.train.train: the loss of a known law, instantly; can be told to
    be interrupted (Ctrl-C) at its k-th call."""

    def __init__(self, interrupt_at: int | None = None) -> None:
        self.calls: list[str] = []
        self.interrupt_at = interrupt_at

    def __call__(self, run, view, threads=None, on_step=None):
        if self.interrupt_at is not None and len(self.calls) + 1 == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls.append(run.key)
        loss = LAW["E"] + LAW["A"] / run.n ** LAW["alpha"] + LAW["B"] / run.tokens ** LAW["beta"]
        return {
            "params_measured": run.params_total,
            "losses": [loss] * run.steps,
            "diverged": False,
            "eval_loss": loss,
            "eval_tokens": run.eval_tokens,
            "train_loss": loss,
            "train_s": 0.01,
            "eval_s": 0.001,
            "threads": 1,
            "torch": "fake",
            "started_at": "",
            "finished_at": "",
            "load_average_start": None,
            "load_average_end": None,
        }


@pytest.fixture
def fake(monkeypatch):
    import trilemma.ladder.run as run_mod
    import trilemma.ladder.train as train_mod

    monkeypatch.setattr(
        run_mod, "local_profile", lambda measure=True: (None, "no profile in this test")
    )

    def install(interrupt_at=None):
        t = FakeTrainer(interrupt_at)
        monkeypatch.setattr(train_mod, "train", t)
        return t

    return install


def test_resume_skips_finished_runs_and_interrupt_keeps_the_file_whole(tmp_path, fake):
    from trilemma.ladder import run_ladder
    from trilemma.ladder.training import LadderInterrupted

    out = tmp_path / "lad"
    t = fake(interrupt_at=4)
    with pytest.raises(LadderInterrupted) as exc:
        run_ladder(LadderRequest(out=out, tiny=True, bootstrap=20))
    assert exc.value.exit_code == 130 and "resume" in str(exc.value)
    got = read_records(out / "runs.jsonl")
    assert len(got.records) == 3 and got.warnings == ()
    assert [r["key"] for r in got.records] == t.calls

    t2 = fake()
    res = run_ladder(LadderRequest(out=out, tiny=True, bootstrap=20))
    assert len(t2.calls) == 7 and not set(t2.calls) & set(t.calls)  # none repeated
    keys = [r["key"] for r in read_records(out / "runs.jsonl").records]
    assert len(keys) == len(set(keys)) == 10
    assert res.complete and res.totals.resumed == 3 and res.totals.trained_now == 7
    # the law is the fake's law, so the held-out prediction is right
    assert abs(res.held_out.error) < 0.01
    assert (out / "law.toml").is_file() and (out / "ladder.json").is_file()

    t3 = fake()
    again = run_ladder(LadderRequest(out=out, tiny=True, bootstrap=20))
    assert t3.calls == [] and again.totals.resumed == 10
    assert again.held_out.predicted == pytest.approx(res.held_out.predicted)


def test_result_is_typed_reads_back_and_prints(tmp_path, fake, capsys):
    """ladder.json reads back into the same typed result; the schema is the type's; the printers run on it."""
    from trilemma.ladder import run_ladder
    from trilemma.ladder.result import LadderMachine, LadderResult, LadderTotals
    from trilemma.report.ladder import print_ladder

    fake()
    res = run_ladder(LadderRequest(out=tmp_path / "lad", tiny=True, bootstrap=20))
    assert isinstance(res.totals, LadderTotals) and isinstance(res.machine, LadderMachine)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.totals.finished = 0  # type: ignore[misc]
    doc = json.loads((tmp_path / "lad" / "ladder.json").read_text())
    assert doc["schema"] == LadderResult.SCHEMA == res.schema
    back = LadderResult.from_dict(doc)
    assert back.to_dict() == json.loads(json.dumps(res.to_dict(), default=str))
    assert back.totals.finished == back.totals.runs == len(back.runs)
    assert back.totals.cost_usd == pytest.approx(sum(r.cost_usd for r in back.runs))
    with pytest.raises(ValueError):
        LadderResult.from_dict({**doc, "schema": "trilemma.probe/1"})
    print_ladder(back)
    shown = capsys.readouterr().out
    assert all(r.shape in shown for r in back.runs) and back.held_out.shape in shown


def test_corrupt_line_is_reported_not_fatal(tmp_path, fake):
    from trilemma.ladder import run_ladder

    out = tmp_path / "lad"
    out.mkdir()
    (out / "runs.jsonl").write_bytes(b"garbage that is not json\n")
    fake()
    res = run_ladder(LadderRequest(out=out, tiny=True, bootstrap=10))
    assert res.complete
    assert any("runs.jsonl:1: skipped a line that is not JSON" in w for w in res.warnings)
    assert len(read_records(out / "runs.jsonl").records) == 10


def test_held_out_runs_after_the_prediction_in_one_process(tmp_path, fake):
    """workers=1: the fit runs, then the fit and prediction, then the held-out run."""
    import trilemma.ladder.training as training_mod
    from trilemma.ladder import run_ladder

    order = []
    real = training_mod.fit_and_predict

    def spy(plan, by_key, *a, **k):
        order.append(("fit", plan.held_out.key in by_key))
        return real(plan, by_key, *a, **k)

    t = fake()
    run_mod_fit = pytest.MonkeyPatch()
    run_mod_fit.setattr(training_mod, "fit_and_predict", spy)
    try:
        res = run_ladder(LadderRequest(out=tmp_path / "lad", tiny=True, bootstrap=10))
    finally:
        run_mod_fit.undo()
    assert order == [("fit", False)]
    assert t.calls[-1] == res.held_out.key


def test_bad_input(tmp_path, fake):
    from trilemma.ladder import run_ladder

    fake()
    with pytest.raises(InputError):
        run_ladder(LadderRequest(out=tmp_path / "x", tiny=True, sizes=[1e4, 2e4, 4e4, 8e4]))
    with pytest.raises(InputError, match="sizes"):  # 3 sizes: 2 left to fit after holding one out
        run_ladder(
            LadderRequest(
                out=tmp_path / "x",
                sizes=[lp.params_of(lp.shape_for_width(w)) for w in (24, 32, 40)],
            )
        )
    with pytest.raises(InputError):
        run_ladder(LadderRequest(out=tmp_path / "x", workers=99))
    with pytest.raises(InputError):
        run_ladder(LadderRequest(out=tmp_path / "x", minutes=5))  # no profile to size the grid with
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError):
        run_ladder(LadderRequest(out=tmp_path / "file", tiny=True))


# ------------------------------------------------------------------ real training


def test_import_does_not_import_torch():
    code = (
        "import sys, trilemma.cli_ladder, trilemma.ladder, trilemma.ladder.plan, trilemma.ladder.records; "
        "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pool_two_workers_real_training(tmp_path):
    """Three real (very short) runs on two worker processes: each appends its own record once."""
    pytest.importorskip("torch")
    from clitools import short_ladder_runs

    from trilemma.ladder.pool import run_pool
    from trilemma.ladder.train import corpus_view, run_to_dict

    view = corpus_view(None)
    runs = short_ladder_runs(view.fingerprint, range(3))
    out = tmp_path / "runs.jsonl"
    seen = []
    recs = run_pool(
        [
            {
                "run": run_to_dict(r),
                "predicted_s": None,
                "hardware": None,
                "power_w": 10.0,
                "out": str(out),
                "data": None,
            }
            for r in runs
        ],
        workers=2,
        threads=1,
        on_done=seen.append,
    )
    got = read_records(out)
    assert got.warnings == () and len(got.records) == 3 == len(recs) == len(seen)
    assert sorted(r["key"] for r in got.records) == sorted(r.key for r in runs)
    assert {r["run"]["worker"] for r in got.records} <= {0, 1}
    for r in got.records:
        assert r["environment"]["threads"] == 1 and r["loss"] > 0 and r["measured"]["energy_j"] > 0
        assert r["model"]["params_measured"] == r["model"]["params_total"]


def _cli(args):
    return ladder_cli(args)


@pytest.mark.slow
def test_tiny_ladder_interrupted_resumed_end_to_end(tiny_ladder):
    """The CI ladder, as a user meets it: Ctrl-C a real `trilemma ladder --tiny` mid-run (exit 130,
    whole lines only), then the same command completes it without losing or repeating a run: 10 real
    trainings in all, the fit, the held-out check, the law and the plot (conftest.tiny_ladder: one ladder
    trained once for the session, which keeps the suite's time down)."""
    out, png, runs = tiny_ladder.out, tiny_ladder.png, tiny_ladder.runs
    assert tiny_ladder.returncode == 130 and tiny_ladder.stdout == b""
    stderr = tiny_ladder.stderr
    assert b"resume" in stderr and stderr.count(b"\n") == 1
    before = tiny_ladder.before
    assert before.warnings == () and 2 <= len(before.records) < 10
    assert tiny_ladder.whole_lines

    r = tiny_ladder.result
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["schema"] == "trilemma.ladder.result/1" and isinstance(doc["warnings"], list)
    assert doc["complete"] and len(doc["runs"]) == 10
    assert doc["totals"]["resumed"] == len(before.records)
    assert doc["totals"]["trained_now"] == 10 - len(before.records)
    keys = [x["key"] for x in read_records(runs).records]
    assert len(keys) == len(set(keys)) == 10  # nothing lost, nothing repeated
    # its wall time is a figure (doc["totals"]["wall_s"], quoted in the README), not a timed assertion:
    # performance is measured by benchmarks, and a shared machine made this one flaky
    assert doc["totals"]["wall_s"] > 0
    ho = doc["held_out"]
    assert ho["measured"] > 0 and ho["low"] <= ho["predicted"] <= ho["high"]
    assert (
        math.isfinite(ho["error"]) and abs(ho["error"]) < 0.3
    )  # a figure, not a floor, for the tiny grid
    # the band is the parameter spread and the out-of-sample error: the held-out run lies inside
    assert ho["low"] <= ho["measured"] <= ho["high"] and ho["within_band"]
    lines = runs.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 11
    assert png.stat().st_size > 10_000
    # the law works where a published one does
    from trilemma.api import estimate

    est = estimate("gpt2-124m", "a100-80gb", 8, tokens=1e9, law=str(out / "law.toml"))
    assert est.loss.n_counts == "non_embedding" and est.loss.mean > 0
    # the same command again trains nothing
    again = json.loads(_cli(["--tiny", "--out", str(out), "--json"]).stdout)
    assert again["totals"]["trained_now"] == 0 and again["totals"]["resumed"] == 10
    assert again["held_out"]["measured"] == ho["measured"]


def test_dry_run_trains_and_fits_nothing(tmp_path, fake, monkeypatch):
    """`ladder --dry-run` ran the whole bootstrap refit (a minute) though it "trains nothing"."""
    import trilemma.ladder.training as training_mod
    from trilemma.ladder import run_ladder

    out = tmp_path / "lad"
    fake()
    run_ladder(LadderRequest(out=out, tiny=True, bootstrap=20))  # a finished ladder to look at
    t = fake()
    monkeypatch.setattr(
        training_mod, "fit_and_predict", lambda *a, **k: pytest.fail("a dry run fitted")
    )
    res = run_ladder(LadderRequest(out=out, tiny=True, bootstrap=20, dry_run=True))
    assert t.calls == [] and res.totals.resumed == 10


def _ladder_child(
    out: str, queue
) -> None:  # a second process: the test's fake trainer, the real lock
    import trilemma.ladder.run as run_mod
    import trilemma.ladder.train as train_mod
    from trilemma.ladder import run_ladder

    run_mod.local_profile = lambda measure=True: (None, "no profile in this test")
    t = FakeTrainer(None)
    slow = t.__call__

    def train(*a, **k):  # slow enough that the two processes overlap
        time.sleep(0.2)
        return slow(*a, **k)

    train_mod.train = train
    res = run_ladder(LadderRequest(out=out, tiny=True, bootstrap=20))
    queue.put((res.totals.trained_now, list(t.calls)))


def test_two_ladders_on_one_directory_never_train_a_run_twice(tmp_path):
    """Two ladder processes on the same directory at once (a fake trainer, the real
    file lock): the second waits for the first and resumes, so each of the ten runs is trained once."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    out = str(tmp_path / "lad")
    procs = [ctx.Process(target=_ladder_child, args=(out, q)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert sorted(n for n, _ in got) == [0, 10]
    keys = [r["key"] for r in read_records(Path(out) / "runs.jsonl").records]
    assert len(keys) == len(set(keys)) == 10
