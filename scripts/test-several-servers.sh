#!/usr/bin/env bash
# Runs the README's "Run several servers" block as written (issue 35.1), against the local
# PostgreSQL, with the binary built by the test suite (or $MEMWARDEN_BIN): a unique schema, a
# scratch directory, and a time limit. Fails if any command of the block fails or a server does
# not exit 0 on SIGTERM.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${MEMWARDEN_BIN:-$root/target/debug/memwarden}"
[ -x "$bin" ] || { echo "test-several-servers: no binary at $bin (build it first)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$bin" "$work/bin/memwarden"
block="$(sed -n '/<!-- several-servers:begin -->/,/<!-- several-servers:end -->/p' "$root/README.md" | sed '1,2d;$d' | sed '$d')"
[ -n "$block" ] || { echo "test-several-servers: the README block is missing" >&2; exit 1; }
# A schema of its own, so reruns never meet an earlier store.
schema="mw_readme_$$_$(date +%s)"
block="${block//schema=team/schema=$schema}"
cd "$work"
export PATH="$work/bin:$PATH"
export MEMWARDEN_MODEL_DIR="${MEMWARDEN_MODEL_DIR:-$root/models/all-MiniLM-L6-v2}"
out="$(timeout 300 bash -euo pipefail -c "$block" 2>"$work/stderr")" || { cat "$work/stderr" >&2; echo "test-several-servers: the README block failed" >&2; exit 1; }
echo "$out" | grep -q "both servers exited 0" || { echo "$out"; cat "$work/stderr" >&2; echo "test-several-servers: a server did not exit 0 on SIGTERM" >&2; exit 1; }
echo "$out" | grep -q "Standup moves to 10:00 on Mondays." || { echo "$out"; cat "$work/stderr" >&2; echo "test-several-servers: the write was not read back through the second server" >&2; exit 1; }
echo "test-several-servers: the README's several-servers block ran as written"
