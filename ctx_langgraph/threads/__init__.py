"""Operations on a whole thread across the history store, the usage ledger and long-term memory:
export, import and delete."""

from ctx_langgraph.threads.api import (
    adelete_thread,
    aexport_thread,
    aimport_thread,
    delete_thread,
    export_thread,
    import_thread,
)
from ctx_langgraph.threads.document import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    check_document,
    export_scope,
)

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "adelete_thread",
    "aexport_thread",
    "aimport_thread",
    "check_document",
    "delete_thread",
    "export_scope",
    "export_thread",
    "import_thread",
]
