"""The software stack as a lever (`--stack NAME`): each preset of presets/stacks.toml states every
feature with the line it is cited from, the stack sets the plan fields it decides where no flag
gave them (a flag given wins), it reaches estimate's and solve's JSON, `trilemma presets` lists it,
and an unknown name is one line, the same from the CLI, the web API, a scenario file and Python."""

from __future__ import annotations

import json
import re
import sys

import pytest
from clitools import run

from trilemma.api import estimate, presets, solve
from trilemma.errors import InputError
from trilemma.presets import stack, stacks
from trilemma.request import EstimateRequest
from trilemma.specs.stack import StackSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FEATURES = tuple(StackSpec(name="x").features)
PLAN = ["-m", "llama2-7b", "-g", "h100-sxm", "-n", "64", "-t", "100B"]
SOLVE = ["--deadline", "30d", "--budget", "$2M", "--params", "1B..3B", "--gpu", "h100-sxm"]
BAD = "torchtitn"


def _raw() -> dict:
    from importlib import resources

    text = resources.files("trilemma.presets").joinpath("stacks.toml").read_text("utf-8")
    return tomllib.loads(text)


def _estimate_json(capsys, *flags: str) -> dict:
    code, out, err = run(capsys, "estimate", *PLAN, *flags, "--json")
    assert code == 0 and err == "", err
    return json.loads(out)


def test_every_row_stack_name_is_a_preset_stating_every_feature_with_a_dated_source():
    """The names the calibration rows may carry are exactly the presets; no preset leans on
    StackSpec's defaults, and each source cites a dated commit or a paper."""
    from trilemma.validate.columns import STACKS

    assert tuple(stacks()) == STACKS
    for name, table in _raw().items():
        assert set(FEATURES) <= set(table), (name, set(FEATURES) - set(table))
        assert re.search(r"@20\d\d-\d\d-\d\d|arXiv \d{4}\.\d{5}", table["source"]), name
        assert stacks()[name].features == {k: table[k] for k in FEATURES}


#: (stack, feature, value, the cited line its source must quote)
CITED = [
    ("megatron-lm", "attention", "fused-softmax", "dest='masked_softmax_fusion'"),
    ("megatron-lm", "distributed_optimizer", False, "optimizer' action='store_true'"),
    ("megatron-lm", "dp_overlap", False, "'--DDP-impl' default='local'"),
    ("megatron-core", "tp_overlap", True, "tensor-parallel (--tp-comm-overlap)"),
    ("megatron-core", "pp_overlap", True, "dest='overlap_p2p_comm'"),
    ("gpt-neox", "attention", "flash1", '"attention_config": [[["flash"], 24]]'),
    ("torchtitan", "host", "eager", "compile = false"),
    ("torchtitan", "tp_overlap", False, 'async_tensor_parallel" default=False'),
    ("llm-foundry", "fused_loss", True, "'fused_crossentropy'"),
    ("hf-trainer", "fused_loss", False, "logits = logits.float()"),
    ("hf-trainer", "attention", "flash2", 'applicable_attention = "sdpa"'),
    ("nanogpt", "host", "compile", "compile = True"),
    ("llm.c", "attention", "flash2", "Flash Attention from cuDNN"),
    ("llm.c", "fused_loss", True, "fused_classifier"),
    ("metaseq", "attention", "fused-softmax", "ScaledUpperTriangMaskedSoftmax"),
    ("megatron-deepspeed", "distributed_optimizer", True, "its own zero stage 1 equivalent"),
    ("meta-llama", "pp_overlap", True, "asynchronous point-to-point communication"),
    ("meta-llama-2023", "attention", "flash1", "(cutlass.FwOp, flash.BwOp)"),
    ("tinyllama", "attention", "flash2", "from flash_attn import flash_attn_func"),
    ("tinyllama", "fused_loss", True, "loss_func = FusedCrossEntropyLoss()"),
    ("hai-llm", "ep_node_limit", 4, "dispatched to at most 4 nodes"),
    ("hai-llm", "ep_overlap", True, "and PP communication can be fully hidden"),
    ("hai-llm", "pp_dualpipe", True, "DualPipe (PP/2 - 1)(F&B + B - 3W)"),
    ("hai-llm", "ep_fp8_dispatch", True, "MoE up-projections into FP8 and then apply dispatch"),
]


@pytest.mark.parametrize(
    ("name", "feature", "value", "line"), CITED, ids=[f"{c[0]}.{c[1]}" for c in CITED]
)
def test_a_feature_is_what_its_cited_line_states(name, feature, value, line):
    st = stack(name)
    assert st.features[feature] == value
    assert line in st.source


def test_a_stack_is_found_by_alias_in_any_case_and_a_spec_passes_through():
    assert stack("TorchTitan").name == "torchtitan"
    assert stack("mcore").name == "megatron-core"
    assert stack("LLMC").name == "llm.c"
    assert stack(stack("nanogpt")) is stack("nanogpt")


def test_no_stack_leaves_the_plan_as_without_the_lever(capsys):
    """Without --stack the plan fields keep TrainingPlan's defaults and the stack is named
    'default', not given."""
    assert all(v is None for v in EstimateRequest().plan_flags().values())
    plan = _estimate_json(capsys)["plan"]
    assert plan["stack"]["name"] == "default" and plan["stack"]["given"] is False
    assert plan["stack"]["overrides"] == {}
    assert (plan["flash_attention"], plan["softmax_passes"], plan["fused_loss"]) == (True, 1, False)
    assert (plan["compile"], plan["async_tp"]) == (False, False)


def test_the_stack_reaches_the_estimate_json(capsys):
    plan = _estimate_json(capsys, "--stack", "torchtitan")["plan"]
    assert plan["stack"]["name"] == "torchtitan" and plan["stack"]["given"] is True
    assert plan["stack"]["features"] == stack("torchtitan").features
    assert "torchtitan" in plan["stack"]["source"]


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("megatron-lm", {"flash_attention": False, "softmax_passes": 1, "fused_loss": True}),
        ("pytorch-eager", {"flash_attention": False, "softmax_passes": 3, "fused_loss": False}),
        ("nanogpt", {"flash_attention": True, "compile": True}),
        ("megatron-core", {"flash_attention": True, "async_tp": True, "fused_loss": True}),
    ],
)
def test_the_stack_sets_the_plan_fields_it_decides(name, fields):
    plan = estimate("llama2-7b", "h100-sxm", 64, tokens=1e11, stack=name).plan
    assert plan.stack == stack(name)
    assert {k: getattr(plan, k) for k in fields} == fields


def test_a_flag_given_overrides_the_stacks_feature(capsys):
    """--stack megatron-lm --flash: FlashAttention on, named as the flag's override; the stack's
    other fields stay its own."""
    plan = _estimate_json(capsys, "--stack", "megatron-lm", "--flash")["plan"]
    assert plan["flash_attention"] is True and plan["fused_loss"] is True
    assert plan["stack"]["overrides"] == {"flash_attention": True}
    assert plan["stack"]["features"]["attention"] == "fused-softmax"
    plan = _estimate_json(capsys, "--stack", "nanogpt", "--no-compile")["plan"]
    assert plan["compile"] is False and plan["stack"]["overrides"] == {"compile": False}


def test_the_human_output_names_the_stack(capsys):
    code, out, _ = run(capsys, "estimate", *PLAN, "--stack", "megatron-lm", "--flash")
    assert code == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("stack"))
    assert "megatron-lm" in row and "fused-softmax" in row and "flash_attention True" in row


def test_solve_runs_every_plan_on_the_stack(capsys):
    code, out, err = run(capsys, "solve", *SOLVE, "--stack", "nanogpt", "--json")
    assert code == 0, err
    plan = json.loads(out)["optimum"]["plan"]
    assert plan["stack"]["name"] == "nanogpt" and plan["compile"] is True
    r = solve(deadline="30d", budget="$2M", params="1B..3B", gpu="h100-sxm", stack="megatron-lm")
    assert r.optimum.plan.stack == stack("megatron-lm") and not r.optimum.plan.flash_attention


def test_presets_list_the_stacks_with_their_features(capsys):
    code, out, _ = run(capsys, "presets", "stacks", "--json")
    assert code == 0
    listed = json.loads(out)["stacks"]
    assert [s["name"] for s in listed] == list(stacks())
    assert all(s["features"] == stacks()[s["name"]].features and s["source"] for s in listed)
    assert [s["name"] for s in presets(kind="all")["stacks"]] == list(stacks())
    code, out, _ = run(capsys, "presets", "stacks")
    assert code == 0 and "megatron-core" in out and "fused-softmax" in out


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trilemma.web import app as web

    with TestClient(web.create_app(), raise_server_exceptions=False) as c:
        yield c


def test_the_web_api_takes_the_stack_and_the_page_offers_it(client):
    body = {"model": "llama2-7b", "gpu": "h100-sxm", "gpus": 64, "tokens": "100B"}
    r = client.post("/api/estimate", json={**body, "stack": "llm.c"})
    assert r.status_code == 200 and r.json()["plan"]["stack"]["name"] == "llm.c"
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for request in ("EstimateRequest", "SolveRequest"):  # the page's "More inputs" come from these
        assert "stack" in schemas[request]["properties"]


def test_an_unknown_stack_is_the_same_one_line_at_every_door(capsys, client, tmp_path):
    code, out, err = run(capsys, "estimate", *PLAN, "--stack", BAD, "--json")
    assert code == 2 and out == "" and err.count("\n") == 1
    line = err.removeprefix("trilemma: error: ").rstrip("\n")
    assert line.startswith(f"stack: '{BAD}' is not allowed; expected one of ")
    assert all(name in line for name in stacks()) and "did you mean torchtitan" in line
    with pytest.raises(InputError) as exc:
        estimate("llama2-7b", "h100-sxm", 64, tokens=1e11, stack=BAD)
    assert str(exc.value) == line
    with pytest.raises(InputError) as exc:
        solve(deadline="30d", budget="$2M", stack=BAD)
    assert str(exc.value) == line
    r = client.post("/api/estimate", json={"stack": BAD})
    assert r.status_code == 422 and (r.json()["field"], r.json()["error"]) == ("stack", line)
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(f'deadline = "30d"\nbudget = "$2M"\nstack = "{BAD}"\n', "utf-8")
    assert run(capsys, "solve", str(scenario), "--json") == (2, "", f"trilemma: error: {line}\n")
    code, _, err = run(capsys, "solve", *SOLVE, "--stack", BAD)
    assert (code, err) == (2, f"trilemma: error: {line}\n")
