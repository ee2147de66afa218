"""Distillation from an existing teacher (solve --distill): the teacher's forward and weights by hand, the
student's loss model's properties, the solver's choice on the on-device scenario, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from clitools import run

from trilemma.api import estimate_plan, make_cluster
from trilemma.errors import InputError
from trilemma.quality.distill import TOKEN_SAVING, distilled_loss_fn, teacher_loss, teacher_spec
from trilemma.resolve import make_plan, resolve_model
from trilemma.solve.inputs import law_fn

#: Llama 3.1 8B's published parameter count (meta-llama/Llama-3.1-8B, model card / safetensors index)
LLAMA31_8B = 8_030_261_248
#: Besiroglu et al. 2024 (arXiv 2404.10102) Table: E, A, alpha, B, beta, rounded as the paper prints them
E, A, ALPHA, B, BETA = 1.8172, 482.01, 0.3478, 2085.43, 0.3658


def test_teacher_forward_and_weights_by_hand():
    """Llama 3.2 1B distilled from Llama 3.1 8B on 8 H100s at TP 2: the teacher's forward adds 2·N_T FLOPs to
    the student's 6·N_S per token, so the busy time grows by 1 + N_T / (3·N_S) at the same layout; its 16-bit
    weights add 2 bytes × 8,030,261,248 / TP 2 = 8.03 GB per GPU (ZeRO-1: not split over data ranks)."""
    m = resolve_model("llama3.2-1b")[0]
    cl = make_cluster("h100", 8)
    lay = {"tp": 2, "pp": 1, "dp": 4, "zero": 1, "micro_batch": 1, "recompute": "none"}
    t = teacher_spec("llama3.1-8b")
    assert t.teacher_params == LLAMA31_8B and t.teacher_tokens == pytest.approx(15e12)
    a = estimate_plan(m, cl, make_plan(m, "10B", 2048, "1M", "bf16"), lay)
    b = estimate_plan(m, cl, make_plan(m, "10B", 2048, "1M", "bf16", distill=t), lay)
    assert b.time.busy_s / a.time.busy_s == pytest.approx(1 + LLAMA31_8B / (3 * a.params.total))
    assert b.memory.teacher == pytest.approx(2 * LLAMA31_8B / 2)
    assert b.memory.per_gpu_bytes - a.memory.per_gpu_bytes == pytest.approx(LLAMA31_8B, rel=1e-9)


def test_student_loss_model():
    """The teacher's loss by hand on Besiroglu et al.'s law (N = 8.03B, D = 15T): E + A/N^α + B/D^β = 2.021;
    a distilled student reads the law at 40× its tokens, never below the teacher's loss, and a teacher no
    larger than the student saves nothing."""
    t = teacher_spec("llama3.1-8b")
    by_hand = E + A / LLAMA31_8B**ALPHA + B / 15e12**BETA
    assert teacher_loss("besiroglu2024", t) == pytest.approx(by_hand, abs=2e-3)
    plain = law_fn("besiroglu2024", None)
    fn = distilled_loss_fn(plain, "besiroglu2024", t)
    n = np.array([5e8, 5e8, 1e10])
    d = np.array([1e11, 1e14, 1e11])
    prec = np.array(["bf16"] * 3)
    got = fn(n, n, d, prec)
    assert got[0] == pytest.approx(plain(n[:1], n[:1], TOKEN_SAVING * d[:1], prec[:1])[0])
    assert np.all(
        got >= by_hand - 2e-3
    )  # 500M on 100T effective tokens would pass the teacher: floored
    assert got[2] == pytest.approx(
        plain(n[2:], n[2:], d[2:], prec[2:])[0]
    )  # 10B student, 8B teacher


def test_no_saving_below_minitrons_tokens_per_parameter():
    """Minitron measured its saving retraining an 8B student on 94B tokens, 11.75 a parameter: a 3B student
    on 1.5B tokens (0.5 a parameter) reads the law at its own tokens, one on 36B (12 a parameter) at 40×."""
    t = teacher_spec("llama3.1-8b")
    plain = law_fn("besiroglu2024", None)
    fn = distilled_loss_fn(plain, "besiroglu2024", t)
    n = np.array([3e9, 3e9])
    d = np.array([1.5e9, 36e9])
    prec = np.array(["bf16"] * 2)
    got = fn(n, n, d, prec)
    assert 94e9 / 8e9 == pytest.approx(11.75)
    assert got[0] == pytest.approx(plain(n[:1], n[:1], d[:1], prec[:1])[0])
    assert got[1] == pytest.approx(plain(n[1:], n[1:], TOKEN_SAVING * d[1:], prec[1:])[0])


def test_solve_on_device_picks_distillation(capsys):
    """The on-device scenario (10T tokens served on iPhone 15 Pros) with distill = llama3.1-8b
    (examples/scenarios/on-device-distilled.toml): the smaller
    distilled student reaches loss 2.3 and its lifetime cost is below training from scratch, which stays as a
    runner-up; the plan names the teacher, holds its weights in memory and still prints the phone's energy
    per answer and answers per charge."""
    code, out, _ = run(capsys, "solve", "examples/scenarios/on-device-distilled.toml", "--json")
    assert code == 0
    doc = json.loads(out)
    opt = doc["optimum"]
    assert opt["plan"]["distill"]["teacher"] == "llama3.1-8b"
    assert opt["memory"]["other_parts"]["teacher"] > 0
    assert opt["deploy"]["energy_per_answer_j"] > 0
    # answers per charge of the iPhone 15 Pro's 12.70 Wh cell (China's regulatory database, 2023-09), by hand
    per_charge = 12.70 * 3600 / opt["deploy"]["energy_per_answer_j"]
    assert opt["deploy"]["answers_per_charge"] == pytest.approx(per_charge, rel=1e-12)
    scratch = [r for r in doc["runners_up"] if r["differs_in"] == "trained from scratch"]
    assert len(scratch) == 1
    assert scratch[0]["model"]["params_total"] > opt["model"]["params_total"]
    assert doc["optimum"]["loss"]["mean"] <= 2.3 + 1e-9
    note = next(
        w
        for w in doc["warnings"]
        if w.startswith("distillation: distilled from llama3.1-8b is the optimum")
    )
    # the gap to the larger model: the teacher's published MMLU, 66.9 5-shot (OLMo 2 13B model card's
    # evaluation table, Llama 3.1 8B row), beside the student's band, whose top is below it
    assert "the teacher llama3.1-8b's published scores: MMLU 66.9 (5-shot)" in note
    mmlu = next(i for i in opt["quality"]["benchmarks"]["items"] if i["name"] == "mmlu")
    assert mmlu["high"] < 0.669


#: the same plan asked of each verb: solve's pins, estimate's plan (every flag by its Python name)
VERBS = {
    "solve": {"deadline": "14d", "target_loss": 2.3},
    "estimate": {"model": "llama3.2-1b", "gpu": "h100", "gpus": 8, "tokens": "10B"},
}


def _flags(fields: dict) -> list[str]:
    return [x for k, v in fields.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def _refusals(capsys, tmp_path, verb: str, fields: dict) -> list[str]:
    """The one line (without the program's prefix) each entry point of ``verb`` refuses ``fields`` with: the
    CLI (exit 2), a scenario file (solve's), the Python API and the web API (422)."""
    from trilemma import api

    code, _, err = run(capsys, verb, *_flags(fields))
    assert code == 2 and err.count("\n") == 1
    lines = [err.removeprefix("trilemma: error: ").strip()]
    if verb == "solve":
        scenario = tmp_path / "s.toml"
        scenario.write_text(
            "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()), encoding="utf-8"
        )
        code, _, err = run(capsys, "solve", str(scenario))
        assert code == 2
        lines.append(err.removeprefix("trilemma: error: ").strip())
    with pytest.raises(InputError) as e:
        getattr(api, verb)(**fields) if verb == "solve" else api.estimate(
            api.EstimateRequest(**fields)
        )
    lines.append(str(e.value))
    testclient = pytest.importorskip("fastapi.testclient")
    from trilemma.web.app import create_app

    with testclient.TestClient(create_app(), raise_server_exceptions=False) as c:
        r = c.post(f"/api/{verb}", json=fields)
    assert r.status_code == 422
    return [*lines, r.json()["error"]]


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("value", ["nonsense", "3B"])
def test_bad_teacher_is_one_line(capsys, tmp_path, verb, value):
    """An unknown teacher, or one with no published training tokens, is the same one line naming distill from
    every entry point of solve and estimate."""
    lines = _refusals(capsys, tmp_path, verb, {**VERBS[verb], "distill": value})
    assert lines[0].startswith("distill: ") and set(lines) == {lines[0]}


@pytest.fixture(scope="module")
def break_even():
    """Llama 3.2 1B to loss 2.3 on up to 8 H100s, from scratch or distilled from Llama 3.1 8B at a 5× saving."""
    from trilemma.solve import solve

    pins = {
        "deadline": "30d",
        "target_loss": 2.3,
        "model": "llama3.2-1b",
        "gpu": "h100",
        "max_gpus": 8,
    }
    return solve(**pins, distill="llama3.1-8b", distill_saving=5, want_frontier=False)


def test_break_even_saving_by_hand(break_even):
    """Llama 3.2 1B (1,235,814,400 parameters) to loss 2.3 on 8 H100s, distilled from Llama 3.1 8B at a 5×
    token saving: it trains on a fifth of the tokens from scratch, each at 1 + N_T / (3·N_S) = 3.166× the
    compute, so its dollars are 3.166 / 5 = 0.633 of training from scratch (distillation pays once the
    saving passes 3.166); the scratch plan stays as a runner-up."""
    r = break_even
    opt = r.optimum
    scratch = next(e for why, e, _ in r.runners_up if why == "trained from scratch")
    assert opt.plan.distill.token_saving == 5.0 and scratch.plan.distill is None
    assert scratch.plan.total_tokens / opt.plan.total_tokens == pytest.approx(5.0, rel=1e-6)
    by_hand = (1 + LLAMA31_8B / (3 * 1_235_814_400)) / 5
    assert opt.cost.usd / scratch.cost.usd == pytest.approx(by_hand, rel=0.01)


def test_estimate_reads_solves_distilled_plan_the_same(capsys, break_even):
    """`trilemma estimate` of the break-even solve's distilled optimum (its GPUs, tokens, batch and layout
    pinned, --distill llama3.1-8b --distill-saving 5) gives solve's time, dollars, teacher memory and loss,
    and prints the teacher's line and note."""
    o = break_even.optimum
    lay = o.layout
    flags = {
        "model": "llama3.2-1b",
        "gpu": "h100",
        "gpus": o.cluster.n_gpus,
        "tokens": repr(o.plan.total_tokens),
        "seq": o.plan.stages[0].seq_len,
        "global-batch": f"{o.plan.stages[0].global_batch_tokens:.0f}",
        "tp": lay.tp,
        "pp": lay.pp,
        "zero": int(lay.zero),
        "micro-batch": lay.micro_batch,
        "recompute": str(lay.recompute),
        "distill": "llama3.1-8b",
        "distill-saving": 5,
    }
    code, out, _ = run(capsys, "estimate", *_flags(flags), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["plan"]["distill"] == o.plan.distill.model_dump()
    assert doc["time"]["total_s"] == pytest.approx(o.time.total_s, rel=1e-6)
    assert doc["cost"]["usd"] == pytest.approx(o.cost.usd, rel=1e-6)
    assert doc["memory"]["other_parts"]["teacher"] == pytest.approx(o.memory.teacher, rel=1e-9)
    assert doc["loss"]["mean"] == pytest.approx(break_even.optimum_loss.mean, rel=1e-6)
    assert any(w.startswith("distillation: the teacher's forward") for w in doc["warnings"])
    assert any(
        w.startswith("quality: the teacher llama3.1-8b's published scores: MMLU 66.9 (5-shot)")
        for w in doc["warnings"]
    )
    code, out, _ = run(capsys, "estimate", *_flags(flags))
    assert code == 0 and "training: distilled from llama3.1-8b (8.03B parameters" in out


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize(
    ("extra", "allowed"),
    [
        ({"distill": "llama3.1-8b", "distill_saving": 41}, "from 1 (no saving) to 40"),
        ({"distill": "llama3.1-8b", "distill_saving": 0.5}, "from 1 (no saving) to 40"),
        ({"distill_saving": 5}, "only with --distill TEACHER"),
    ],
)
def test_bad_saving_is_one_line(capsys, tmp_path, verb, extra, allowed):
    """--distill-saving out of 1–40, or without --distill, is the same one line naming it from every entry
    point of solve and estimate."""
    lines = _refusals(capsys, tmp_path, verb, {**VERBS[verb], **extra})
    assert lines[0].startswith("distill-saving: ") and allowed in lines[0]
    assert set(lines) == {lines[0]}


def test_estimate_reads_a_distilled_plan_at_its_worth():
    """The Python estimate of Llama 3.2 1B distilled from Llama 3.1 8B on 20B tokens (16 a parameter, inside
    Minitron's regime) reads the law (and the benchmark fit) at 40 × 20B = 800B tokens, the same as training
    it from scratch on 800B tokens; the teacher is not below it, so no floor."""
    from trilemma.api import estimate

    m = resolve_model("llama3.2-1b")[0]
    t = teacher_spec("llama3.1-8b")
    distilled = estimate(m, "h100", 8, plan=make_plan(m, "20B", 2048, "1M", "bf16", distill=t))
    scratch = estimate(m, "h100", 8, plan=make_plan(m, "800B", 2048, "1M", "bf16"))
    assert distilled.loss.mean == pytest.approx(scratch.loss.mean, rel=1e-9)
    assert distilled.benchmarks["average"]["value"] == pytest.approx(
        scratch.benchmarks["average"]["value"], rel=1e-9
    )
    assert distilled.loss.mean > teacher_loss(None, t)
