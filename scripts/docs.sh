#!/usr/bin/env bash
# The documentation site (mkdocs.yml, docs/): creates .venv, installs the package with the
# `docs` extra, then
#   bash scripts/docs.sh build [ARGS]   builds it into site/ with --strict (a warning fails), offline
#   bash scripts/docs.sh serve [ARGS]   serves it on http://127.0.0.1:8000 and rebuilds on change
# Extra arguments go to mkdocs. Nothing is fetched from the network: no web fonts, Mermaid is
# vendored (docs/assets/javascripts/), search runs in the browser.
set -euo pipefail
source "$(dirname "$0")/_bootstrap.sh"
command="${1:-build}"
shift || true
bootstrap docs
cd "$ROOT"
# Material's notice about MkDocs 2.0 is not a problem of this site
export NO_MKDOCS_2_WARNING=1
case "$command" in
  build) exec "$VENV/bin/mkdocs" build --strict "$@" ;;
  serve) exec "$VENV/bin/mkdocs" serve --dev-addr 127.0.0.1:8000 "$@" ;;
  *)
    echo "usage: bash scripts/docs.sh build|serve [mkdocs arguments]" >&2
    exit 2
    ;;
esac
