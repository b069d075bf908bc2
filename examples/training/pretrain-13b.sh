#!/bin/bash
# A launch script as Megatron-LM users write them: a 13B Llama-2-like
# model, TP 8 inside each server, 4 pipeline stages across servers, bf16
# with the distributed optimizer. `kind = "megatron"` reads the flags it
# gives pretrain_gpt.py; the paths and torchrun's own flags change
# nothing on the network.

GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-8}
CHECKPOINTS=${1:-checkpoints/13b}

TP=8
PP=4

MODEL_ARGS=(
    --num-layers 40
    --hidden-size 5120
    --ffn-hidden-size 13824
    --num-attention-heads 40
    --seq-length 4096
    --max-position-embeddings 4096
    --position-embedding-type rope
    --swiglu
    --normalization RMSNorm
    --disable-bias-linear
    --untie-embeddings-and-output-weights
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 16      # 8 micro-batches per DP rank
    --train-iters 250000
    --lr 3.0e-4
    --min-lr 3.0e-5
    --lr-decay-style cosine
    --clip-grad 1.0
    --bf16
)
TRAINING_ARGS+=(--use-distributed-optimizer --overlap-grad-reduce)

PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
)

DATA_ARGS="--tokenizer-type HuggingFaceTokenizer --tokenizer-model llama2 --vocab-size 32000"

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES \
    pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    $DATA_ARGS \
    --save $CHECKPOINTS --load $CHECKPOINTS
