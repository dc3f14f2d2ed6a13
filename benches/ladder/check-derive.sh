#!/usr/bin/env bash
# Makes the ladder (make-ladder.sh) and re-derives every quant in it from the seed with sc's
# port of llama.cpp's reference quantizers (derive_check.rs): per quant and ggml type, blocks
# compared and identical. Exit status: derive_check's (1 when any block differs).
#
#   benches/ladder/check-derive.sh [VARIANT [SEED.gguf]]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ladder=$("$here/make-ladder.sh" "$@")
echo "$ladder"
seed=$(echo "$ladder" | awk '$1 == "seed" { print $2 }')
mapfile -t quants < <(echo "$ladder" | awk '$1 != "seed" { print $2 }')
cd "$here/../.."
nice -n 19 cargo run --quiet --release --features internals --example derive_check -- \
    "$seed" "${quants[@]}"
