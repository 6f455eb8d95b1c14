#!/usr/bin/env bash
# Runs a benchmark from benchmarks/ (with a throwaway PostgreSQL when it takes --pg).
# Usage: scripts/bench.sh history_store [benchmark arguments]
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
source "$(dirname "$0")/_postgres.sh"
bootstrap
name="${1:-history_store}"; shift || true
cd "$ROOT"
if grep -q -- '"--pg-datadir"' "benchmarks/$name.py"; then  # starts (and stops) a cluster of its own
  "$PY" "benchmarks/$name.py" "$@"
elif grep -q -- '"--pg"' "benchmarks/$name.py"; then  # only benchmarks that take a PostgreSQL get one
  pg_start
  "$PY" "benchmarks/$name.py" --pg "$CTX_TEST_PG_DSN" "$@"
else
  "$PY" "benchmarks/$name.py" "$@"
fi
