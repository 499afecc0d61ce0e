#!/usr/bin/env bash
# The Python package's tests: build the `memwarden` package (python/, native half
# crates/memwarden-py) with maturin into the workspace's target/ (dev profile, as `cargo test`
# builds, so the dependencies are shared), install it into a fresh virtualenv with the test
# requirements (mem0ai, langgraph, pytest, ... from PyPI), then run pytest on python/tests and
# every example in python/examples. The remote tests start `memwarden serve` (target/debug).
# Prints how long it took. CI calls it from scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
start=$(date +%s)
stamp() { echo "test-python: $1 ($(( $(date +%s) - start )) s)"; }

bash scripts/fetch-model.sh
export MEMWARDEN_MODEL_DIR="$ROOT/models/all-MiniLM-L6-v2"

VENV="$ROOT/target/python-venv"
rm -rf "$VENV"
python3 -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$PY" -m pip install --quiet --disable-pip-version-check "maturin==1.16.0" -r python/tests/requirements.txt
stamp "virtualenv ready"

# The server binary the remote tests run.
cargo build -p memwarden --locked
export MEMWARDEN_BIN="$ROOT/target/debug/memwarden"
stamp "memwarden binary built"

WHEELS="$ROOT/target/python-wheels"
rm -rf "$WHEELS"
(cd python && "$VENV/bin/maturin" build --profile dev --locked --interpreter "$PY" --out "$WHEELS")
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$WHEELS"/memwarden-*.whl
stamp "package built and installed"

# Run from outside the source tree so `import memwarden` is the installed package.
cd "$ROOT/python/tests"
MEM0_TELEMETRY=False "$PY" -m pytest -q -p no:cacheprovider "$ROOT/python/tests"
stamp "pytest passed"

export MEM0_TELEMETRY=False
for ex in "$ROOT"/python/examples/*.py; do
    echo "test-python: example ${ex##*/}"
    (cd "$(mktemp -d)" && "$PY" "$ex")
done
stamp "examples passed; done"
