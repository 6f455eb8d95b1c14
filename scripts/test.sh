#!/usr/bin/env bash
# The test command: creates .venv, installs everything, starts a throwaway PostgreSQL,
# runs the whole pytest suite (extra arguments go to pytest), stops PostgreSQL.
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
source "$(dirname "$0")/_postgres.sh"
bootstrap
pg_start
cd "$ROOT"
status=0
"$PY" -m pytest "$@" || status=$?
if [ "$status" = 5 ]; then echo "error: pytest collected no tests" >&2; fi
exit "$status"
