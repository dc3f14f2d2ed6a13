#!/usr/bin/env bash
# Random access at scale: how much of a ~200 MB archive `sc extract` reads and decodes to get
# one 1.5 MiB tensor.
#
#   benches/access.sh [SOURCE.safetensors] [COPIES]
#     (default: ../shared/data/all-MiniLM-L6-v2.BF16.safetensors, 7 copies)
#
# Builds a safetensors file from COPIES copies of SOURCE's tensors under new names, each copy
# followed by a 1.5 MiB BF16 tensor `copyK.extra.weight` ([768, 1024], real bytes taken from
# the copy's largest tensor), encodes it (1 MiB blocks, FAST), extracts the middle copy's extra
# tensor with `sc extract -v`, and checks the bytes against the original file. Nothing is
# kept: the files live in a temporary directory. Needs python3 and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=${1:-../shared/data/all-MiniLM-L6-v2.BF16.safetensors}
COPIES=${2:-7}
cargo build --release -q
SC=$PWD/target/release/sc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 benches/big_safetensors.py "$SOURCE" "$COPIES" "$work/big.safetensors"

name="copy$((COPIES / 2)).extra.weight"
"$SC" encode -q -b 1M "$work/big.safetensors" -o "$work/big.sc"
echo "original $(stat -c %s "$work/big.safetensors") bytes, archive $(stat -c %s "$work/big.sc") bytes"
"$SC" list "$work/big.sc" | grep -E "^($name|total) "
"$SC" extract -v --raw -o "$work/t.bin" "$work/big.sc" -t "$name"
python3 - "$work/big.safetensors" "$name" "$work/t.bin" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
b, e = json.loads(data[8:8 + n])[sys.argv[2]]["data_offsets"]
same = open(sys.argv[3], "rb").read() == data[8 + n + b:8 + n + e]
print(f"extracted {e - b} bytes: {'identical to' if same else 'DIFFERENT from'} the original")
sys.exit(0 if same else 1)
EOF
