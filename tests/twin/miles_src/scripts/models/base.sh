# Flags every Qwen-style dense model shares; the model files source this and append their sizes.
MODEL_ARGS=(
   --swiglu
   --disable-bias-linear
   --normalization "RMSNorm"
   --norm-epsilon 1e-6
   --use-rotary-position-embeddings
   --group-query-attention
)
