source "$(dirname -- "${BASH_SOURCE[0]}")/base.sh"

MODEL_ARGS+=(
   --num-layers 36
   --hidden-size 2560
   --ffn-hidden-size 9728
   --num-attention-heads 32
   --num-query-groups 8
   --kv-channels 128
   --qk-layernorm
   --rotary-base "${MODEL_ARGS_ROTARY_BASE:-1000000}"
   --vocab-size 151936
)
