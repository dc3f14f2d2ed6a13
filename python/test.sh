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

if [ ! -e "$VENV/.complete" ]; then
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
