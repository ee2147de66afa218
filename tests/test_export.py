"""`trilemma export`: the exported numbers agree with the plan (a property over random
plans, read back from each engine's own file), the files parse with the engines' own classes where
those install from PyPI on a CPU machine, and what an engine cannot express is a one-line error.

Engine checks (the `export` extra, in `dev`):
- torchtitan 0.2.2: its ConfigManager reads job.toml (unknown fields are an error there); the
  package's __init__ imports triton kernels (GPU-only), so the config subpackage is loaded without it.
- DeepSpeed 0.19.8: DeepSpeedConfig parses ds_config.json and checks train_batch_size = micro ×
  accumulation × data-parallel world size (its world size given through an mpu, as Megatron-DeepSpeed does).
- transformers 5.24 TrainingArguments, peft LoraConfig, BitsAndBytesConfig build from the JSON files
  (use_cpu=True: on a machine without a GPU TrainingArguments refuses bf16 otherwise).
- Megatron-LM's parser is not on PyPI (megatron-core ships without megatron/training): the script's
  arguments are parsed with its option table (tests/data/megatron_lm_args.tsv, generated from
  Megatron-LM commit d98e8a64 by scripts/megatron_flags.py), and megatron-core's TransformerConfig
  (PyPI 0.16.1) is built from them.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import shlex
import sys
import types
from pathlib import Path

import pytest
import tomllib
from clitools import run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trilemma.api import estimate
from trilemma.export import ExportError, FineTune, PlanNumbers, export
from trilemma.export import deepspeed as ds_export
from trilemma.export import hf as hf_export
from trilemma.export import megatron as mlm_export
from trilemma.export import torchtitan as tt_export
from trilemma.export import torchtitan_model as tt_model
from trilemma.resolve import make_plan, resolve_model
from trilemma.specs import Layout, Precision, Recompute, ZeroStage

DATA = Path(__file__).parent / "data"
LLAMA2_7B = resolve_model("llama2-7b")[0]


# ------------------------------------------------------------------ reading each engine's file back


def megatron_parser() -> argparse.ArgumentParser:
    """Megatron-LM's options (name, arity, choices) as an argparse parser that rejects anything else."""
    p = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False, add_help=False)
    for line in (DATA / "megatron_lm_args.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        flag, takes, choices = (line.split("\t") + [""])[:3]
        if takes == "0":
            p.add_argument(flag, action="store_true", dest=flag)
        else:
            p.add_argument(flag, dest=flag, choices=choices.split(",") if choices else None)
    return p


MEGATRON = megatron_parser()


def megatron_args(script: str) -> dict[str, object]:
    """pretrain_gpt.py's arguments in the launch script, parsed by Megatron-LM's option table."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    i = words.index("pretrain_gpt.py")
    ns, unknown = MEGATRON.parse_known_args(words[i + 1 :])
    assert not unknown, f"not Megatron-LM options: {unknown}"
    return {k: v for k, v in vars(ns).items() if v not in (None, False)}


def launcher(script: str) -> tuple[int, int]:
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    return int(words[words.index("--nnodes") + 1]), int(words[words.index("--nproc-per-node") + 1])


def engine_numbers(doc) -> dict[str, int]:
    """(GPUs, tp, pp, cp, dp, micro-batch, accumulation, global batch, steps) as the engine's own file
    states them; dp and accumulation derived the way the engine derives them."""
    cfg = doc.config
    if doc.engine == "megatron":
        a = megatron_args(doc.files["train_megatron.sh"])
        nodes, per = launcher(doc.files["train_megatron.sh"])
        gpus = nodes * per
        tp, pp = int(a["--tensor-model-parallel-size"]), int(a["--pipeline-model-parallel-size"])
        cp = int(a.get("--context-parallel-size", 1))
        dp = gpus // (tp * pp * cp)  # Megatron-LM: data_parallel_size = world / (tp · pp · cp)
        micro, batch = int(a["--micro-batch-size"]), int(a["--global-batch-size"])
        return dict(
            gpus=gpus,
            tp=tp,
            pp=pp,
            cp=cp,
            dp=dp,
            micro=micro,
            acc=batch // (micro * dp),
            batch=batch,
            steps=int(a["--train-iters"]),
            seq=int(a["--seq-length"]),
            rem=gpus % (tp * pp * cp),
        )
    if doc.engine == "torchtitan":
        t = tomllib.loads(doc.files["job.toml"])
        par, tr = t["parallelism"], t["training"]
        dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        pp = par["pipeline_parallel_degree"]
        local = tr["local_batch_size"]
        # torchtitan: accumulation = global / (local · dp); with a pipeline, local / pp micro-batch
        # size micro-batches run inside each accumulation step
        micro = par.get("pipeline_parallel_microbatch_size", local) if pp > 1 else local
        acc = tr["global_batch_size"] // (local * dp) * (local // micro)
        rem = (
            tr["global_batch_size"] % (local * dp) + local % micro
        )  # torchtitan asserts both divide
        gpus = dp * par["tensor_parallel_degree"] * pp * par["context_parallel_degree"]
        return dict(
            gpus=gpus,
            tp=par["tensor_parallel_degree"],
            pp=pp,
            cp=par["context_parallel_degree"],
            dp=dp,
            micro=micro,
            acc=acc,
            batch=tr["global_batch_size"],
            steps=tr["steps"],
            seq=tr["seq_len"],
            rem=rem,
        )
    if doc.engine == "deepspeed":
        launch, cfg = cfg["launcher"], cfg["ds_config"]
        tp = cfg.get("tensor_parallel", {}).get("autotp_size", 1)
        gpus = launch["nnodes"] * launch["nproc_per_node"]
        dp = gpus // tp  # DeepSpeed's data-parallel world: the processes over AutoTP's degree
        return dict(
            gpus=gpus,
            tp=tp,
            pp=1,
            cp=1,
            dp=dp,
            micro=cfg["train_micro_batch_size_per_gpu"],
            acc=cfg["gradient_accumulation_steps"],
            batch=cfg["train_batch_size"],
            steps=doc.numbers.steps,
            seq=doc.numbers.seq_len,
            rem=gpus % tp,
        )
    args = cfg["training_args"]
    nodes, per = cfg["launcher"]["nnodes"], cfg["launcher"]["nproc_per_node"]
    dp = nodes * per  # the Trainer's world size: one process per GPU, all data-parallel
    return dict(
        gpus=dp,
        tp=1,
        pp=1,
        cp=1,
        dp=dp,
        micro=args["per_device_train_batch_size"],
        acc=args["gradient_accumulation_steps"],
        batch=args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] * dp,
        steps=args["max_steps"],
        seq=doc.numbers.seq_len,
        rem=0,
    )


def check_numbers(doc, n_gpus: int, global_batch: int, seq: int, tokens: float) -> None:
    """The issue's three identities, on the engine's own numbers."""
    e = engine_numbers(doc)
    assert e["rem"] == 0
    assert e["tp"] * e["pp"] * e["dp"] * e["cp"] == n_gpus
    assert e["micro"] * e["acc"] * e["dp"] == e["batch"] == global_batch
    assert e["seq"] == seq
    # rounding: whole steps, at least the planned tokens and less than one batch more
    assert e["steps"] * e["batch"] * seq >= tokens > (e["steps"] - 1) * e["batch"] * seq


# ------------------------------------------------------------------ the property over random plans


#: what each engine can express, drawn from (the rest is refused, test_inexpressible_features_are_errors)
CAN = {
    "torchtitan": dict(
        tp=[1, 2, 4, 8],
        pp=[1, 2, 4, 8],
        cp=[1, 2],
        zero=[ZeroStage.THREE],
        sp=[True],
        recompute=[Recompute.NONE, Recompute.FULL, Recompute.OP],
        precision=[Precision.BF16, Precision.FP8],
    ),
    "megatron": dict(
        tp=[1, 2, 4, 8],
        pp=[1, 2, 4, 8],
        cp=[1, 2],
        zero=list(ZeroStage),
        sp=[True, False],
        recompute=[Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL],
        precision=[Precision.BF16, Precision.FP16, Precision.FP8],
    ),
    "deepspeed": dict(
        tp=[1, 2, 4, 8],
        pp=[1],
        cp=[1],
        zero=list(ZeroStage),
        sp=[False],
        recompute=[Recompute.NONE, Recompute.FULL],
        precision=[Precision.BF16, Precision.FP16],
    ),
    "hf": dict(
        tp=[1],
        pp=[1],
        cp=[1],
        zero=list(ZeroStage),
        sp=[False],
        recompute=[Recompute.NONE, Recompute.FULL],
        precision=[Precision.BF16, Precision.FP16],
    ),
}


@st.composite
def plans(draw, engine):
    can = CAN[engine]
    tp, pp, cp = (draw(st.sampled_from(can[k])) for k in ("tp", "pp", "cp"))
    dp = draw(st.integers(1, 96))
    vp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    micro = draw(st.sampled_from([1, 2, 4]))
    acc = draw(st.integers(1, 32))
    zero, rec, sp, precision = (
        draw(st.sampled_from(can[k])) for k in ("zero", "recompute", "sp", "precision")
    )
    n = tp * pp * cp * dp
    layout = Layout(
        tp=tp, pp=pp, cp=cp, dp=dp, vp=vp, micro_batch=micro, zero=zero, recompute=rec, sp=sp
    )
    batch = micro * acc * dp
    seq = draw(st.sampled_from([2048, 4096]))
    tokens = float(draw(st.integers(batch * seq, 10**13)))
    node = 8 if n > 8 and n % 8 == 0 else n  # a launcher needs the same processes on every node
    return layout, n, node, batch, seq, tokens, precision


@pytest.mark.parametrize("engine", ["torchtitan", "megatron", "deepspeed", "hf"])
@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_exported_numbers_agree_with_the_plan(engine, data):
    """tp × pp × dp × cp = GPUs; micro-batch × accumulation × dp = global batch; steps × batch ≥ tokens
    by less than one batch — read back from the engine's own file, over random plans it can express."""
    layout, n, node, batch, seq, tokens, precision = data.draw(plans(engine))
    numbers = PlanNumbers.build(layout, n, node, batch, seq, tokens)
    plan = make_plan(LLAMA2_7B, tokens, seq, batch * seq, precision)
    module = {
        "torchtitan": tt_export,
        "megatron": mlm_export,
        "deepspeed": ds_export,
        "hf": hf_export,
    }[engine]
    try:
        doc = module.export(LLAMA2_7B, plan, numbers, None, {"title": "property"})
    except (
        ExportError
    ) as exc:  # a feature this engine cannot express: said in one line, with the engine
        assert str(exc).startswith(f"export --to {engine}: ") and "\n" not in str(exc)
        assume(False)  # not counted: Hypothesis fails the test when it must discard too many plans
    check_numbers(doc, n, batch, seq, tokens)


def test_steps_round_up_by_hand():
    # Llama-2-7B's 2T tokens at 1,024 × 4,096-token sequences: 2e12 / 4,194,304 = 476,837.16 → 476,838
    # steps, 2,000,003,530,752 tokens (3,530,752 more than planned, under one batch of 4,194,304)
    n = PlanNumbers.build(Layout(tp=2, dp=1024, micro_batch=1), 2048, 8, 1024, 4096, 2e12)
    assert (n.steps, n.tokens, n.accumulation) == (476_838, 2_000_003_530_752, 1)


def test_end_chunks_with_the_embedding_or_the_head_alone_as_llama_3_1_405b():
    # Dubey et al. 2024 §3.3.2: with interleaving "the first model chunk on the first stage has only the
    # embedding, and the last model chunk on the last stage has only output projection and loss": 126
    # layers in pp 16 × vp 8 = 128 chunks, one layer each between them
    stages = tt_export.stage_modules(126, 128)
    counts = [sum(m.startswith("layers.") for m in s) for s in stages]
    assert counts == [0] + [1] * 126 + [0]
    assert stages[0] == ["tok_embeddings"] and stages[-1] == ["norm", "output"]
    big = LLAMA2_7B.replace(n_layers=126)
    args = dict(
        mlm_export._stage_args(
            big, PlanNumbers.build(Layout(pp=16, vp=8, dp=1), 16, 8, 1, 4096, 4096)
        )
    )
    assert args["--pipeline-model-parallel-layout"] == "E|(t|)*126,L"
    with pytest.raises(ExportError, match="at most the 126 layers"):
        tt_export.stage_modules(126, 129)


def test_uneven_pipeline_stages_as_llama_3_1_405b():
    # Dubey et al. 2024 §3.3.2: 126 layers on pp = 16, one layer fewer on the first and last stage
    stages = tt_export.stage_modules(126, 16)
    counts = [sum(m.startswith("layers.") for m in s) for s in stages]
    assert counts == [7] + [8] * 14 + [7]
    assert stages[0][0] == "tok_embeddings" and stages[-1][-2:] == ["norm", "output"]
    assert [f"layers.{i}" for i in range(126)] == [
        m for s in stages for m in s if m.startswith("layers.")
    ]
    big = LLAMA2_7B.replace(n_layers=126)
    args = dict(
        mlm_export._stage_args(big, PlanNumbers.build(Layout(pp=16, dp=1), 16, 8, 1, 4096, 4096))
    )
    assert (
        args["--decoder-first-pipeline-num-layers"],
        args["--decoder-last-pipeline-num-layers"],
    ) == (7, 7)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(d=st.integers(64, 20000).map(lambda x: x - x % 64), f=st.integers(64, 60000))
def test_torchtitan_width_arguments_give_the_width(d, f):
    """torchtitan's SwiGLU width rule (v0.2.2 llama3 FeedForward) reproduces every ffn_dim we write."""
    assert tt_model.feed_forward_hidden(d, *tt_model.ffn_arguments(d, f)) == f


def test_torchtitan_width_rule_by_hand():
    # Llama-2-7B: int(2 · 4 · 4096 / 3) = 10,922, rounded up to a multiple of 256: 43 · 256 = 11,008
    assert tt_model.ffn_arguments(4096, 11008) == (256, None)
    # torchtitan's Llama 3 8B flavor: int(1.3 · 10,922) = 14,198 → multiple of 1,024: 14,336 (Llama 3's width)
    assert tt_model.feed_forward_hidden(4096, 1024, 1.3) == 14336


# ------------------------------------------------------------------ the plans the README shows


@pytest.fixture(scope="module")
def readme_plans():
    """Llama-2-7B on 2,048 A100s for 2T tokens (the README's default), with the pins each engine needs:
    torchtitan shards with FSDP (ZeRO-3); DeepSpeed's AutoTP has no sequence parallelism; the Trainer
    export is data-parallel only, and 2,048 data-parallel ranks need a batch of at least 2,048 sequences."""
    return {
        "megatron": estimate("llama2-7b", "a100-80gb", 2048),
        "torchtitan": estimate("llama2-7b", "a100-80gb", 2048, layout={"zero": 3}),
        "deepspeed": estimate("llama2-7b", "a100-80gb", 2048, layout={"sp": False}),
        "hf": estimate(
            "llama2-7b",
            "a100-80gb",
            2048,
            layout={"tp": 1, "pp": 1},
            global_batch_tokens=2048 * 4096,
        ),
    }


@pytest.fixture(scope="module")
def docs(readme_plans):
    return {e: export(est, e) for e, est in readme_plans.items()}


def test_readme_plans_export_with_the_plans_numbers(readme_plans, docs):
    for engine, doc in docs.items():
        est = readme_plans[engine]
        s = est.stages[0]
        check_numbers(doc, 2048, s.global_batch_sequences, 4096, 2e12)
        assert (doc.numbers.tp, doc.numbers.pp, doc.numbers.dp) == (
            est.layout.tp,
            est.layout.pp,
            est.layout.dp,
        )
        assert doc.to_dict()["numbers"]["dp"] == est.layout.dp


QLORA = FineTune(
    method="qlora",
    lora_rank=16,
    lora_alpha=32,
    lora_targets=("attention", "mlp"),
    base_precision="nf4",
    optimizer="paged_adamw_8bit",
)


@pytest.fixture(scope="module")
def lora_doc():
    est = estimate(
        "llama2-7b",
        "a100-80gb",
        8,
        tokens=1e8,
        global_batch_tokens=64 * 4096,
        layout={"tp": 1, "pp": 1},
    )
    return export(est, "hf", finetune=QLORA)


def _load_torchtitan_config():
    """torchtitan.config without torchtitan/__init__.py, which imports triton kernels (GPU-only)."""
    if "torchtitan" not in sys.modules:
        spec = importlib.util.find_spec("torchtitan")
        pkg = types.ModuleType("torchtitan")
        pkg.__path__, pkg.__spec__ = list(spec.submodule_search_locations), spec
        sys.modules["torchtitan"] = pkg
    from torchtitan.config import ConfigManager

    return ConfigManager


def test_torchtitan_reads_the_job(docs, tmp_path):
    doc = docs["torchtitan"]
    path = tmp_path / "job.toml"
    path.write_text(doc.files["job.toml"])
    job = _load_torchtitan_config()().parse_args(["--job.config_file", str(path)])
    n = doc.numbers
    assert (job.parallelism.tensor_parallel_degree, job.parallelism.data_parallel_shard_degree) == (
        n.tp,
        n.dp,
    )
    assert (job.training.steps, job.training.global_batch_size, job.training.seq_len) == (
        n.steps,
        n.global_batch,
        4096,
    )
    assert (job.model.flavor, job.experimental.custom_import) == ("trilemma", "trilemma_flavor")
    # a field torchtitan does not have is refused by its own reader
    path.write_text(doc.files["job.toml"].replace("[training]", "[training]\nmicro_batch_size = 2"))
    with pytest.raises(ValueError, match="Invalid field names"):
        _load_torchtitan_config()().parse_args(["--job.config_file", str(path)])


def test_torchtitan_flavor_module_uses_its_model_arguments(docs):
    """The flavor's keyword arguments are fields of torchtitan's TransformerModelArgs (read from the
    installed package's source: importing the model imports triton)."""
    spec = importlib.util.find_spec("torchtitan")
    src = Path(
        spec.submodule_search_locations[0], "models", "llama3", "model", "args.py"
    ).read_text()
    cls = next(
        n
        for n in ast.walk(ast.parse(src))
        if isinstance(n, ast.ClassDef) and n.name == "TransformerModelArgs"
    )
    fields = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)}
    call = next(
        n
        for n in ast.walk(ast.parse(docs["torchtitan"].files["trilemma_flavor.py"]))
        if isinstance(n, ast.Call)
    )
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert set(kw) <= fields
    assert (
        tt_model.feed_forward_hidden(kw["dim"], kw["multiple_of"], kw["ffn_dim_multiplier"])
        == 11008
    )


class _DataParallel:
    """The mpu DeepSpeedConfig asks for the data-parallel world size (runtime/config.py)."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


@pytest.fixture(scope="module")
def deepspeed_config():
    import deepspeed.runtime.config as dsc

    return dsc


def test_deepspeed_reads_its_config(docs, deepspeed_config, monkeypatch):
    # outside a launched job DeepSpeed's get_rank() asserts; the config then falls back to world size 1
    monkeypatch.setattr(deepspeed_config.dist, "get_rank", lambda *a, **k: 0)
    doc = docs["deepspeed"]
    n = doc.numbers
    c = deepspeed_config.DeepSpeedConfig(
        json.loads(doc.files["ds_config.json"]), mpu=_DataParallel(n.dp)
    )
    assert (
        c.train_batch_size,
        c.train_micro_batch_size_per_gpu,
        c.gradient_accumulation_steps,
    ) == (n.global_batch, n.micro_batch, n.accumulation)
    assert (
        c.zero_optimization_stage == int(n.zero)
        and c.bfloat16_config.enabled
        and c.gradient_clipping == 1.0
    )
    wrong = {**doc.config["ds_config"], "train_batch_size": n.global_batch + n.dp}
    with pytest.raises(AssertionError, match="train_batch_size is not equal"):
        deepspeed_config.DeepSpeedConfig(wrong, mpu=_DataParallel(n.dp))


@pytest.fixture(scope="module")
def transformers_classes():
    from peft import LoraConfig
    from transformers import BitsAndBytesConfig, TrainingArguments

    return TrainingArguments, LoraConfig, BitsAndBytesConfig


def test_hf_trainer_reads_its_arguments(docs, lora_doc, transformers_classes):
    TrainingArguments, LoraConfig, BitsAndBytesConfig = transformers_classes
    doc = docs["hf"]
    args = TrainingArguments(**json.loads(doc.files["training_args.json"]), use_cpu=True)
    n = doc.numbers
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.max_steps) == (
        n.micro_batch,
        n.accumulation,
        n.steps,
    )
    assert args.bf16 and args.hf_deepspeed_config.config["zero_optimization"]["stage"] == int(
        n.zero
    )
    # the QLoRA fine-tune: LoraConfig and BitsAndBytesConfig from their files
    lora = LoraConfig(**json.loads(lora_doc.files["lora_config.json"]))
    assert (lora.r, lora.lora_alpha) == (16, 32)
    assert lora.target_modules == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    bnb = BitsAndBytesConfig(**json.loads(lora_doc.files["bnb_config.json"]))
    assert bnb.load_in_4bit and bnb.bnb_4bit_quant_type == "nf4" and bnb.bnb_4bit_use_double_quant
    ft_args = TrainingArguments(**json.loads(lora_doc.files["training_args.json"]), use_cpu=True)
    assert ft_args.optim == "paged_adamw_8bit" and ft_args.learning_rate == 2e-4  # QLoRA App. B.2
    compile(lora_doc.files["train_hf.py"], "train_hf.py", "exec")


def test_full_training_gives_training_arguments_only(docs):
    assert set(docs["hf"].files) == {"training_args.json", "train_hf.py"}


def test_megatron_script_parses_with_megatron_options(docs):
    a = megatron_args(docs["megatron"].files["train_megatron.sh"])
    n = docs["megatron"].numbers
    assert int(a["--tensor-model-parallel-size"]) == n.tp and "--sequence-parallel" in a
    assert (a["--position-embedding-type"], a["--normalization"]) == ("rope", "RMSNorm")
    with pytest.raises(
        argparse.ArgumentError
    ):  # the table refuses a value outside an option's choices
        MEGATRON.parse_known_args(["--recompute-granularity", "op"])


@pytest.mark.slow
def test_megatron_core_builds_the_transformer_config(docs):
    """megatron-core's TransformerConfig (its __post_init__ checks heads, TP, recompute, precision) from
    the script's arguments, mapped as megatron/training/argument_utils.py core_transformer_config_from_args."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    a = megatron_args(docs["megatron"].files["train_megatron.sh"])
    c = TransformerConfig(
        num_layers=int(a["--num-layers"]),
        hidden_size=int(a["--hidden-size"]),
        ffn_hidden_size=int(a["--ffn-hidden-size"]),
        num_attention_heads=int(a["--num-attention-heads"]),
        tensor_model_parallel_size=int(a["--tensor-model-parallel-size"]),
        pipeline_model_parallel_size=int(a["--pipeline-model-parallel-size"]),
        sequence_parallel="--sequence-parallel" in a,
        normalization=a["--normalization"],
        gated_linear_unit="--swiglu" in a,
        add_bias_linear="--disable-bias-linear" not in a,
        attention_dropout=float(a["--attention-dropout"]),
        hidden_dropout=float(a["--hidden-dropout"]),
        bf16="--bf16" in a,
        recompute_granularity=a.get("--recompute-granularity"),
    )
    assert (c.num_layers, c.ffn_hidden_size, c.tensor_model_parallel_size) == (
        32,
        11008,
        docs["megatron"].numbers.tp,
    )


# ------------------------------------------------------------------ what an engine cannot express


def test_inexpressible_features_are_errors(readme_plans):
    est = readme_plans["megatron"]  # tp 2 with sequence parallelism, ZeRO-2
    for engine, words in (("torchtitan", "ZeRO stage 2"), ("deepspeed", "sp on"), ("hf", "tp 2")):
        with pytest.raises(ExportError, match=words):
            export(est, engine)
    with pytest.raises(ExportError, match="fine-tune qlora"):
        export(readme_plans["torchtitan"], "torchtitan", finetune=QLORA)


def test_cli_export_json_is_the_api_document(capsys, readme_plans, docs):
    code, out, err = run(capsys, "export", "--to", "megatron", "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "trilemma.export/1" and doc == json.loads(
        json.dumps(docs["megatron"].to_dict())
    )


def test_cli_errors_are_one_line(capsys):
    code, out, err = run(capsys, "export", "--to", "titanic")
    assert code == 2 and err.count("\n") == 1 and "to: 'titanic'" in err
    code, out, err = run(capsys, "export", "--to", "hf")
    assert code == 2 and err.count("\n") == 1 and "export --to hf: tp 2 cannot be expressed" in err
    code, out, err = run(
        capsys, "estimate", "--export", "torchtitan", "--precision", "fp16", "--zero", "3"
    )
    assert code == 2 and "mixed precision is bfloat16 or float32" in err


def test_cli_writes_files_and_exports_a_solve_point(capsys, tmp_path):
    code, out, err = run(
        capsys,
        "export",
        "--to",
        "deepspeed",
        "--out",
        str(tmp_path),
        "--gpus",
        "64",
        "--tokens",
        "200B",
        "--tp",
        "1",
    )
    assert (
        code == 0
        and (tmp_path / "ds_config.json").exists()
        and (tmp_path / "trilemma-notes.txt").exists()
    )
    solve = [
        "solve",
        "--model",
        "llama2-7b",
        "--gpu",
        "a100-80gb",
        "--max-gpus",
        "64",
        "--budget",
        "$20k",
        "--minimize",
        "loss",
    ]
    code, out, err = run(capsys, "export", "--to", "megatron", "--json", *solve)
    assert code == 0, err
    opt = json.loads(out)
    code, out, err = run(capsys, "export", "--to", "megatron", "--json", "--point", "0", *solve)
    assert code == 0, err
    point = json.loads(out)
    assert (
        point["plan"]["source"] == "solve frontier point 0"
        and opt["plan"]["source"] == "solve optimum"
    )
    code, out, err = run(capsys, "export", "--to", "megatron", "--point", "100000", *solve)
    assert code == 2 and "point: 100000" in err
    assert math.isfinite(point["numbers"]["tokens"])


# ------------------------------------------------------------------ the engines' parsers over random plans


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_deepspeed_and_trainer_read_random_plans(
    data, deepspeed_config, transformers_classes, monkeypatch
):
    """Every random plan DeepSpeed or the Trainer can express parses with their own classes, with the
    batch the plan has."""
    monkeypatch.setattr(deepspeed_config.dist, "get_rank", lambda *a, **k: 0)
    TrainingArguments = transformers_classes[0]
    for engine, module in (("deepspeed", ds_export), ("hf", hf_export)):
        layout, n, node, batch, seq, tokens, precision = data.draw(plans(engine))
        numbers = PlanNumbers.build(layout, n, node, batch, seq, tokens)
        doc = module.export(
            LLAMA2_7B,
            make_plan(LLAMA2_7B, tokens, seq, batch * seq, precision),
            numbers,
            None,
            {"title": "property"},
        )
        if engine == "deepspeed":
            c = deepspeed_config.DeepSpeedConfig(
                json.loads(doc.files["ds_config.json"]), mpu=_DataParallel(n // layout.tp)
            )
            assert c.train_batch_size == batch and c.zero_optimization_stage == int(layout.zero)
        else:
            args = TrainingArguments(**json.loads(doc.files["training_args.json"]), use_cpu=True)
            assert args.per_device_train_batch_size * args.gradient_accumulation_steps * n == batch
            assert args.gradient_checkpointing == (layout.recompute == Recompute.FULL)


def test_torchtitan_reads_a_pipelined_float8_job(tmp_path):
    """Pipeline stages by module name, the interleaved schedule, op-level recomputation and the float8
    converter (its name as torchtitan registers it, read from the installed source)."""
    numbers = PlanNumbers.build(
        Layout(tp=2, pp=2, vp=2, dp=4, micro_batch=1, zero=3, recompute=Recompute.OP),
        16,
        8,
        32,
        4096,
        1e10,
    )
    doc = tt_export.export(
        LLAMA2_7B,
        make_plan(LLAMA2_7B, 1e10, 4096, 32 * 4096, Precision.FP8),
        numbers,
        None,
        {"title": "pp"},
    )
    path = tmp_path / "job.toml"
    path.write_text(doc.files["job.toml"])
    job = _load_torchtitan_config()().parse_args(["--job.config_file", str(path)])
    assert job.parallelism.pipeline_parallel_schedule == "Interleaved1F1B"
    assert len(job.parallelism.module_fqns_per_model_part) == 4  # pp × vp stages
    assert (
        job.training.local_batch_size == 32 // 4
        and job.parallelism.pipeline_parallel_microbatch_size == 1
    )
    assert (job.activation_checkpoint.mode, job.activation_checkpoint.selective_ac_option) == (
        "selective",
        "op",
    )
    spec = importlib.util.find_spec("torchtitan")
    float8 = Path(
        spec.submodule_search_locations[0], "components", "quantization", "float8.py"
    ).read_text()
    assert all(f'"{c}")' in float8 for c in job.model.converters) and job.model.converters


def test_megatron_exports_a_mixture_of_experts():
    est = estimate("mixtral-8x7b", "h100-sxm", 512, tokens=1e12, layout={"ep": 8, "tp": 2, "pp": 2})
    a = megatron_args(export(est, "megatron").files["train_megatron.sh"])
    assert (
        int(a["--num-experts"]),
        int(a["--moe-router-topk"]),
        int(a["--expert-model-parallel-size"]),
    ) == (8, 2, 8)
    assert (
        int(a["--num-query-groups"]) == 8 and "--group-query-attention" in a
    )  # Mixtral: 32 heads, 8 KV heads


@pytest.mark.slow
def test_a_cli_fine_tune_exports_the_plans_own_adapters(capsys, transformers_classes):
    """`trilemma export --to hf` of a real --finetune plan: peft's LoraConfig and transformers'
    TrainingArguments read the files, and every number is the plan's (rank 8, alpha 16, q/v, nf4 double
    quantisation, paged 8-bit AdamW, dropout 0 as the plan's memory assumes); steps = ⌈100M / (128 × 4096)⌉
    = ⌈190.73⌉ = 191."""
    from trilemma.cli import main

    TrainingArguments, LoraConfig, BitsAndBytesConfig = transformers_classes
    code = main(
        [
            "export",
            "--to",
            "hf",
            "--json",
            "--model",
            "llama2-7b",
            "--gpu",
            "a100-80gb",
            "--gpus",
            "1",
            "--tokens",
            "100M",
            "--finetune",
            "qlora",
            "--lora-rank",
            "8",
            "--lora-alpha",
            "16",
            "--lora-targets",
            "q_proj,v_proj",
            "--optimizer",
            "paged-adamw-8bit",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    files = doc["files"]
    lora = LoraConfig(**json.loads(files["lora_config.json"]))
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (8, 16, 0.0)
    assert lora.target_modules == {"q_proj", "v_proj"}
    bnb = BitsAndBytesConfig(**json.loads(files["bnb_config.json"]))
    assert bnb.load_in_4bit and bnb.bnb_4bit_quant_type == "nf4" and bnb.bnb_4bit_use_double_quant
    args = TrainingArguments(**json.loads(files["training_args.json"]), use_cpu=True)
    assert args.optim == "paged_adamw_8bit" and args.max_steps == 191
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 128


def test_an_export_searches_the_layouts_its_engine_can_write(capsys):
    """Llama 3.1 405B on 16,384 H100 at tp 8, pp 16: the fastest layout of all recomputes at the op level, which
    Megatron-LM's arguments do not express. `estimate --export megatron` writes the fastest layout Megatron can
    express instead (it refused before), says how much slower it is, and any layout that beats it is one
    Megatron refuses."""
    from trilemma.estimate.choose import estimate_plan
    from trilemma.export import expressible
    from trilemma.resolve import make_cluster

    kw = dict(
        tokens=15.6e12, seq_len=8192, global_batch_tokens=16_777_216, layout={"tp": 8, "pp": 16}
    )
    fastest = estimate("llama3.1-405b", "h100-sxm", 16384, **kw)
    with pytest.raises(ExportError):
        export(fastest, "megatron")
    est = estimate("llama3.1-405b", "h100-sxm", 16384, accept=expressible("megatron"), **kw)
    doc = export(est, "megatron")  # writes
    assert est.layout.recompute != Recompute.OP
    assert est.time.total_s > fastest.time.total_s
    assert any(
        w.startswith("layout: the fastest the export's engine can express") for w in doc.warnings
    )
    # no expressible layout of the same search (vp 1, 2, 4: the axis's estimate values) is faster: every faster
    # one is refused
    m, _ = resolve_model("llama3.1-405b")
    pl = make_plan(m, 15.6e12, 8192, 16_777_216)
    accept = expressible("megatron")
    for rc in ("none", "selective", "full"):
        for vp in (1, 2, 4):
            try:
                e = estimate_plan(
                    m,
                    make_cluster("h100-sxm", 16384),
                    pl,
                    {"tp": 8, "pp": 16, "vp": vp, "recompute": rc},
                )
            except Exception:
                continue  # nothing of that pin fits or is legal
            if e.time.total_s < est.time.total_s * (1 - 1e-9):
                assert not accept(e)
    # an engine that refuses the model itself still says so: no layout search hides it
    code, _, err = run(
        capsys,
        "export",
        "--to",
        "megatron",
        "estimate",
        "--model",
        "bert-base",
        "--gpu",
        "a100-80gb",
        "--tokens",
        "1B",
        "--gpus",
        "8",
    )
    assert code == 2 and "encoder" in err


def test_a_solve_optimum_an_engine_cannot_write_is_exported_in_the_fastest_layout_it_can():
    """solve --budget '$2M' --deadline 30d --zero 2 --pp 1 picks ZeRO-2 without a pipeline, which torchtitan has
    no setting for (FSDP2 is ZeRO-3; ZeRO-1 only under pipeline parallelism). The export writes the same plan
    (model, GPUs, tokens, batch) in the fastest layout torchtitan can express and says so, naming what it
    changed and why."""
    from trilemma.export import export_solve
    from trilemma.solve import solve

    r = solve(budget="$2M", deadline="30d", layout={"zero": "2", "pp": "1"})
    o = r.optimum
    with pytest.raises(ExportError):
        export(o, "torchtitan")
    doc = export_solve(r, "torchtitan")
    n = doc.numbers
    assert (n.tp, n.pp, n.dp, int(n.zero)) != (
        o.layout.tp,
        o.layout.pp,
        o.layout.dp,
        int(o.layout.zero),
    )
    assert n.tp * n.pp * n.cp * n.dp == o.cluster.n_gpus
    note = next(w for w in doc.warnings if w.startswith("layout: the solve optimum's"))
    assert "ZeRO stage 2" in note and "fastest layout of the same plan that can" in note


@pytest.mark.parametrize(
    "n_layers,pp,vp", [(126, 16, 4), (126, 16, 7), (126, 16, 2), (80, 6, 8), (7, 2, 2)]
)
def test_uneven_virtual_stages_as_megatrons_own_layout_reads_them(n_layers, pp, vp):
    """Layers not divisible by pp × vp: --pipeline-model-parallel-layout, read back by megatron-core's own
    PipelineParallelLayerLayout (parse, the pp × vp grid, validate_layer_layout): every layer once, the embedding
    first and the loss last, and each rank holding the layers trilemma times it with (trilemma.specs.axes:
    stage_layers the heaviest rank, last_stage_layers the last)."""
    from trilemma.estimate.pipeline import last_stage_layers, stage_layers

    layout_mod = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    big = LLAMA2_7B.replace(n_layers=n_layers)
    args = dict(
        mlm_export._stage_args(
            big, PlanNumbers.build(Layout(pp=pp, vp=vp, dp=1), pp, 8, 1, 4096, 4096)
        )
    )
    text = args["--pipeline-model-parallel-layout"]
    lay = layout_mod.PipelineParallelLayerLayout(text, pp)
    assert lay.virtual_pipeline_model_parallel_size == vp
    lay.validate_layer_layout(num_layers=n_layers, mtp_num_layers=None)
    per_rank = [sum(t.name == "decoder" for stage in rank for t in stage) for rank in lay.layout]
    assert sum(per_rank) == n_layers
    assert max(per_rank) == stage_layers(n_layers, pp, vp) and per_rank[-1] == last_stage_layers(
        n_layers, pp, vp
    )
    # Llama 3.1 405B's interleaving: one layer fewer on the first and the last virtual stage, two on the others
    if (n_layers, pp, vp) == (126, 16, 4):
        assert text == "Et|(t*2|)*62,tL"


def test_an_engine_without_sequence_parallelism_gets_the_fastest_layout_without_it(capsys):
    """The default plan (Llama 2 7B on 2,048 A100s) runs fastest at TP 2 with sequence parallelism, which DeepSpeed's
    AutoTP lacks; the search keeps SP on wherever TP is, so an export to DeepSpeed searches the layouts with it off
    too: it writes TP 2 without SP (it asked the user to pin --no-sp before) and names the faster one it cannot."""
    code, out, err = run(capsys, "export", "--to", "deepspeed", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["numbers"]["sp"] is False and doc["numbers"]["tp"] * doc["numbers"]["dp"] == 2048
    assert any("TP2" in w and " SP " in w for w in doc["warnings"])


def test_an_unfused_softmax_is_exported_as_megatrons_unfused_path():
    """softmax_passes above 1 without FlashAttention: Megatron-LM's FusedScaleMaskSoftmax with its fusion off
    (--no-masked-softmax-fusion: scale, mask, torch.softmax, 3 passes); 1 keeps the fused kernel, the default;
    any other count is written with a note that Megatron makes 3. The Trainer's eager attention makes 3 too."""

    def doc(passes: int, engine: str = "megatron"):
        pl = make_plan(
            LLAMA2_7B,
            1e9,
            seq_len=4096,
            global_batch_tokens=4096 * 64,
            flash_attention=False,
            softmax_passes=passes,
        )
        return export(
            estimate(LLAMA2_7B, "a100-80gb", 8, plan=pl, layout={"tp": 1, "pp": 1}), engine
        )

    fused, eager, by_hand = doc(1), doc(3), doc(6)
    assert "--no-masked-softmax-fusion" not in megatron_args(fused.files["train_megatron.sh"])
    for d in (eager, by_hand):
        a = megatron_args(d.files["train_megatron.sh"])
        assert "--no-masked-softmax-fusion" in a and a["--attention-backend"] == "unfused"
    assert not any("softmax_passes" in n for n in eager.notes)
    assert any("softmax_passes 6" in n for n in by_hand.notes)
    assert any("softmax_passes 1" in n for n in doc(1, "hf").notes)
    assert not any("softmax_passes" in n for n in doc(3, "hf").notes)
