# GLM-5.2 pruned to its first 5 layers (3 dense + 2 MoE) for CI.
N_DENSE_LAYERS=3
N_MOE_LAYERS=2

MODEL_ARGS=(
   --moe-layer-freq "[0]*${N_DENSE_LAYERS}+[1]*${N_MOE_LAYERS}"
   --num-experts 256
   --moe-router-topk 8
   --moe-ffn-hidden-size 2048
   --num-layers $((N_DENSE_LAYERS + N_MOE_LAYERS))
   --hidden-size 6144
   --ffn-hidden-size 12288
   --num-attention-heads 64
   --disable-bias-linear
   --swiglu
   --untie-embeddings-and-output-weights
   --normalization RMSNorm
   --rotary-base 1000000
)
