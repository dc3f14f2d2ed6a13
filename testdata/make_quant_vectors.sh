#!/bin/sh
# Makes the reference vectors of the quantizer port (src/gguf/quant/): testdata/quant-rows.bin
# (f32 rows, make_quant_rows.py), testdata/quant-expected.bin (what llama.cpp's own reference
# quantizers make of them, quant_vectors.c's layout) and testdata/quant-sample.txt (each
# type's block count and hash over every float tensor of testdata/sample.safetensors in rows
# of 256); and for the importance-matrix paths testdata/quant-weights.bin (weight vectors and
# jobs, make_quant_weights.py), testdata/quant-expected-weighted.bin (what llama-quantize's
# entry points make of each job's row given its weights) and testdata/quant-sample-weighted.txt
# (the same hashes as quant-sample.txt, every row weighted by the first vector of 256).
#
#     testdata/make_quant_vectors.sh LLAMA_CPP_DIR [DATA_DIR]
#
# LLAMA_CPP_DIR is llama.cpp at commit 0c1e570, e.g. vendor/llama.cpp of the llama-cpp-python
# 0.3.36 sdist (`pip download --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36`,
# unpacked outside the repository); DATA_DIR holds all-MiniLM-L6-v2.F32.safetensors and
# wordllama-l2_supercat_256.F16.safetensors (default ../shared/data).
#
# The flags are those of llama.cpp's default (Release) build of ggml-quants.c, which lives in
# ggml-base: no -march, so no FMA instruction to fuse into, and -DNDEBUG, so nearest_int's assert
# is off and NaN or huge values go through as they do in a real llama-quantize. -ffp-contract=off
# says outright that nothing is fused. The output is checked to be the same at -O3.
set -eu
LLAMA=${1:?usage: make_quant_vectors.sh LLAMA_CPP_DIR [DATA_DIR]}
DATA=${2:-../shared/data}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 "$HERE/make_quant_rows.py" "$DATA" > "$TMP/rows.bin"
python3 "$HERE/make_quant_rows.py" --sample "$HERE/sample.safetensors" > "$TMP/sample.bin"
python3 "$HERE/make_quant_weights.py" "$TMP/rows.bin" > "$TMP/weights.bin"
for opt in -O2 -O3; do
    gcc $opt -ffp-contract=off -DNDEBUG -std=gnu11 \
        -I"$LLAMA/ggml/include" -I"$LLAMA/ggml/src" -I"$LLAMA/ggml/src/ggml-cpu" \
        "$HERE/quant_vectors.c" "$LLAMA/ggml/src/ggml-quants.c" -lm -o "$TMP/harness$opt"
    "$TMP/harness$opt" < "$TMP/rows.bin" > "$TMP/expected$opt.bin"
    "$TMP/harness$opt" hash < "$TMP/sample.bin" > "$TMP/sample$opt.txt"
    "$TMP/harness$opt" weighted "$TMP/weights.bin" < "$TMP/rows.bin" > "$TMP/weighted$opt.bin"
    "$TMP/harness$opt" hashw "$TMP/weights.bin" < "$TMP/sample.bin" > "$TMP/samplew$opt.txt"
done
for f in expected.bin sample.txt weighted.bin samplew.txt; do
    cmp "$TMP/${f%.*}-O2.${f#*.}" "$TMP/${f%.*}-O3.${f#*.}"
done
cp "$TMP/rows.bin" "$HERE/quant-rows.bin"
cp "$TMP/expected-O2.bin" "$HERE/quant-expected.bin"
cp "$TMP/sample-O2.txt" "$HERE/quant-sample.txt"
cp "$TMP/weights.bin" "$HERE/quant-weights.bin"
cp "$TMP/weighted-O2.bin" "$HERE/quant-expected-weighted.bin"
cp "$TMP/samplew-O2.txt" "$HERE/quant-sample-weighted.txt"
ls -l "$HERE"/quant-*.bin "$HERE"/quant-sample*.txt
