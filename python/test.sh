#!/usr/bin/env bash
# The Python package's tests: builds the sc command line and the package (an abi3 wheel), then
# runs pytest on python/tests in a virtual environment cached outside the repository.
#
# The environment lives in ${XDG_CACHE_HOME:-~/.cache}/sc-ci/venv-KEY (KEY: a hash of the
# pinned requirements, this script, the torch stand-in builder and the Python version); a
# cold one takes a few minutes (torch's 540 MB wheel), later runs reuse it. torch is installed
# without its dependencies: PyPI's Linux wheel pulls several GB of NVIDIA CUDA libraries that
# a CPU test never calls, and python/ci/torch_cpu_stubs.py gives it small stand-ins for them
# instead, so it imports and runs on the CPU as on a machine without a GPU. The pure-Python
# packages torch needs come from python/ci/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH=torch==2.15.0
REQS=python/ci/requirements.txt
KEY=$( (cat "$REQS" python/ci/torch_cpu_stubs.py; echo "$TORCH"; sed -n '/^# KEY-END/q;p' "$0"; "$PY" -V) | sha256sum | cut -c1-12)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/sc-ci
VENV=$CACHE/venv-$KEY
# KEY-END

if [ ! -e "$VENV/.complete" ]; then
    echo "python/test.sh: creating $VENV"
    start=$(date +%s)
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    # Environments of other keys are stale.
    find "$CACHE" -maxdepth 1 -name 'venv-*' -exec rm -rf {} +
    "$PY" -m venv "$VENV"
    pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
    pip install --no-deps "$TORCH"
    pip install -r "$REQS"
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$VENV/bin/python" python/ci/torch_cpu_stubs.py "$site/torch"
    if pip list 2>/dev/null | grep -i -E '^(nvidia|cuda)-'; then
        echo "python/test.sh: NVIDIA packages were installed" >&2
        exit 1
    fi
    "$VENV/bin/python" -c 'import torch; x = torch.arange(6.0).reshape(2, 3); assert (x @ x.T).sum().item() == 83.0 and not torch.cuda.is_available()'
    touch "$VENV/.complete"
    echo "python/test.sh: environment ready in $(( $(date +%s) - start )) s"
fi

cargo build --release --quiet
WHEELS=$(mktemp -d)
trap 'rm -rf "$WHEELS"' EXIT
"$VENV/bin/maturin" build --release --quiet -m python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEELS"/*.whl

cd "$WHEELS"
set +e
SC_BIN="$ROOT/target/release/sc" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    "$VENV/bin/python" -m pytest "$ROOT/python/tests" -q -p no:cacheprovider \
    -rs "$@"
status=$?
set -e
if [ $status -eq 5 ]; then
    echo "python/test.sh: pytest collected no tests" >&2
    exit 1
fi
exit $status
