#!/usr/bin/env bash
# Crash soak (issue 17, item 5): the server crash tests of crates/memwarden/tests/serve_crash.rs
# with more cycles than CI runs. Per backend (SQLite, PostgreSQL), a loaded `memwarden serve` is
# killed with SIGKILL CYCLES times (default 200; CI runs 50); then a private PostgreSQL cluster
# is killed and restarted three times under load. Prints each test's summary line (SIGKILLs,
# acknowledged writes, answers by status) and fails if any acknowledged write is missing,
# duplicated or changed, or a log does not verify.
#
#   bash scripts/crash-soak.sh            # 200 cycles per backend
#   bash scripts/crash-soak.sh 500        # more
#   CRASH_SEED=123 bash scripts/crash-soak.sh   # replay the kill moments of a failed run
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES="${1:-200}"
pg_isready -h 127.0.0.1 >/dev/null 2>&1 || pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
start=$(date +%s)
MEMWARDEN_CRASH_CYCLES="$CYCLES" cargo test -p memwarden --test serve_crash --locked -- --nocapture --test-threads=1 2>&1 \
    | grep -E "^(crash test seed|sqlite backend|postgres backend|3 database crashes|test |test result)" 
echo "crash-soak: $CYCLES cycles per backend, $(( $(date +%s) - start )) s, revision $(git rev-parse --short HEAD)"
