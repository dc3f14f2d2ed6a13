#!/usr/bin/env bash
# Builds llama.cpp's `llama-quantize` (the copy vendored in llama-cpp-python 0.3.36, llama.cpp
# commit 0c1e570) into a cache outside the repository, reusing what is already there.
#
#   benches/ladder/build-llama.sh            # default build: $CACHE/build-default/bin/llama-quantize
#   benches/ladder/build-llama.sh fused      # also -march=x86-64-v3 ($CACHE/build-fused):
#                                            # FMA contraction in ggml-quants.c
#
# Environment: SC_DATA (default ~/.cache/sc-data), JOBS (default 2).
# Every compile runs under `nice -n 19`: this is a shared machine.
set -euo pipefail

DATA=${SC_DATA:-$HOME/.cache/sc-data}
VERSION=0.3.36
CACHE=$DATA/llama.cpp-0c1e570
DL=$DATA/llamacpp
TARBALL=$DL/llama_cpp_python-$VERSION.tar.gz
SRC=$DL/llama_cpp_python-$VERSION/vendor/llama.cpp
JOBS=${JOBS:-2}

variants=(default)
if [[ ${1:-} == fused ]]; then variants+=(fused); fi

mkdir -p "$DL" "$CACHE"
# One run at a time: two makes in one build directory write the same objects.
exec 9>"$CACHE/build.lock"
flock 9

# 1. The source: the sdist, fetched through pip when missing, unpacked only for vendor/llama.cpp.
if [[ ! -f $SRC/tools/quantize/main.cpp || ! -f $SRC/CMakeLists.txt ||
    ! -f $SRC/ggml/src/ggml-quants.c ]]; then
    if [[ ! -f $TARBALL ]]; then
        echo "fetching llama-cpp-python==$VERSION sdist into $DL" >&2
        (cd "$DL" && python3 -m pip download --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$VERSION" -d "$DL")
    fi
    echo "unpacking vendor/llama.cpp from $TARBALL" >&2
    tar -xzf "$TARBALL" -C "$DL" "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi

# 2. cmake: the system's, else one from pip in a venv under the cache.
CMAKE=$(command -v cmake || true)
if [[ -z $CMAKE ]]; then
    if [[ ! -x $CACHE/cmake-venv/bin/cmake ]]; then
        echo "installing cmake from pip into $CACHE/cmake-venv" >&2
        python3 -m venv "$CACHE/cmake-venv"
        "$CACHE/cmake-venv/bin/pip" install --quiet cmake
    fi
    CMAKE=$CACHE/cmake-venv/bin/cmake
fi

# 3. The builds, one directory per variant; cmake and make skip what is up to date.
for v in "${variants[@]}"; do
    dir=$CACHE/build-$v
    bin=$dir/bin/llama-quantize
    extra=()
    if [[ $v == fused ]]; then
        extra=(-DCMAKE_C_FLAGS=-march=x86-64-v3 -DCMAKE_CXX_FLAGS=-march=x86-64-v3)
    fi
    if [[ ! -x $bin ]]; then
        start=$(date +%s)
        nice -n 19 "$CMAKE" -S "$SRC" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
            -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF \
            "${extra[@]}" >"$dir.configure.log" 2>&1 \
            || { tail -30 "$dir.configure.log" >&2; exit 1; }
        nice -n 19 "$CMAKE" --build "$dir" --target llama-quantize -j "$JOBS" \
            >"$dir.build.log" 2>&1 || { tail -30 "$dir.build.log" >&2; exit 1; }
        echo "built $v in $(( $(date +%s) - start )) s" >&2
    fi
    echo "$bin"
done
