#!/usr/bin/env bash
# Makes the checkpoint run of benches/make-run.py (cached: ~/.cache/sc-data/run unless OUT is
# given) and measures it: each checkpoint (weights, optimizer moments) coded by `sc encode
# --base auto` over the whole run, and against the previous checkpoint XORed and `zstd -19`.
# Usage: bash benches/make-run.sh [OUT] [SC]   (SC: the sc binary, default target/release/sc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$HOME/.cache/sc-data/run}
sc=${2:-$here/../target/release/sc}
py=$(ls -d "$HOME"/.cache/sc-ci/venv-*/bin/python | head -1)
if ! ls "$out"/run-a/step-*.safetensors >/dev/null 2>&1; then
    "$py" "$here/make-run.py" --out "$out" --steps "${STEPS:-60}" --every "${EVERY:-20}"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sc" encode -f --base auto -v "$out" -o "$work/sc" 2>&1 | grep -E ': base |coded alone' || true
echo "file  original  sc  sc%  xor+zstd-19  xor%"
for run in "$out"/run-*; do
    prev_w=; prev_o=
    for f in "$run"/step-*[0-9].safetensors; do
        o=${f%.safetensors}.optim.safetensors
        for cur in "$f" "$o"; do
            prev=$([ "$cur" = "$f" ] && echo "$prev_w" || echo "$prev_o")
            rel=${cur#"$out"/}
            n=$(stat -c %s "$cur")
            s=$(stat -c %s "$work/sc/$rel.sc")
            x=-
            if [ -n "$prev" ]; then
                "$py" -c 'import sys,numpy as n;a=n.fromfile(sys.argv[1],n.uint8);b=n.fromfile(sys.argv[2],n.uint8);m=min(len(a),len(b));a[:m]^=b[:m];a.tofile(sys.argv[3])' "$cur" "$prev" "$work/x"
                x=$(zstd -19 -q -c "$work/x" | wc -c)
            fi
            awk -v r="$rel" -v n="$n" -v s="$s" -v x="$x" 'BEGIN{printf "%s %d %d %.2f%% %s %s\n", r, n, s, 100*s/n, x, (x=="-"?"-":sprintf("%.2f%%",100*x/n))}'
        done
        prev_w=$f; prev_o=$o
    done
done
