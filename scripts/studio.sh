#!/usr/bin/env bash
# LangGraph Studio on the example graphs of langgraph.json: creates .venv (as scripts/demo.sh
# does), installs the package with the `studio` extra (langgraph-cli[inmem], what `langgraph dev`
# needs), and runs `langgraph dev` from the repository root, offline (no analytics, no version
# check, no tracing). Extra arguments go to `langgraph dev` (e.g. --no-browser, --port 2024).
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
bootstrap studio
cd "$ROOT"
echo "==> langgraph dev $*" >&2
exec "$VENV/bin/langgraph" dev "$@"
