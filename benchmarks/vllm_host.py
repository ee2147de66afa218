"""vLLM's CPU work a sequence a decode step, measured with vLLM 0.9.0's own scheduler and output processor.

    python benchmarks/vllm_host.py [--site DIR] [--seeds 3]

A colocated RL rollout decodes hundreds of sequences together, and each decode step vLLM's Python walks
every running sequence twice: the engine core (``Scheduler.schedule`` and ``update_from_output``: slots in
the paged KV cache, prefix-cache block hashes, stop checks, the step's outputs) and the output processor
(``OutputProcessor.process_outputs``: incremental detokenisation, the sampled token's log-probability
when asked). The engine core runs in series with the GPU in every mode; the output processor too when the
engine runs in the trainer's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, which vLLM sets itself for the
``external_launcher`` executor: vllm/config.py ParallelConfig.__post_init__), else it overlaps in a second
process. trilemma.estimate.rl times both from this script's figures.

The GPU is replaced by a loop that samples one token a sequence (the model runner's own per-sequence work,
input preparation and the sampled tokens' ``tolist``, needs a GPU and is not measured: the figures are a
lower bound). Llama 3.1 8B's shape and KV blocks (16 tokens, 8 KV heads of 128, bf16), vLLM's defaults for
an offline ``LLM`` on an 80 GB GPU (max_num_seqs 1,024, max_num_batched_tokens 16,384, prefix caching on),
256 sequences of 150 prompt tokens (32 samples of 8 prompts), temperature 1, lengths drawn from an
exponential of mean 795 capped at 3,946 (NeMo-RL V0.3's GRPO row). The tokenizer is a 32,000-token byte
BPE trained here on Python sources (incremental detokenisation's cost a token does not depend on the
vocabulary's size; no Hub download).

vLLM 0.9.0 wants torch 2.7 with CUDA; nothing of it that this script runs needs either, so it is installed
apart, without dependencies, into ``--site`` (never into the project's environment)::

    pip install --target /tmp/vllm_site --no-deps vllm==0.9.0 transformers==4.52.4 tokenizers==0.21.1 \\
        huggingface_hub==0.33.0 msgspec cachetools blake3 pyzmq cloudpickle py-cpuinfo prometheus_client \\
        openai sniffio aiohttp multidict yarl propcache aiohappyeyeballs aiosignal frozenlist gguf

Measured on this project's 2-core AMD EPYC machine (2026-12-07, ``--seeds 7``), medians, µs a sequence a
step: engine core 8.2 without log-probabilities, 15.5 with ``logprobs=0``; output processor 5.1 and 9.4
(trilemma.estimate.rl.VLLM_CORE_SEQ_S, VLLM_OUTPUT_SEQ_S). Runs of three seeds moved by up to 2.6 µs.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time
import types

SHAPE = {  # Llama 3.1 8B's config.json
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16", "bos_token_id": 0,
    "eos_token_id": 1, "tie_word_embeddings": False, "hidden_act": "silu",
}  # fmt: skip
NUM_BLOCKS = (
    13_000  # ~27 GB of KV cache: 0.6 of 80 GB less the 16 GB of weights and the activations
)
EOS = 1


def _model_dir(site: str) -> str:
    """A directory with Llama 3.1 8B's config and a byte-BPE tokenizer trained on the installed sources."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    out = tempfile.mkdtemp(prefix="vllm_host_")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    special = ["<|begin_of_text|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=32000, special_tokens=special, initial_alphabet=alphabet
    )
    tok.train(sorted(glob.glob(f"{site}/transformers/**/*.py", recursive=True))[:1500], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=special[0], eos_token=special[1])
    fast.save_pretrained(out)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(SHAPE, f)
    return out


def _vllm(site: str) -> dict:
    """vLLM's engine pieces, imported without its package initialiser (which loads the CUDA engine)."""
    sys.path.insert(0, site)
    pkg = types.ModuleType("vllm")
    pkg.__path__ = [os.path.join(site, "vllm")]
    sys.modules["vllm"] = pkg
    import vllm.model_executor.models.registry as registry
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()
    # the architecture's interfaces, as vLLM's registry reports them for LlamaForCausalLM (its inspection runs
    # in a subprocess that would import the package initialiser)
    info = registry._ModelInfo(
        architecture="LlamaForCausalLM", is_text_generation_model=True, is_pooling_model=True,
        supports_cross_encoding=False, supports_multimodal=False, supports_pp=True, has_inner_state=False,
        is_attention_free=False, is_hybrid=False, has_noops=False, supports_transcription=False,
        supports_v0_only=False,
    )  # fmt: skip
    registry._LazyRegisteredModel.inspect_model_cls = lambda self: info
    import vllm.engine.arg_utils as arg_utils
    import vllm.sampling_params as sampling
    import vllm.transformers_utils.tokenizer_group as tokenizer_group
    import vllm.v1.core.sched.scheduler as scheduler
    import vllm.v1.engine as engine
    import vllm.v1.engine.output_processor as output_processor
    import vllm.v1.kv_cache_interface as kv
    import vllm.v1.outputs as outputs
    import vllm.v1.request as request
    import vllm.v1.structured_output as structured

    return {
        "EngineArgs": arg_utils.EngineArgs,
        "SamplingParams": sampling.SamplingParams,
        "RequestOutputKind": sampling.RequestOutputKind,
        "init_tokenizer_from_configs": tokenizer_group.init_tokenizer_from_configs,
        "Scheduler": scheduler.Scheduler,
        "EngineCoreRequest": engine.EngineCoreRequest,
        "OutputProcessor": output_processor.OutputProcessor,
        "FullAttentionSpec": kv.FullAttentionSpec,
        "KVCacheConfig": kv.KVCacheConfig,
        "KVCacheGroupSpec": kv.KVCacheGroupSpec,
        "KVCacheTensor": kv.KVCacheTensor,
        "LogprobsLists": outputs.LogprobsLists,
        "ModelRunnerOutput": outputs.ModelRunnerOutput,
        "Request": request.Request,
        "StructuredOutputManager": structured.StructuredOutputManager,
    }


def measure(
    v: dict, model: str, logprobs: int | None, seed: int, n_req: int = 256
) -> tuple[float, float]:
    """(engine core, output processor) seconds a sequence a decode step over one rollout."""
    import numpy as np
    import torch

    args = v["EngineArgs"](
        model=model, tokenizer=model, max_model_len=4096, enable_prefix_caching=True,
        max_num_seqs=1024, max_num_batched_tokens=16384, device="cpu", dtype="bfloat16",
    )  # fmt: skip
    cfg = args.create_engine_config()
    spec = v["FullAttentionSpec"](16, 8, 128, torch.bfloat16, False)
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    tensors = {n: v["KVCacheTensor"](size=spec.page_size_bytes * NUM_BLOCKS) for n in layers}
    kvc = v["KVCacheConfig"](NUM_BLOCKS, tensors, [v["KVCacheGroupSpec"](layers, spec)])
    cfg.cache_config.num_gpu_blocks = NUM_BLOCKS
    sched = v["Scheduler"](cfg, kvc, v["StructuredOutputManager"](cfg), log_stats=False)
    tok = v["init_tokenizer_from_configs"](cfg.model_config, cfg.scheduler_config, cfg.lora_config)
    outp = v["OutputProcessor"](tok, log_stats=False)
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.exponential(795.0, n_req).astype(int) + 1, 3946)
    prompts = [rng.integers(2, 32000, 150).tolist() for _ in range(8)]
    target, made = {}, {}
    for i in range(n_req):
        sp = v["SamplingParams"](
            temperature=1.0, max_tokens=3946, logprobs=logprobs,
            output_kind=v["RequestOutputKind"].FINAL_ONLY,
        )  # fmt: skip
        req = v["EngineCoreRequest"](
            f"r{i}", prompts[i % 8], None, None, None, sp, EOS, time.time(), None, None
        )
        outp.add_request(req, None)
        sched.add_request(v["Request"].from_engine_core_request(req))
        target[f"r{i}"], made[f"r{i}"] = int(lengths[i]), 0
    core = out = 0.0
    seq_steps = 0
    while sched.has_requests():
        t0 = time.perf_counter()
        so = sched.schedule()
        t1 = time.perf_counter()
        ids = list(so.num_scheduled_tokens)
        sampled = []
        for r in ids:  # the GPU's stand-in: one token a sequence once its prompt is in the cache
            req = sched.requests[r]
            if req.num_computed_tokens + so.num_scheduled_tokens[r] < req.num_tokens:
                sampled.append([])
                continue
            made[r] += 1
            sampled.append([EOS if made[r] >= target[r] else int(rng.integers(2, 32000))])
        lp = None
        if logprobs is not None:
            lp = v["LogprobsLists"](
                [s or [0] for s in sampled], [[-1.0] for _ in sampled], [1] * len(ids)
            )
        mro = v["ModelRunnerOutput"](ids, {r: i for i, r in enumerate(ids)}, sampled, None, lp, {})
        t2 = time.perf_counter()
        eco = sched.update_from_output(so, mro)
        t3 = time.perf_counter()
        res = outp.process_outputs(eco.outputs)
        t4 = time.perf_counter()
        core += (t1 - t0) + (t3 - t2)
        out += t4 - t3
        seq_steps += len(ids)
        if res.reqs_to_abort:
            sched.finish_requests(res.reqs_to_abort, None)
    return core / seq_steps, out / seq_steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--site", default="/tmp/vllm_site", help="where vLLM 0.9.0 was installed (docstring)"
    )
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    v = _vllm(a.site)
    model = _model_dir(a.site)
    measure(v, model, 0, seed=99, n_req=32)  # warm-up: imports, first allocations
    for logprobs in (None, 0):
        runs = [measure(v, model, logprobs, seed) for seed in range(1, a.seeds + 1)]
        core = statistics.median(r[0] for r in runs) * 1e6
        out = statistics.median(r[1] for r in runs) * 1e6
        print(
            f"logprobs={logprobs}: engine core {core:.1f} us, output processor {out:.1f} us a sequence a step"
        )


if __name__ == "__main__":
    main()
