# shellcheck shell=bash
# Sourced by the other scripts: creates .venv beside the project (once, and again when
# pyproject.toml changes) and installs the package into it with the extras a script needs
# (`bootstrap eval` for the demo, `bootstrap studio` for Studio; `bootstrap` alone: every extra,
# for the tests).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CTX_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

_find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3.10 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "error: Python >= 3.10 is required (set PYTHON=/path/to/python3)" >&2
  return 1
}

bootstrap() {
  local extras="${1:-dev,studio,notebooks,eval}"
  local stamp="$VENV/.ctx-install-stamp-${extras//,/-}"
  local want
  want="$(cat "$ROOT/pyproject.toml" | sha1sum | cut -d' ' -f1)"
  if [ ! -x "$PY" ]; then
    echo "==> creating virtual environment in $VENV"
    "$(_find_python)" -m venv "$VENV"
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "==> installing ctx-langgraph and its dependencies into $VENV"
    "$PY" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    "$PY" -m pip install --quiet -e "$ROOT[$extras]" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$want" >"$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
  # Nothing here may reach the internet at run time.
  export LANGCHAIN_TRACING_V2=false LANGSMITH_TRACING=false
  export LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true
}
