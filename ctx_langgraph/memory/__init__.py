"""Long-term memory: scoped records on a LangGraph store, extracted from the conversation,
superseded by corrections, invalidated with their sources, loaded under their own budget.

Examples:
    >>> from langchain_core.messages import HumanMessage
    >>> from langgraph.store.memory import InMemoryStore
    >>> memory = LongTermMemory(InMemoryStore())
    >>> me = MemoryScopes("default", "t1", user_id="u-7")
    >>> _ = memory.observe(me, [HumanMessage("My order id is A-1172.", id="m1")])
    >>> _ = memory.observe(me, [HumanMessage("Sorry: my order id is B-2291, not A-1172.", id="m5")])
    >>> [(r.content, r.status) for r in memory.records(me)]
    [("The user's order id is A-1172.", 'superseded'), ("The user's order id is B-2291.", 'active')]
"""

from ctx_langgraph.memory.extract import (
    ChatModelExtractor,
    LangmemExtractor,
    MemoryExtractor,
    RuleExtractor,
)
from ctx_langgraph.memory.store import (
    MEMORY_MESSAGE_ID,
    LongTermMemory,
    MemoryChange,
    place_memory,
)
from ctx_langgraph.memory.types import (
    MemoryCandidate,
    MemoryRecord,
    MemoryScopeKind,
    MemoryScopes,
    MemoryStatus,
)
from ctx_langgraph.view.markers import MEMORY_FLAG, is_memory_message

__all__ = [
    "MEMORY_FLAG",
    "MEMORY_MESSAGE_ID",
    "ChatModelExtractor",
    "LangmemExtractor",
    "LongTermMemory",
    "MemoryCandidate",
    "MemoryChange",
    "MemoryExtractor",
    "MemoryRecord",
    "MemoryScopeKind",
    "MemoryScopes",
    "MemoryStatus",
    "RuleExtractor",
    "is_memory_message",
    "place_memory",
]
