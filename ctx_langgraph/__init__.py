"""ctx-langgraph: context management for LangGraph agents that does not forget, does not
over-count, and recovers after a crash.

The public API is what ``__all__`` lists; everything else is an implementation detail.
"""

from importlib.metadata import PackageNotFoundError, version

from ctx_langgraph.errors import (
    CompactionConflict,
    ContextManagementError,
    EventConflict,
    HistoryStoreError,
    ScopeError,
    StaleCandidate,
)
from ctx_langgraph.history import (
    AppendResult,
    BranchInfo,
    CompactionCheckpoint,
    CoverageSnapshot,
    HistoryEvent,
    HistoryStore,
    KeyFact,
    PostgresHistoryStore,
    Scope,
    SearchPage,
    SQLiteHistoryStore,
)

try:
    __version__ = version("ctx-langgraph")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "AppendResult",
    "BranchInfo",
    "CompactionCheckpoint",
    "CompactionConflict",
    "ContextManagementError",
    "CoverageSnapshot",
    "EventConflict",
    "HistoryEvent",
    "HistoryStore",
    "HistoryStoreError",
    "KeyFact",
    "PostgresHistoryStore",
    "SQLiteHistoryStore",
    "Scope",
    "ScopeError",
    "SearchPage",
    "StaleCandidate",
    "__version__",
]
