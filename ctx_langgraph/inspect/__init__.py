"""The context inspector: one thread's history, summaries, model calls, lookups and memories as
a page in the browser, read only. :func:`serve` serves it on loopback (as ``ctx-langgraph
inspect`` does; ``background=True`` in a notebook), :func:`export_html` writes it as one
self-contained file for a bug report, :func:`thread_html` returns it as text.

Examples:
    >>> from langchain_core.messages import HumanMessage
    >>> from ctx_langgraph.history import SQLiteHistoryStore
    >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
    >>> _ = store.append("t1", [HumanMessage("hello", id="m1")])
    >>> 'id="event-count" data-count="1"' in thread_html(store, "t1")
    True
"""

from ctx_langgraph.inspect.reads import PAGE_SIZE, ThreadData, list_threads, read_thread
from ctx_langgraph.inspect.server import (
    FILE_EVENTS,
    InspectorServer,
    export_html,
    open_sqlite_readonly,
    serve,
    thread_html,
)

__all__ = [
    "FILE_EVENTS",
    "PAGE_SIZE",
    "InspectorServer",
    "ThreadData",
    "export_html",
    "list_threads",
    "open_sqlite_readonly",
    "read_thread",
    "serve",
    "thread_html",
]
