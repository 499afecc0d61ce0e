#!/usr/bin/env bash
# Run every cargo-fuzz target for a bounded time (default 30 s each; MEMWARDEN_FUZZ_SECONDS).
# Installs cargo-fuzz when missing; needs the nightly toolchain (this machine image has one).
# Builds into target/fuzz (the workspace's one target directory); new corpus entries go to a
# temporary directory, the committed seeds in fuzz/seeds are only read. A crash fails the run and
# leaves its input under target/fuzz/artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${MEMWARDEN_FUZZ_SECONDS:-30}"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
export CARGO_INCREMENTAL=0
targets=(entry_decode request_bodies store_rows)
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
mkdir -p target/fuzz/artifacts
cd fuzz
for t in "${targets[@]}"; do
    cargo +nightly fuzz build --target-dir ../target/fuzz "$t"
done
for t in "${targets[@]}"; do
    mkdir -p "$corpus/$t" "../target/fuzz/artifacts/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    echo "fuzz: $t for ${secs}s"
    cargo +nightly fuzz run --target-dir ../target/fuzz "$t" "$corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -artifact_prefix="../target/fuzz/artifacts/$t/" -print_final_stats=1
done
