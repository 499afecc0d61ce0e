#!/usr/bin/env bash
# The whole test suite. CI runs this (through .ci/run) on a clean clone; it fails when any test
# fails. Everything the tests need is installed or started here.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean CI build gains nothing from incremental caches, which would double target/ on disk.
export CARGO_INCREMENTAL=0
bash scripts/fetch-model.sh
# The lineage page's test drives headless Chromium (Debian's package; Playwright launches it, and
# never downloads a browser of its own).
command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; }
# The official MCP client and schemathesis drive the server in its tests; the Python prov
# package reads the lineage layer's PROV-JSON export.
python3 -m pip install --quiet --disable-pip-version-check -r crates/memwarden-server/tests/requirements.txt \
    -r crates/memwarden-lineage/tests/requirements.txt
cargo clippy --workspace --all-targets --locked -- -D warnings
# The PostgreSQL backend's tests need the local server (issue 17): start it if it is not up.
pg_isready -h 127.0.0.1 >/dev/null 2>&1 || pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
MEMWARDEN_REQUIRE_PYTHON=1 cargo test --workspace --locked
# The README's first command ends in the narrated demo: run the very binary on a fresh directory
# (its narration is checked step by step in crates/memwarden-engine/tests/demo.rs).
demo_dir="$(mktemp -d)"
./target/debug/memwarden demo --dir "$demo_dir/demo"
rm -rf "$demo_dir"
# The README's "Run several servers" block, as written, on the local PostgreSQL (issue 35.1).
bash scripts/test-several-servers.sh
# The Python package against the real mem0ai and langgraph packages (issue 18), and its examples.
bash scripts/test-python.sh
# Fuzz the HTTP API from its own OpenAPI document (bounded): no 5xx.
MEMWARDEN_SCHEMATHESIS_SECONDS=60 cargo test -p memwarden-server --test schemathesis --locked -- --ignored
# Fuzz every request body type, the store's row decoders and the log-entry decoder (bounded):
# no panic, no accepted duplicate key, no echoed value (issue 19).
MEMWARDEN_FUZZ_SECONDS=30 bash scripts/fuzz.sh
