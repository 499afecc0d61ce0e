#!/usr/bin/env bash
# Fuzz a running memwarden server from its own OpenAPI document and fail on any 5xx.
#
#   tests/schemathesis.sh BASE_URL API_KEY [MAX_EXAMPLES] [MAX_SECONDS]
#
# BASE_URL is e.g. http://127.0.0.1:7077; API_KEY is a key (mw_...) of a principal of a test
# tenant: the run writes memories, attestations and decisions as that principal. Only the
# `not_a_server_error` check is enforced (4xx answers to generated garbage are expected). The
# admin routes are excluded (their 403 for an API key says nothing). Bounded: MAX_EXAMPLES
# (default 25) cases per operation and a time budget of MAX_SECONDS (default 120; schemathesis
# keeps fuzzing until it is spent). Needs `pip install -r tests/requirements.txt`.
set -euo pipefail
base="${1:?usage: schemathesis.sh BASE_URL API_KEY [MAX_EXAMPLES] [MAX_SECONDS]}"
key="${2:?usage: schemathesis.sh BASE_URL API_KEY [MAX_EXAMPLES] [MAX_SECONDS]}"
n="${3:-25}"
secs="${4:-120}"
report_dir="$(mktemp -d)"
trap 'rm -rf "$report_dir"' EXIT
# Run from the scratch dir: schemathesis/hypothesis leave caches in the working directory.
cd "$report_dir"
schemathesis run "$base/openapi.json" \
    --url "$base" \
    --header "Authorization: Bearer $key" \
    --checks not_a_server_error \
    --exclude-path-regex '^/v1/admin/' \
    --max-examples "$n" \
    --max-time "$secs" \
    --workers 1 \
    --seed 7 \
    --generation-database none \
    --report-dir "$report_dir" \
    --no-color
