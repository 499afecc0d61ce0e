#!/usr/bin/env bash
# The whole test suite. CI runs this (through .ci/run) on a clean clone; it fails when any test
# fails. Everything the tests need is installed or started here.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-model.sh
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
