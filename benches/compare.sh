#!/usr/bin/env bash
# Whole-process, file-to-file comparison of sc with zstd and cp, timed in the same run,
# alternating commands, median of N runs. Prints a markdown table.
#
#   benches/compare.sh [FILE...]        (default: ../shared/data/*.safetensors)
#   RUNS=7 benches/compare.sh FILE
#
# Needs a release build (it runs `cargo build --release` first). zstd is optional.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
cargo build --release -q
SC=$PWD/target/release/sc
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  if compgen -G "../shared/data/*.safetensors" >/dev/null; then
    files=(../shared/data/*.safetensors)
  else
    echo "note: ../shared/data is missing; benchmarking testdata/sample.safetensors only" >&2
    files=(testdata/sample.safetensors)
  fi
fi
have_zstd=$(command -v zstd >/dev/null && echo 1 || echo 0)
[ "$have_zstd" = 1 ] || echo "note: zstd is not installed; its rows are skipped" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "| file | tool | size % | encode MB/s | decode MB/s |"
echo "|---|---|---:|---:|---:|"
for f in "${files[@]}"; do
  size=$(stat -c %s "$f")
  cat "$f" >/dev/null  # warm the page cache
  declare -A enc=() dec=() out=()
  tools=("sc fast" "sc best" "cp")
  [ "$have_zstd" = 1 ] && tools+=("zstd -1" "zstd -3")
  for ((r = 0; r < RUNS; r++)); do
    for t in "${tools[@]}"; do
      case "$t" in
        "sc fast") e="$SC encode -q -f -m fast $f -o $work/a.sc"; d="$SC decode -q -f $work/a.sc -o $work/a.out"; o=$work/a.sc ;;
        "sc best") e="$SC encode -q -f -m best $f -o $work/b.sc"; d="$SC decode -q -f $work/b.sc -o $work/b.out"; o=$work/b.sc ;;
        "cp") e="cp $f $work/c.out"; d="cp $work/c.out $work/c2.out"; o=$work/c.out ;;
        "zstd -1") e="zstd -q -f -1 $f -o $work/z1.zst"; d="zstd -q -f -d $work/z1.zst -o $work/z1.out"; o=$work/z1.zst ;;
        "zstd -3") e="zstd -q -f -3 $f -o $work/z3.zst"; d="zstd -q -f -d $work/z3.zst -o $work/z3.out"; o=$work/z3.zst ;;
      esac
      s=$(now); $e; m=$(now); $d; x=$(now)
      enc[$t]+="$(( (m - s) / 1000 )) "; dec[$t]+="$(( (x - m) / 1000 )) "; out[$t]=$o
    done
  done
  for t in "${tools[@]}"; do
    [[ $t == sc* ]] && { cmp -s "$f" "${out[$t]%.sc}.out" || { echo "ROUND TRIP FAILED: $t $f" >&2; exit 1; }; }
    me=$(tr ' ' '\n' <<<"${enc[$t]}" | grep . | median)
    md=$(tr ' ' '\n' <<<"${dec[$t]}" | grep . | median)
    osize=$(stat -c %s "${out[$t]}")
    awk -v f="$(basename "$f")" -v t="$t" -v s="$size" -v o="$osize" -v me="$me" -v md="$md" \
      'BEGIN{printf "| %s | %s | %.2f | %.0f | %.0f |\n", f, t, 100*o/s, s/me, s/md}'
  done
  unset enc dec out
done
echo
echo "median of $RUNS alternating runs, whole process, page cache warm; $(nproc) cores; cp rows: copy time both ways"
