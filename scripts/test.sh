#!/usr/bin/env bash
# The test command: creates .venv, installs everything (Chromium for the browser tests too),
# starts a throwaway PostgreSQL,
# checks the layer contract (lint-imports), runs the whole pytest suite on every core (extra
# arguments go to pytest), stops PostgreSQL.
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
source "$(dirname "$0")/_postgres.sh"
source "$(dirname "$0")/_browser.sh"
bootstrap
browser_install
# the browser tests fail instead of skipping when Chromium is missing
export CTX_REQUIRE_BROWSER=1
pg_start
cd "$ROOT"
# the layers of docs/architecture.md, as .importlinter declares them
"$(dirname "$PY")/lint-imports"
status=0
# one worker per core (CTX_TEST_WORKERS=0 runs in this process, e.g. to debug one test)
"$PY" -m pytest -n "${CTX_TEST_WORKERS:-auto}" "$@" || status=$?
if [ "$status" = 5 ]; then echo "error: pytest collected no tests" >&2; fi
exit "$status"
