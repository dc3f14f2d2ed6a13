#!/usr/bin/env bash
# Fuzz smoke run: each target for SECONDS (default 60) from seeds made out of testdata/.
#   fuzz/smoke.sh [SECONDS] [TARGET...]
# Needs cargo-fuzz and a nightly toolchain; skips with a message otherwise. SC_FUZZ_BOOTSTRAP=1
# lets a stable toolchain build the targets (RUSTC_BOOTSTRAP), for machines without nightly.
# Under CI (CI=true) a skip is a failure: the smoke run must really run there.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(container entropy roundtrip gguf derived)
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "skipping fuzz smoke run: cargo-fuzz is not installed (cargo install cargo-fuzz)"
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
if rustc --version | grep -q nightly; then
  :
elif [ "${SC_FUZZ_BOOTSTRAP:-0}" = 1 ]; then
  export RUSTC_BOOTSTRAP=1
else
  echo "skipping fuzz smoke run: no nightly toolchain (SC_FUZZ_BOOTSTRAP=1 uses RUSTC_BOOTSTRAP on stable)"
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
cargo build --release -q
sc=target/release/sc
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
for m in fast best; do
  for b in 4K 12290; do
    "$sc" encode -q -f -m "$m" -b "$b" testdata/tiny.safetensors -o "$seeds/tiny.$m.$b.sc"
    # Coded against the base the fuzz bodies decode with (sc::fuzz::base), so that mutations
    # reach the delta transforms and their codecs.
    "$sc" encode -q -f -m "$m" -b "$b" --base testdata/tiny.safetensors \
      testdata/tiny-tune.safetensors -o "$seeds/tiny-tune.$m.$b.sc"
  done
done
# A GGUF file (kind 2): ggml block transforms, and BEST's byctx codec at 16K.
for m in fast best; do
  for b in 4K 16K; do
    "$sc" encode -q -f -m "$m" -b "$b" testdata/tiny.gguf -o "$seeds/tiny-gguf.$m.$b.sc"
  done
done
# With BEST's sign models (-9): a ctxsigns/signs block.
"$sc" encode -q -f -9 -b 12290 testdata/tensors.safetensors -o "$seeds/tensors.signs.12290.sc"
# A quant coded against its seed (derived tensors), for the derived target.
for m in fast best; do
  "$sc" encode -q -f -m "$m" -b 4K --base testdata/ladder-seed.gguf testdata/ladder-q4_k.gguf \
    -o "$seeds/ladder.$m.sc"
done
mkdir -p fuzz/corpus/container fuzz/corpus/roundtrip fuzz/corpus/entropy fuzz/corpus/gguf \
  fuzz/corpus/derived
cp "$seeds"/ladder.*.sc fuzz/corpus/derived/
cp "$seeds"/*.sc fuzz/corpus/container/
printf '\000' | cat - testdata/tiny.safetensors > fuzz/corpus/roundtrip/tiny-fast
printf '\001' | cat - testdata/tiny.safetensors > fuzz/corpus/roundtrip/tiny-best
printf '\010' | cat - testdata/tiny-tune.safetensors > fuzz/corpus/roundtrip/tune-fast
printf '\011' | cat - testdata/tiny-tune.safetensors > fuzz/corpus/roundtrip/tune-best
printf '\025' | cat - testdata/tensors.safetensors > fuzz/corpus/roundtrip/tensors-best-signs
printf '\045' | cat - testdata/tensors.safetensors > fuzz/corpus/roundtrip/tensors-best-nosigns
head -c 3000 testdata/sample.safetensors > fuzz/corpus/roundtrip/sample-head
printf '\000' | cat - testdata/tiny.gguf > fuzz/corpus/roundtrip/tiny-gguf-fast
printf '\007' | cat - testdata/tiny.gguf > fuzz/corpus/roundtrip/tiny-gguf-best
# The GGUF excerpt's header and first tensors (the whole file is past -max_len).
head -c 65536 testdata/excerpt.gguf > fuzz/corpus/gguf/excerpt-head
for t in container entropy roundtrip gguf derived; do
  cp fuzz/regressions/$t/* fuzz/corpus/$t/ 2>/dev/null || true
done
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${secs}s"
  cargo fuzz run "$t" --release -- -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048
done
if compgen -G 'fuzz/artifacts/*/*' >/dev/null; then
  echo "inputs that failed in this or earlier runs (cargo test replays them; keep each in"
  echo "fuzz/regressions/TARGET/ once fixed):"
  ls fuzz/artifacts/*/*
fi
