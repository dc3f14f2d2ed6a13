#!/usr/bin/env bash
# Codes each quant of a ladder against its seed (`sc encode --base SEED`) and prints, per quant:
# its size, the archive's size and % of the quant, the blocks re-derived exactly (`sc info`),
# the decode time with the seed (prediction included; the seed a GGUF file), and the time
# llama-quantize took to make the quant (its log's "quantize time"), on the same cores.
#
#   benches/ladder/measure.sh [SC] [LADDER_DIR]
#
# SC: the sc binary (default target/release/sc); LADDER_DIR: the folder of make-ladder.sh
# (default ~/.cache/sc-data/ladder). Archives go to a temporary folder, removed at the end.
set -euo pipefail

sc=${1:-target/release/sc}
dir=${2:-${SC_DATA:-$HOME/.cache/sc-data}/ladder}
seed=$(compgen -G "$dir/*.F16.gguf" || compgen -G "$dir/*.BF16.gguf" || true)
seed=${seed%%$'\n'*}
[ -n "$seed" ] || { echo "measure.sh: no F16 or BF16 seed in $dir" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
printf '%-34s %10s %9s %7s %-26s %8s %8s\n' quant bytes archive % exact decode_s quantize_s
for q in "$dir"/*/*.gguf; do
    out=$tmp/$(basename "$q").sc
    "$sc" encode -q -f --base "$seed" "$q" -o "$out"
    t0=$(now)
    "$sc" decode -q -f --base "$seed" "$out" -o "$tmp/back.gguf"
    t1=$(now)
    cmp -s "$q" "$tmp/back.gguf" || { echo "measure.sh: $q did not round-trip" >&2; exit 1; }
    exact=$("$sc" info "$out" | sed -n 's/^seed: .*: \([0-9]* of [0-9]*\) ggml.*/\1/p')
    made=$(sed -n 's/.*quantize time = *\([0-9.]*\) ms.*/\1/p' "$q.log" 2>/dev/null)
    qb=$(stat -c %s "$q")
    ab=$(stat -c %s "$out")
    printf '%-34s %10d %9d %7.3f %-26s %8.2f %8s\n' "$(basename "$q")" "$qb" "$ab" \
        "$(echo "100 * $ab / $qb" | bc -l)" "${exact:--}" "$(echo "$t1 - $t0" | bc -l)" \
        "$(if [ -n "$made" ]; then echo "scale=2; $made / 1000" | bc -l; else echo -; fi)"
done
