MODEL_ARGS=(
   --num-layers 47
   --hidden-size 2048
   --ffn-hidden-size 10240
   --num-attention-heads 20
   --kv-channels 128
   --normalization RMSNorm
   --norm-epsilon 1e-5
   --swiglu
   --disable-bias-linear
   --rotary-base 1000000
   --vocab-size 154880
   --moe-ffn-hidden-size 1536
   --num-experts 64
   --moe-router-topk 4
)
