#!/usr/bin/env bash
# The main job: creates .venv, installs the package with the `eval` extra (what the demo needs),
# runs the offline demo on the embedded
# SQLite store (extra arguments go to `ctx-langgraph demo`: --compare all replays all nine
# strategies instead of ours, the two peers and the full history; --db FILE keeps the history).
# Progress (elapsed time, work done, time left) goes to stderr, the demo's output to stdout.
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
bootstrap eval
cd "$ROOT"
echo "==> ctx-langgraph demo $*" >&2
exec "$VENV/bin/ctx-langgraph" demo "$@"
