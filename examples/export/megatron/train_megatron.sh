#!/usr/bin/env bash
# Megatron-LM: llama2-7b on 2048× a100-80gb, tp=2 pp=1 dp=1024 zero=2 recompute=none micro_batch=1, bf16
# GPUs 2048 = tp 2 × pp 1 × cp 1 × dp 1024; global batch 1024 sequences = micro-batch 1 × accumulation 1 × dp 1024
# steps 476838 × 1024 × 4096 tokens = 2,000,003,530,752 tokens
# Run from a Megatron-LM checkout on each node (NODE_RANK 0 .. nodes-1, MASTER_ADDR of node 0).
set -euo pipefail
: "${DATA_PATH:?set DATA_PATH to the preprocessed data prefix (tools/preprocess_data.py)}"
: "${TOKENIZER:?set TOKENIZER to a Hugging Face tokenizer name or path}"
torchrun --nnodes 256 --nproc-per-node 8 --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
  pretrain_gpt.py \
  --num-layers 32 \
  --hidden-size 4096 \
  --ffn-hidden-size 11008 \
  --num-attention-heads 32 \
  --position-embedding-type rope \
  --max-position-embeddings 4096 \
  --normalization RMSNorm \
  --swiglu \
  --disable-bias-linear \
  --untie-embeddings-and-output-weights \
  --attention-dropout 0 \
  --hidden-dropout 0 \
  --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 1 \
  --sequence-parallel \
  --use-megatron-fsdp \
  --data-parallel-sharding-strategy optim_grads \
  --micro-batch-size 1 \
  --global-batch-size 1024 \
  --seq-length 4096 \
  --train-iters 476838 \
  --bf16 \
  --attention-backend flash \
  --optimizer adam \
  --lr 0.0003 \
  --min-lr 3e-05 \
  --lr-decay-style cosine \
  --lr-warmup-iters 2000 \
  --lr-decay-iters 476838 \
  --weight-decay 0.1 \
  --clip-grad 1 \
  --adam-beta1 0.9 \
  --adam-beta2 0.95 \
  --adam-eps 1e-05 \
  --ckpt-format fsdp_dtensor \
  --save-interval 410 \
  --async-save \
  --use-persistent-ckpt-worker \
  --data-path "$DATA_PATH" \
  --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$TOKENIZER" \
  --save "${SAVE:-checkpoints}" \
  --load "${SAVE:-checkpoints}"
