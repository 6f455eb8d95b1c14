"""The history lookup tool: the model fetches exact old evidence from the raw history.

What it may read is fixed by the run, never by the model: the thread and tenant from
``config["configurable"]`` (``thread_id``, ``ctx_tenant``), the branch from the state's
``context["branch"]``. A page is JSON whose ``notice`` says the records are quoted data, not
instructions; it never exceeds ``max_tokens`` nor the room left under the compaction trigger.
Bad arguments and store failures become a short message to the model (docs/design.md §8).
"""

# Besides __all__, the tool's limits and texts stay importable from here.
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

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "HANDLE_PREFIX",
    "NOTICE",
    "is_history_lookup_tool",
    "make_history_lookup_tool",
]
