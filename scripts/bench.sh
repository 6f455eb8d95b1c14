#!/usr/bin/env bash
# Runs a benchmark from benchmarks/ against SQLite and a throwaway PostgreSQL.
# Usage: scripts/bench.sh history_store [benchmark arguments]
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
source "$(dirname "$0")/_postgres.sh"
bootstrap
name="${1:-history_store}"; shift || true
pg_start
cd "$ROOT"
"$PY" "benchmarks/$name.py" --pg "$CTX_TEST_PG_DSN" "$@"
