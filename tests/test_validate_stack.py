"""Each backtest row names the software stack that produced it (data/SCHEMA.md ``stack``); the
published small configurations; Llama 3's Table 4 evaluated; a source's sequences per second."""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path

import pytest
from clitools import run
from test_validate_data import _write

from trilemma.estimate.params import param_counts
from trilemma.validate.cases import KINDS, load_cases, load_file, read_rows
from trilemma.validate.columns import STACKS
from trilemma.validate.schema import RowError

#: rows left untagged (named in data/README.md): DeepSeek-V2's HAI-LLM (kept out of the calibration), AI2's OLMo
#: trainer, Google's TPU codebases (BERT, Mesh TensorFlow) and IBM's fms-fsdp
UNTAGGED = {
    "runs": {
        "DeepSeek-V2 (MoE)",
        "OLMo 2 7B",
        "OLMo 7B (A100 run)",
        "IBM LlamaT 7B (Llama 2 7B architecture)",
        "BERT-Base",
        "T5-11B",
        "Switch Transformer 1500B (MoE)",
    },
    "throughput": {
        "Llama 2 7B arch (FSDP)",
        "Llama 2 13B arch (FSDP)",
        "Llama 2 34B arch (FSDP)",
        "Llama 2 70B arch (FSDP)",
    },
    "memory": set(),
}


def _label(row: dict[str, str]) -> str:
    return row.get("model") or row.get("model_or_size") or ""


@pytest.mark.parametrize("kind", KINDS)
def test_every_shipped_row_names_its_stack(kind: str) -> None:
    raw = read_rows(kind)
    for r in raw:
        if r["stack"]:
            assert r["stack"] in STACKS, _label(r)
        else:
            assert _label(r) in UNTAGGED[kind], f"{kind}: {_label(r)} names no stack"
    cases, _ = load_cases(kind)
    assert cases and all(c.stack == raw[c.row]["stack"] for c in cases)  # read into the case


def test_finetune_memory_rows_name_their_stack() -> None:
    text = (resources.files("trilemma") / "data" / "finetune_memory.csv").read_text("utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    assert rows and all(r["stack"] in STACKS for r in rows)
    by = {r["case"]: r["stack"] for r in rows}
    assert by["llama2-70b QLoRA FSDP 2 GPUs"] == "hf-fsdp"
    assert by["llama2-70b LoRA DeepSpeed ZeRO-3 8 GPUs"] == "hf-deepspeed"


_HEAD = ["model", "metric", "reported", "gpu", "n_gpus", "model_preset", "seq_len", "global_batch"]
_ROW = ["mine", "step_s", "1.5", "h100-sxm", "8", "llama2-7b", "4096", "64"]


def test_a_user_file_without_stack_still_loads(tmp_path: Path) -> None:
    _, cases, skipped = load_file(_write(tmp_path / "old.csv", _HEAD, [_ROW]))
    assert not skipped and cases[0].stack == ""
    _, cases, _ = load_file(
        _write(tmp_path / "new.csv", [*_HEAD, "stack"], [[*_ROW, "torchtitan"]])
    )
    assert cases[0].stack == "torchtitan"


def test_a_stack_not_in_the_list_is_a_bad_cell(capsys, tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.csv", [*_HEAD, "stack"], [[*_ROW, "my-trainer"]])
    with pytest.raises(RowError, match="column stack"):
        load_file(path)
    code, _, err = run(capsys, "validate", "--data", path)
    assert code == 2 and "stack" in err and "my-trainer" in err and "megatron-lm" in err


def test_sequences_per_second_is_compared_as_tokens_per_second(tmp_path: Path) -> None:
    """A source's samples/s per GPU becomes tokens/s per GPU over the row's sequence length."""
    head = ["model", "metric", "reported", "gpu", "n_gpus", "model_preset", "seq_len"]
    head += ["global_batch", "precision", "tp", "pp", "dp", "micro_batch"]
    row = ["bert", "sequences_per_s_per_gpu", "8.86", "v100-32gb", "1", "bert-large", "512"]
    row += ["4", "fp32", "1", "1", "1", "4"]
    kind, cases, _ = load_file(_write(tmp_path / "seqs.csv", head, [row]))
    c = cases[0]
    assert kind == "throughput" and c.metric == "tokens_per_s_per_gpu"
    assert c.reported == pytest.approx(8.86 * 512)
    assert "sequences_per_s_per_gpu 8.86 × seq_len 512 = 4536.32 tokens/s per GPU" in c.assumptions


def test_llama3_table4_rows_are_predicted_with_their_layout(capsys) -> None:
    """arXiv:2407.21783 Table 4: TP 8, PP 16, CP 1 or 16 and the table's DP, FSDP inside the stages as
    ZeRO-1's state; evaluated, not skipped."""
    raw = read_rows("throughput")
    cases, skipped = load_cases("throughput")
    rows = [i for i, r in enumerate(raw) if r["source"].startswith("arXiv:2407.21783")]
    assert len(rows) == 3 and not {s.row for s in skipped} & set(rows)
    by = {c.row: c for c in cases}
    want = {(8192, 8192, 1, 64), (16384, 8192, 1, 128), (16384, 131072, 16, 8)}
    got = set()
    for i in rows:
        c = by[i]
        assert c.stack == "meta-llama" and c.metric == "mfu"
        assert {k: c.layout[k] for k in ("tp", "pp", "zero")} == {"tp": 8, "pp": 16, "zero": 1}
        got.add((c.n_gpus, c.plan.stages[0].seq_len, c.layout["cp"], c.layout["dp"]))
        assert c.plan.stages[0].global_batch_tokens == 2048 * 8192  # 16M tokens per batch
    assert got == want
    long = next(r for r in raw if r["seq_len"] == "131072" and r["source"].startswith("arXiv:2407"))
    assert (
        long["dp_published"] == "4" and long["dp"] == "8"
    )  # the table prints DP 4; its GPUs and tokens need 8


def _small(c) -> bool:
    """The issue's small configuration: one node (≤ 8 GPUs), ≤ 2B parameters, d_model ≤ 2,048, and
    micro-batch 1 or tensor parallelism > 1 as the row pins them."""
    mb, tp = c.layout.get("micro_batch"), c.layout.get("tp", 1)
    return (
        c.n_gpus <= 8
        and param_counts(c.model).total <= 2e9
        and c.model.d_model <= 2048
        and (mb == 1 or tp > 1)
    )


def test_small_configurations_from_three_sources() -> None:
    small = [c for c in load_cases("throughput")[0] if _small(c)]
    groups = {c.group for c in small}
    assert len(small) >= 30 and len(groups) >= 3, (len(small), groups)
    assert {
        "github.com/mosaicml/llm-foundry",
        "huggingface.co/spaces/nanotron/ultrascale-playbook",
        "github.com/huggingface/transformers",
    } <= groups


def test_the_new_rows_go_through_validate_data(capsys, tmp_path: Path) -> None:
    """The nanotron rows as a user's file: all predicted, their stack read."""
    raw = read_rows("throughput")
    keep = list(raw[0])
    sel = [r for r in raw if r["stack"] == "nanotron"][:3]
    path = _write(tmp_path / "nt.csv", keep, [[r[k] for k in keep] for r in sel])
    code, out, _ = run(capsys, "validate", "--data", path, "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["rows"]) == 3 and doc["skipped"] == []
    assert all(r["metric"] == "tokens_per_s_per_gpu" and r["predicted"] > 0 for r in doc["rows"])
