"""``python -m ctx_langgraph.cli``: the ``ctx-langgraph`` command."""

import sys

from ctx_langgraph.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
