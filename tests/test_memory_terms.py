"""Memory terms outside the tensor inventory's eager defaults: the CUDA context,
NCCL's buffers, the fitted residual, float8 linears' casts and what torch.compile saves. Each value is
a hand calculation written here from the cited figures, not a value the code printed."""

from __future__ import annotations

import numpy as np
import pytest

from trilemma.estimate.activations import (
    COMPILED_GATED_HIDDEN,
    activation_bytes_per_layer,
    float8_cast_bytes,
)
from trilemma.estimate.layouts import LayoutArrays
from trilemma.estimate.memory import memory_per_device, nccl_buffer_bytes
from trilemma.estimate.params import param_counts
from trilemma.presets import constants, get_hardware, get_model
from trilemma.resolve import make_cluster, make_plan
from trilemma.specs import Layout, Recompute

MIB = 2**20


def _L(**kw) -> LayoutArrays:
    return LayoutArrays.from_layouts([Layout(**kw)])


def test_nccl_buffers_per_process_group_by_hand() -> None:
    c = dict(constants()["memory"])
    # NCCL defaults: SIMPLE 4 MiB (NCCL_BUFFSIZE), LL 8·512·8·16, LL128 120·640·8·8 bytes (src/init.cc)
    assert c["nccl_buffsize_bytes"] == 4 * MIB
    assert c["nccl_ll_buffsize_bytes"] == 8 * 512 * 8 * 16 == 524_288
    assert c["nccl_ll128_buffsize_bytes"] == 120 * 640 * 8 * 8 == 4_915_200
    per_comm = (
        16 * 2 * (4_194_304 + 524_288 + 4_915_200)
    )  # 16 channels × 2 ring peers = 308,281,344
    # dp 8 × tp 2: two communicators; one rank alone: none; dp, tp, pp, cp all > 1: four
    got = nccl_buffer_bytes(_L(tp=2, dp=8), c)
    assert float(got[0]) == 2 * per_comm == 616_562_688
    assert float(nccl_buffer_bytes(_L(dp=1), c)[0]) == 0.0
    assert float(nccl_buffer_bytes(_L(tp=2, pp=2, cp=2, dp=2), c)[0]) == 4 * per_comm


def _estimate(gpu: str, n: int, layout: Layout, **plan_kw):
    from trilemma.api import estimate

    m = get_model("llama2-7b")
    plan = make_plan(m, 1e9, 4096, 4096.0 * n, **plan_kw)
    return estimate(m, gpu, n, layout=layout.model_dump(), plan=plan)


def test_cuda_context_is_the_devices_own_and_shows_by_name() -> None:
    # H100: PyTorch's lazy-loading measurement, 287,047,680 bytes (pytorch/pytorch PR #86509)
    assert get_hardware("h100-sxm").cuda_context_bytes == 287_047_680
    # V100: 1343 MiB measured by Hugging Face's memory anatomy doc
    assert get_hardware("v100-32gb").cuda_context_bytes == 1343 * MIB
    est = _estimate(
        "h100-sxm", 8, Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, recompute=Recompute.FULL)
    )
    mem = est.memory
    assert mem.cuda_context == 287_047_680
    assert mem.nccl == 16 * 2 * (4_194_304 + 524_288 + 4_915_200)  # one group (dp 8)
    # other = logits + context + NCCL + residual; the JSON shows each by name
    assert mem.other == pytest.approx(
        mem.logits + mem.cuda_context + mem.nccl + mem.framework_residual
    )
    doc = est.to_dict()["memory"]
    parts = doc["other_parts"]
    assert set(parts) == {"cuda_context", "nccl", "framework_residual", "logits"}
    assert sum(parts.values()) == pytest.approx(doc["breakdown"]["other"])
    assert doc["activations_parts"]["float8_casts"] == 0.0  # bf16: no float8 casts


def test_device_total_counts_context_and_nccl_reserved_does_not() -> None:
    """memory_quantity: reserved = allocated·(1 + frag); device = reserved + context + NCCL + residual."""
    from trilemma.estimate.evaluate import evaluate
    from trilemma.validate.predict import memory_quantity

    m = get_model("llama2-7b")
    cl = make_cluster("h100-sxm", 8)
    plan = make_plan(m, 1e9, 4096, 4096.0 * 8)
    L = _L(tp=2, dp=4, zero=1, recompute=Recompute.FULL)
    ev = evaluate(m, cl, plan, L, constants())
    mem = ev.stages[0].memory
    total = float(ev.per_gpu_bytes[0])
    outside = mem.context_bytes + float(mem.nccl_bytes[0]) + mem.residual_bytes
    alloc = memory_quantity("peak_allocated_bytes", total, ev)
    assert alloc == pytest.approx(total - outside)
    assert memory_quantity("peak_reserved_bytes", total, ev) == pytest.approx(
        alloc * (1 + mem.fragmentation)
    )
    assert memory_quantity("peak_memory_bytes", total, ev) == pytest.approx(
        alloc * (1 + mem.fragmentation) + 287_047_680 + 2 * 308_281_344 + mem.residual_bytes
    )


def test_a_cpu_has_no_context_and_no_nccl() -> None:
    from trilemma.estimate.capacity import outside_allocator
    from trilemma.specs import HardwareSpec

    cpu = HardwareSpec(
        name="cpu",
        family="cpu",
        peak_flop_per_s={"fp32": 1e11},
        hbm_bytes=8e9,
        hbm_bw_bytes_per_s=2e10,
        intra_node_bw_bytes_per_s=1e10,
        inter_node_bw_bytes_per_s=1e9,
        devices_per_node=1,
        board_power_w=100,
        price_usd_per_hour=0.1,
    )
    t = outside_allocator(make_cluster(cpu, 1), constants())
    assert t == {"cuda_context_bytes": 0.0, "nccl_channels": 0.0, "framework_residual_bytes": 0.0}


def test_float8_casts_by_hand_and_nothing_else_changes() -> None:
    """torchao Float8Linear saves the bf16 input and weight (matmul_with_hp_or_float8_args); what float8
    adds is the casts alive at one linear's backward, 1 byte each: weight, input, output gradient twice."""
    m = get_model("llama3-8b")  # d 4096, f 14336
    L = _L(tp=1, dp=8, zero=3, micro_batch=2, recompute=Recompute.FULL)
    s, b, d, f = 8192, 2, 4096, 14336
    up = s * b * d + 2 * s * b * f + d * f  # 67,108,864 + 469,762,048 + 58,720,256
    assert up == 595_591_168
    assert (
        float(float8_cast_bytes(m, s, L)[0]) == up
    )  # larger than the down projection's 427,819,008
    c = dict(constants()["memory"], cuda_context_bytes=0.0, framework_residual_bytes=0.0)
    pc = param_counts(m)
    bf16 = memory_per_device(
        m, pc, make_plan(m, 1e9, s, float(s * 16), "bf16"), L, s, np.array([1.0]), c
    )
    fp8 = memory_per_device(
        m, pc, make_plan(m, 1e9, s, float(s * 16), "fp8"), L, s, np.array([1.0]), c
    )
    for k in range(3):  # weights, gradients, optimizer: bf16 weights and fp32 master either way
        assert float(fp8.first[k][0]) == float(bf16.first[k][0])
    assert float(fp8.first[3][0] - bf16.first[3][0]) == pytest.approx(up)
    assert float(bf16.float8_first[0]) == 0.0


@pytest.mark.parametrize("name, gated", [("llama2-7b", True), ("gpt2-small", False)])
def test_compile_saves_one_hidden_tensor_of_a_gated_mlp(name: str, gated: bool) -> None:
    m = get_model(name)
    L = _L(tp=1, dp=1, micro_batch=1)
    s, e = 1024, 2.0
    eager, _ = activation_bytes_per_layer(m, s, L, e, True)
    comp, _ = activation_bytes_per_layer(m, s, L, e, True, compiled=True)
    # gated (llama2-7b, f = 11008): act(gate) recomputed, 1024 × 11008 × 2 bytes = 22,544,384 fewer
    want = 1024 * 11008 * 2 if gated else 0
    assert float(eager[0] - comp[0]) == want
    assert COMPILED_GATED_HIDDEN == 3


def test_compile_flag_reaches_the_plan_from_the_cli_and_a_scenario(tmp_path) -> None:
    from trilemma.errors import InputError
    from trilemma.request.scenario import read_scenario

    p = tmp_path / "s.toml"
    p.write_text("compile = true\n", encoding="utf-8")
    assert read_scenario(str(p))["compile"] is True
    p.write_text('compile = "yes"\n', encoding="utf-8")
    with pytest.raises(InputError):
        read_scenario(str(p))
    est = _estimate(
        "h100-sxm",
        8,
        Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, recompute=Recompute.NONE),
        compile=True,
    )
    plain = _estimate(
        "h100-sxm", 8, Layout(tp=1, pp=1, dp=8, zero=3, micro_batch=1, recompute=Recompute.NONE)
    )
    assert est.to_dict()["memory"]["compile"] is True
    # 32 layers × 4096 tokens × 11008 × 2 bytes fewer activations
    assert plain.memory.activations - est.memory.activations == pytest.approx(32 * 4096 * 11008 * 2)


def test_compile_partitioner_recomputes_act_gate_on_this_machine() -> None:
    """torch.compile with inductor's partitioner (backend aot_eager_decomp_partition: the min-cut
    partitioner without code generation) on the probe's Llama block, fp32: the hidden tensors saved for
    backward (last dim f or 2f) go from 4·f to 3·f per token — act(gate) is recomputed, the product kept."""
    torch = pytest.importorskip("torch")
    from trilemma.probe.model import Block, rope_tables

    m = get_model("llama2-7b").replace(
        n_layers=1, d_model=128, n_heads=4, n_kv_heads=4, ffn_dim=352, vocab_size=256
    )
    torch.manual_seed(0)
    blk = Block(m, False)
    S, B, f = 48, 2, 352
    params = {p.untyped_storage().data_ptr() for p in blk.parameters()}
    rope = rope_tables(S, m.d_head, torch.device("cpu"), torch.float32)

    def hidden_saved(fn) -> int:
        x = torch.randn(B, S, m.d_model, requires_grad=True)
        seen: dict[int, int] = {}

        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in params and t.shape[-1] in (f, 2 * f):
                seen[st.data_ptr()] = st.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = fn(x)
        y.sum().backward()
        return sum(seen.values())

    eager = hidden_saved(lambda x: blk(x, rope))
    compiled = hidden_saved(
        torch.compile(lambda x: blk(x, rope), backend="aot_eager_decomp_partition")
    )
    unit = S * B * f * 4  # one f-wide fp32 tensor
    assert eager == 4 * unit
    assert compiled == COMPILED_GATED_HIDDEN * unit


def test_overlapped_collectives_slow_the_compute_they_hide_behind():
    """NCCL runs one thread block per channel on a streaming multiprocessor: with 16 channels on an
    A100's 108 SMs, kernels that overlap 1 s of communication keep 92 of 108 SMs and take
    1 · (16/108) / (1 − 16/108) = 16/92 s longer; a TPU (collectives on ICI DMA engines) loses nothing."""
    import numpy as np

    from trilemma.estimate.parallel_time import collective_interference_s
    from trilemma.presets import constants, get_hardware

    channels = constants()["memory"]["nccl_channels"]
    assert channels == 16
    a100 = get_hardware("a100-80gb")
    assert a100.compute_units == 108
    assert collective_interference_s(np.array([1.0]), channels, a100.compute_units)[
        0
    ] == pytest.approx(16 / 92)
    assert (
        collective_interference_s(np.array([1.0]), channels, get_hardware("tpu-v4").compute_units)[
            0
        ]
        == 0.0
    )
    assert collective_interference_s(np.array([0.0]), channels, a100.compute_units)[0] == 0.0


def _loss_peak_bytes_per_logit(world: int, vocab: tuple[int, int] = (4096, 8192)) -> float:
    """Bytes per local logit element at the peak of an LM head + cross-entropy step, as PyTorch's MemTracker
    counts them: the peak's tensors other than parameters and gradients, differenced over two vocabulary
    sizes so that what does not scale with the vocabulary (the head's input, the norm's) drops out. One
    rank: eager cross_entropy(logits.float()); ``world`` > 1: torchtitan's tensor-parallel head (sequence-
    parallel norm, column-parallel output with vocab-sharded logits) under DTensor's loss_parallel, on a
    fake process group (no communication happens; every tensor is allocated as on rank 0)."""
    torch = pytest.importorskip("torch")
    import contextlib

    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        SequenceParallel,
        loss_parallel,
        parallelize_module,
    )
    from torch.testing._internal.distributed.fake_pg import FakeStore

    b, s, d = 2, 512, 64
    peaks = []
    for V in vocab:
        dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
        try:
            mesh = init_device_mesh("cpu", (world,))
            torch.manual_seed(0)
            head = nn.Sequential(nn.RMSNorm(d), nn.Linear(d, V, bias=False)).to(torch.bfloat16)
            x = torch.randn(b, s // world, d, dtype=torch.bfloat16, requires_grad=True)
            ctx: contextlib.AbstractContextManager = contextlib.nullcontext()
            if world > 1:
                parallelize_module(
                    head,
                    mesh,
                    {
                        "0": SequenceParallel(),
                        "1": ColwiseParallel(
                            input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False
                        ),
                    },
                )
                x = DTensor.from_local(x, mesh, [Shard(1)], run_check=False)
                ctx = loss_parallel()
            target = torch.randint(0, V, (b, s))
            mt = MemTracker()
            mt.track_external(head)
            with mt, ctx:
                pred = head(x)
                loss = F.cross_entropy(pred.flatten(0, 1).float(), target.flatten(0, 1))
                del pred
                loss.backward()
            (snap,) = mt.get_tracker_snapshot("peak").values()
            by = {str(k).rsplit(".", 1)[-1]: v for k, v in snap.items()}
            peaks.append(by["Total"] - by["PARAM"] - by["GRAD"])
        finally:
            dist.destroy_process_group()
    return (peaks[1] - peaks[0]) / (b * s * (vocab[1] - vocab[0]) / world)


@pytest.mark.parametrize(
    "world, key", [(1, "logits_bytes_per_element"), (8, "loss_parallel_logits_bytes_per_element")]
)
def test_logits_bytes_per_element_as_pytorch_counts_them(world: int, key: str) -> None:
    """Eager cross entropy on one rank holds 12 bytes per logit at its peak (the fp32 log-softmax output,
    its gradient and the gradient of the fp32 cast); DTensor's loss_parallel across TP ranks holds 16 (the
    output beside three fp32 temporaries of its decomposed backward). Both measured, not assumed."""
    assert _loss_peak_bytes_per_logit(world) == pytest.approx(constants()["memory"][key], rel=0.02)


def test_eager_loss_under_tp_costs_loss_parallels_bytes_and_the_head_input_counts() -> None:
    """The planner's last-stage logits term by hand: s·b·V/tp elements × 16 bytes (eager, tp > 1) or 8
    (fused), plus the LM head's whole input and the final norm's sequence shard, 2 bytes each."""
    m = get_model("llama2-7b")  # _estimate's model, at 4,096 tokens a sequence
    lay = Layout(tp=8, pp=1, dp=1, zero=0, micro_batch=2, recompute=Recompute.FULL, sp=True)
    eager = _estimate("h100-sxm", 8, lay)
    fused = _estimate("h100-sxm", 8, lay, fused_loss=True)
    tokens = 2 * 4096
    head = 2 * tokens * m.d_model * (1 + 1 / 8)
    mem = constants()["memory"]
    for est, per in (
        (eager, mem["loss_parallel_logits_bytes_per_element"]),
        (fused, mem["fused_logits_bytes_per_element"]),
    ):
        parts = est.to_dict()["memory"]["other_parts"]
        assert parts["logits"] == pytest.approx(tokens * m.vocab_size / 8 * per + head)


def _saved_bytes(fn, *args) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``fn(*args)`` runs (parameters too)."""
    torch = pytest.importorskip("torch")
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return sum(seen.values())


def test_hugging_face_rmsnorm_keeps_an_fp32_copy_of_its_input() -> None:
    """transformers' LlamaRMSNorm upcasts its input (hidden_states.to(torch.float32)) and pow saves that copy:
    4 bytes per element of a bf16 input, not the 2 of a fused kernel, with the weight frozen (a LoRA base); the
    weight's own product saves the 2-byte normalised tensor besides when the weight trains. DtypeSpec.norm_input
    fp32 counts the 4."""
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    b, s, d = 2, 64, 256
    norm = llama.LlamaRMSNorm(d).to(torch.bfloat16)
    x = torch.randn(b, s, d, dtype=torch.bfloat16, requires_grad=True)
    rows = b * s  # the saved rsqrt: one fp32 per row
    norm.weight.requires_grad_(False)
    weight = d * 2
    assert _saved_bytes(norm, x) == 4 * b * s * d + 4 * rows + weight
    norm.weight.requires_grad_(True)
    assert _saved_bytes(norm, x) == (4 + 2) * b * s * d + 4 * rows + weight


def test_autocast_probabilities_by_hand() -> None:
    """Eager attention under torch.autocast: softmax autocasts to float32 (PyTorch AMP docs, "CUDA Ops that can
    autocast to float32"), so softmax saves its fp32 output; dropout saves a 1-byte mask; the P·V matmul runs
    in 16-bit and saves the 16-bit copy autocast made of the dropped-out probabilities. The same chain written
    out on this CPU (whose autocast keeps softmax in bf16) saves 4 + 1 + 2 bytes per score, as the inventory
    counts with attention_probs fp32; without the upcast 2 + 1 + 2. (Dropout as F.dropout runs it on a GPU,
    native_dropout with a bool mask; on a CPU F.dropout keeps a mask of the input's dtype.)"""
    torch = pytest.importorskip("torch")
    h, s, d_h = 4, 64, 32
    scores = torch.randn(1, h, s, s, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, h, s, d_h, dtype=torch.bfloat16, requires_grad=True)

    def chain(x, upcast: bool):
        p = torch.softmax(x.float() if upcast else x, dim=-1)
        p, _mask = torch.native_dropout(p, 0.1, True)
        return p.to(torch.bfloat16) @ v

    n = h * s * s
    assert _saved_bytes(chain, scores, True) - v.nbytes == (4 + 1 + 2) * n
    assert _saved_bytes(chain, scores, False) - v.nbytes == (2 + 1 + 2) * n
    m = get_model("bert-large").replace(n_layers=1, d_model=h * d_h, n_heads=h, ffn_dim=4 * h * d_h)
    L = _L()
    eager, _ = activation_bytes_per_layer(m, s, L, 2.0, False)
    amp, _ = activation_bytes_per_layer(m, s, L, 2.0, False, probs_bytes=4.0)
    assert float(amp[0] - eager[0]) == pytest.approx((7 - 5) * n)
    fp32_norms, _ = activation_bytes_per_layer(m, s, L, 2.0, False, norm_bytes=4.0)
    assert float(fp32_norms[0] - eager[0]) == pytest.approx(
        2 * (4 - 2) * s * m.d_model
    )  # two norms a layer


def test_op_level_checkpointing_keeps_the_inventory_eager_and_compiled() -> None:
    """torchtitan's op-level selective checkpointing (its _save_list: matmuls and flash attention, every
    second matmul recomputed) on a torchtitan-style Llama block — separate wq, wk, wv, wo, w1, w2, w3, GQA,
    its eager fp32 RMSNorm — keeps what ``activation_bytes_per_layer`` counts for recompute "op": the block's
    input, Q, V, the attention output with its log-sum-exp, w1's output and w2's. PyTorch's MemTracker at
    the end of the forward, less the block's input and output, in eager mode and under torch.compile
    (backend aot_eager_decomp_partition: inductor's partitioner, which honours the policy, without code
    generation). The same bytes both ways: compile changes nothing that op-level checkpointing keeps."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    d, h, kv, f, S, B = 128, 4, 2, 352, 64, 2
    hd = d // h

    class Norm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            y = x.float()
            return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(
                x
            ) * self.weight

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = Norm(), Norm()
            lin = lambda i, o: nn.Linear(i, o, bias=False)  # noqa: E731
            self.wq, self.wk, self.wv, self.wo = (
                lin(d, d),
                lin(d, kv * hd),
                lin(d, kv * hd),
                lin(d, d),
            )
            self.w1, self.w2, self.w3 = lin(d, f), lin(f, d), lin(d, f)

        def forward(self, x):
            y = self.n1(x)
            q = self.wq(y).view(B, S, h, hd).transpose(1, 2)
            k = self.wk(y).view(B, S, kv, hd).transpose(1, 2).repeat_interleave(h // kv, 1)
            v = self.wv(y).view(B, S, kv, hd).transpose(1, 2).repeat_interleave(h // kv, 1)
            o = (
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
                .transpose(1, 2)
                .reshape(B, S, d)
            )
            x = x + self.wo(o)
            z = self.n2(x)
            return x + self.w2(F.silu(self.w1(z)) * self.w3(z))

    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default}

    def policy():
        count = {"mm": 0}

        def decide(ctx, op, *args, **kwargs):
            if op == aten.mm.default:
                count["mm"] += 1
            keep = op in save and not (op == aten.mm.default and count["mm"] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(decide)

    torch.manual_seed(0)
    blk = Block()

    def sac(x):
        return checkpoint(blk, x, use_reentrant=False, context_fn=policy)

    m = get_model("llama3-8b").replace(
        n_layers=1, d_model=d, n_heads=h, n_kv_heads=kv, ffn_dim=f, vocab_size=256
    )
    _, kept = activation_bytes_per_layer(m, S, _L(micro_batch=B, recompute=Recompute.OP), 4.0, True)
    for fn in (sac, torch.compile(sac, backend="aot_eager_decomp_partition")):
        x = torch.randn(B, S, d, requires_grad=True)
        mt = MemTracker()
        mt.track_external(blk)
        with mt:
            out = fn(x)
            (cats,) = mt.get_tracker_snapshot("current").values()
            act = {str(k).rsplit(".", 1)[-1]: v for k, v in cats.items()}["ACT"]
            out.sum().backward()
        # MemTracker's activations: the block's input (the inventory's one kept layer input), what the
        # checkpoint keeps, and the block's output, which is the next block's input and not this one's
        assert act - out.nbytes == pytest.approx(float(kept[0]), rel=0.01)
