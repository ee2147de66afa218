"""The help texts of the request fields that more than one verb shares (estimate and solve)."""

TASK_HELP = (
    "what the model's head predicts: causal-lm (default: the next token over the vocabulary) or "
    "classification (a few classes from a pooled token, as a sequence-classification fine-tune: no LM head "
    "GEMMs, no vocabulary cross-entropy, no logits in memory)"
)
ASYNC_TP_HELP = (
    "asynchronous tensor parallelism (torchtitan's enable_async_tensor_parallel, Megatron-Core's "
    "--tp-comm-overlap): under sequence parallelism the forward's TP all-gathers and reduce-scatters "
    "are split by rank and overlapped with their matmuls; default: the stack's tp_overlap (off "
    "without --stack)"
)
COMPILE_HELP = (
    "the model runs under torch.compile (inductor): a gated MLP saves 3 hidden tensors per token "
    "instead of eager PyTorch's 4 (act(gate) is recomputed in the fused backward); default: on "
    "where the stack's host is compile (off without --stack)"
)
PRECISION_HELP = (
    "bf16, fp16, fp32, tf32 or fp8 (fp8: float8 linears, torchao Float8Linear / torchtitan's "
    "--model.converters float8 — fp8 matmuls, bf16 weights and activations, fp32 master copy)"
)
EXPORT_HELP = "print the plan as an engine's config instead: torchtitan, megatron, deepspeed or hf (trilemma export)"
FINETUNE_HELP = (
    "fine-tune the model instead of pre-training it: full, lora, qlora (LoRA on an nf4 base with double "
    "quantisation, bf16 compute) or freeze (with --trainable-layers N: the last N layers train); grpo, dpo "
    "or ppo (RL and preference post-training: a reference model, for grpo and ppo a colocated generation "
    "engine, for ppo a reward model and a trained critic; LoRA when --lora-rank/--lora-targets are given); "
    "solve also takes auto or a list (lora,qlora)"
)
LORA_TARGETS_HELP = "attn, mlp, all-linear (default) or module names, e.g. q_proj,v_proj"
BASE_PRECISION_HELP = (
    "storage of the frozen base: bf16 (default), fp16, int8 (LLM.int8; lora), nf4 or gptq4 (qlora; gptq4: "
    "a GPTQ 4-bit model run by AutoGPTQ)"
)
OPTIMIZER_HELP = (
    "adamw (default), adamw-8bit, paged-adamw-8bit (bitsandbytes), adafactor, sgd or lion"
)
TRAINER_HELP = (
    "the fine-tuning trainer (hf-trainer, trl, torchtune, unsloth, liger, peft-bench, axolotl, llama-factory, "
    "nemo, verl, openrlhf, nemo-rl: `trilemma presets trainers`): what it keeps on the device — activation "
    "offload, its loss kernel (eager, chunked, fused linear, flash-attn's), optimizer-in-backward, an fp32 "
    "master; for RL its reference, its rollout engine's share, process and log-probabilities; default none: "
    "eager loss, no offload, fp32 master"
)
KL_REFERENCE_HELP = (
    "an RL policy's frozen reference model for the KL penalty (--finetune grpo, dpo or ppo); default: the "
    "--trainer's GRPO default (trl: none, its beta 0.0; unsloth: held, its beta 0.001; verl: none; openrlhf: "
    "held, its init_coef 0.01; nemo-rl: held, 0.01), else the method's: "
    "none for grpo (TRL's GRPOTrainer, verl), held for dpo and ppo (TRL, OpenRLHF's init_coef 0.01)"
)
ACTIVATION_OFFLOAD_HELP = (
    "checkpointed layer inputs in host memory (torchtune's enable_activation_offloading, Unsloth's "
    "offloaded gradient checkpointing); default: the trainer's"
)
OFFLOAD_HELP = (
    "none (default), optimizer (ZeRO-Offload: states and CPU Adam on the host) or optimizer+params "
    "(ZeRO-Infinity: the weights too); host memory is checked (--host-memory)"
)
HOST_POWER_HELP = (
    "host and network power per node (CPUs, memory, NICs, fans), e.g. 4.6kW; 0 counts the devices "
    "alone, as published energy figures do (default 575 W per device: a DGX H100's 10.2 kW less its 8 "
    "GPUs' 5.6 kW)"
)
DEPLOY_HELP = (
    "where the trained model must run: a device preset (iphone-15-pro, snapdragon-8-gen3, tensor-g3, "
    "macbook-air-m2-8gb, rtx-4090, ...: presets/devices.toml) or a hardware preset"
)
RUNTIME_HELP = (
    "with --deploy: the runtime on the device (llamacpp-metal, llamacpp-cpu, mlc, mlx, executorch-xnnpack, "
    "executorch-qnn, qnn-genie, coreml-ane, coreml-gpu, litert-gpu, ort-genai, …; default the device's): "
    "its compute units, bandwidth share, fixed cost per token and weight formats (presets/runtimes.toml)"
)
DEPLOY_PRECISION_HELP = (
    "weights on the device: int4, int8 (one fp16 scale per 32 weights) or fp16 (default int4)"
)
CONTEXT_HELP = "tokens of KV cache on the device, e.g. 4k (default: the plan's sequence length)"
HOST_MEMORY_HELP = "host memory per node for offloaded states, e.g. 1TB (default 125 GB per device, a DGX A100's share)"
FAILURE_RATE_HELP = (
    "unexpected job interruptions per GPU-hour, e.g. 5e-5 (default: Llama 3's 1.97e-5, 419 in 54 days "
    "on 16,384 H100s; OPT-175B's 2021 cloud cluster logged 7.9e-5)"
)
RESTART_HELP = (
    "time from a failure to training again (detection, swapping the node, restart, checkpoint reload), "
    "e.g. 30min (default 10min)"
)
STORAGE_BW_HELP = (
    "the whole job's checkpoint write bandwidth, e.g. 200GB/s (default: 1.22e8 B/s per GPU, Llama 3's "
    "2 TB/s sustained over 16,384 GPUs)"
)


MEMORY_HEADROOM_HELP = (
    "share of device memory a plan must leave free to count as fitting, e.g. 0.1 or 10% "
    "(default: the upper end of the memory model's 80% band from its leave-one-source-out "
    "error; 0 = fit to the last byte)"
)
GOODPUT_HELP = (
    "useful share of wall time, 0-1, replacing the model (default: modelled — failures, checkpoint "
    "writes and restarts for this GPU count and duration, times the straggler share: each step "
    "waits for the slowest GPU, the expected maximum of the GPU count's paces spread as Sinha et al. "
    "2022 measured; the speed table and --json's time.reliability and time.other_share show each part)"
)
SOFTMAX_PASSES_HELP = (
    "with --no-flash: passes over the score matrix between the attention GEMMs, each a read and a "
    "write — 1 Megatron-LM's fused softmax, 3 eager PyTorch (scale, mask, torch.softmax), "
    "6 a softmax written by hand (max, subtract, exp, sum, divide); default: the stack's (3 for "
    "eager attention, else 1)"
)
FUSED_LOSS_HELP = (
    "a fused cross-entropy kernel (Megatron-LM, llm-foundry): 8 bytes per logit instead of eager "
    "PyTorch's 12 (16 with --tp above 1: DTensor's loss_parallel); default: the stack's (off "
    "without --stack)"
)
STACK_HELP = (
    "the software stack that runs the loop (megatron-lm, megatron-core, torchtitan, hf-trainer, "
    "nanogpt, llm.c, ...: `trilemma presets stacks`): its attention kernel, fusions, overlaps and "
    "host set --flash, --softmax-passes, --fused-loss, --compile and --async-tp where those flags "
    "are not given; default none: StackSpec's defaults, with a wider band"
)
