"""The history lookup tool: the model fetches exact old evidence from the raw history.

Summaries keep the gist and capped or cleared tool outputs keep a handle; this tool gets the
exact words back (docs/design.md §8). What it may read is fixed by the run, never by the model:
the thread and tenant come from ``config["configurable"]`` (``thread_id``, ``ctx_tenant``) and
the branch from the graph state's ``context["branch"]`` (or ``configurable["ctx_branch"]``).
The model only chooses filters.

A page is a JSON object whose ``notice`` says the records are quoted data, not instructions;
JSON escaping keeps every record's text inside its string, so no text can step out of the frame.
A query (or up to five, fused into one ranking) is answered best match first, each hit marked
and shown between the turns just before and after it; without one, records come in seq order.
Pages never exceed ``max_tokens``, nor, inside a graph with ``ctx_budget``, the room left under
the compaction trigger: a text too long for what is left is cut, and the record says how many
characters were cut and gives the handle and cursor that read on. Cursors are opaque (base64
JSON) and checked when they come back; a search cursor remembers its filters.

The model's arguments are checked and bounded before the store is asked: seq bounds are clamped
to what a store holds, times read in UTC, names and cursors capped in length and refused with
characters no database can hold. What does not fit gets a short message saying how to call the
tool, and so does a store that fails (logged as a warning): nothing the model sends ends the run.
"""

# Besides __all__, the tool's limits and texts stay importable from here (re-exported as such).
from ctx_langgraph.core.cursor import MAX_CURSOR_CHARS as MAX_CURSOR_CHARS
from ctx_langgraph.core.stopwords import STOPWORDS as STOPWORDS
from ctx_langgraph.history.args import SEQ_MAX as SEQ_MAX
from ctx_langgraph.lookup._args import HANDLE_PREFIX
from ctx_langgraph.lookup._args import MAX_HANDLE_CHARS as MAX_HANDLE_CHARS
from ctx_langgraph.lookup._args import MAX_NAME_CHARS as MAX_NAME_CHARS
from ctx_langgraph.lookup._args import MAX_QUERIES as MAX_QUERIES
from ctx_langgraph.lookup._args import MAX_QUERY_CHARS as MAX_QUERY_CHARS
from ctx_langgraph.lookup._args import MAX_TIME_CHARS as MAX_TIME_CHARS
from ctx_langgraph.lookup._page import ARTIFACT as ARTIFACT
from ctx_langgraph.lookup._page import NOTICE
from ctx_langgraph.lookup._ranked import RANKED_ORDER as RANKED_ORDER
from ctx_langgraph.lookup._state import ROOM_MARGIN as ROOM_MARGIN
from ctx_langgraph.lookup.tool import (
    DEFAULT_MAX_TOKENS,
    is_history_lookup_tool,
    make_history_lookup_tool,
)
from ctx_langgraph.lookup.tool import DESCRIPTION as DESCRIPTION
from ctx_langgraph.lookup.tool import MIN_MAX_TOKENS as MIN_MAX_TOKENS
from ctx_langgraph.lookup.tool import USAGE as USAGE

RANKED_NOTE = RANKED_ORDER
"""Another name of :data:`RANKED_ORDER`: what a page of a query says of its order."""

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "HANDLE_PREFIX",
    "NOTICE",
    "is_history_lookup_tool",
    "make_history_lookup_tool",
]
