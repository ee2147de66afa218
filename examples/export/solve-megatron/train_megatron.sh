#!/usr/bin/env bash
# Megatron-LM: auto-30.2B (L=56, d=7168) on 1024× mi300x, tp=1 pp=1 dp=1024 zero=3 recompute=none micro_batch=2, bf16
# GPUs 1024 = tp 1 × pp 1 × cp 1 × dp 1024; global batch 2048 sequences = micro-batch 2 × accumulation 1 × dp 1024
# steps 67140 × 2048 × 4096 tokens = 563,211,141,120 tokens
# Run from a Megatron-LM checkout on each node (NODE_RANK 0 .. nodes-1, MASTER_ADDR of node 0).
set -euo pipefail
: "${DATA_PATH:?set DATA_PATH to the preprocessed data prefix (tools/preprocess_data.py)}"
: "${TOKENIZER:?set TOKENIZER to a Hugging Face tokenizer name or path}"
torchrun --nnodes 128 --nproc-per-node 8 --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-localhost}" --master-port "${MASTER_PORT:-6000}" \
  pretrain_gpt.py \
  --num-layers 56 \
  --hidden-size 7168 \
  --ffn-hidden-size 19200 \
  --num-attention-heads 56 \
  --group-query-attention \
  --num-query-groups 8 \
  --position-embedding-type rope \
  --max-position-embeddings 4096 \
  --normalization RMSNorm \
  --swiglu \
  --disable-bias-linear \
  --untie-embeddings-and-output-weights \
  --attention-dropout 0 \
  --hidden-dropout 0 \
  --tensor-model-parallel-size 1 \
  --pipeline-model-parallel-size 1 \
  --use-megatron-fsdp \
  --data-parallel-sharding-strategy optim_grads_params \
  --micro-batch-size 2 \
  --global-batch-size 2048 \
  --seq-length 4096 \
  --train-iters 67140 \
  --bf16 \
  --attention-backend flash \
  --optimizer adam \
  --lr 0.0003 \
  --min-lr 3e-05 \
  --lr-decay-style cosine \
  --lr-warmup-iters 2000 \
  --lr-decay-iters 67140 \
  --weight-decay 0.1 \
  --clip-grad 1 \
  --adam-beta1 0.9 \
  --adam-beta2 0.95 \
  --adam-eps 1e-05 \
  --ckpt-format fsdp_dtensor \
  --save-interval 406 \
  --async-save \
  --use-persistent-ckpt-worker \
  --data-path "$DATA_PATH" \
  --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$TOKENIZER" \
  --save "${SAVE:-checkpoints}" \
  --load "${SAVE:-checkpoints}"
