"""ctx-langgraph: context management for LangGraph agents that does not forget, does not
over-count, and recovers after a crash.

``__all__`` lists the entry points, their configuration and the objects you pass them; every
subpackage (:mod:`ctx_langgraph.errors`, :mod:`ctx_langgraph.history`, :mod:`ctx_langgraph.usage`,
:mod:`ctx_langgraph.budget`, :mod:`ctx_langgraph.compaction`, ...) lists its own in its ``__all__``.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from ctx_langgraph.compaction import (
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    acompact_thread,
    compact_thread,
)
from ctx_langgraph.config import ContextConfig, ToolClearing
from ctx_langgraph.errors import ContextManagementError
from ctx_langgraph.history import (
    HistoryStore,
    PostgresHistoryStore,
    Scope,
    SQLiteHistoryStore,
)
from ctx_langgraph.integration import add_context_management, create_context_agent
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.memory import LongTermMemory
from ctx_langgraph.retention import CheckpointRetention, RetentionPolicy
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import ContextReport, ContextState
from ctx_langgraph.usage import PriceTable, UsageLedger, normalize_usage

if TYPE_CHECKING:
    from ctx_langgraph.middleware import ContextManagementMiddleware

try:
    __version__ = version("ctx-langgraph")
    """The installed package's version."""
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "CheckpointRetention",
    "ContextConfig",
    "ContextManagementError",
    "ContextManagementMiddleware",
    "ContextReport",
    "ContextState",
    "ExtractiveSummarizer",
    "HistoryStore",
    "LLMSummarizer",
    "LongTermMemory",
    "PinnedRules",
    "PostgresHistoryStore",
    "PriceTable",
    "RetentionPolicy",
    "SQLiteHistoryStore",
    "Scope",
    "Summarizer",
    "ToolClearing",
    "UsageLedger",
    "__version__",
    "acompact_thread",
    "add_context_management",
    "compact_thread",
    "create_context_agent",
    "make_history_lookup_tool",
    "normalize_usage",
]


def __getattr__(name: str) -> Any:
    # the middleware (langchain's agent package) is loaded on first use
    if name == "ContextManagementMiddleware":
        from ctx_langgraph.middleware import ContextManagementMiddleware

        globals()[name] = ContextManagementMiddleware
        return ContextManagementMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
