#!/usr/bin/env bash
# The main job: creates .venv, installs everything, runs the offline demo on the embedded
# SQLite store (extra arguments go to `ctx-langgraph demo`).
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
bootstrap
cd "$ROOT"
exec "$VENV/bin/ctx-langgraph" demo "$@"
