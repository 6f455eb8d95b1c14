"""ctx-langgraph: context management for LangGraph agents that does not forget, does not
over-count, and recovers after a crash.

The public API is what ``__all__`` lists: the three entry points, their configuration and the
objects you pass them, and :func:`compact_thread` (compaction on request). Everything else is importable from its subpackage, which lists its own
public names in its ``__all__``: the errors (:mod:`ctx_langgraph.errors`), the history records
(:mod:`ctx_langgraph.history`), usage records and the ledger's callback handlers and node
(:mod:`ctx_langgraph.usage`, ``.usage.callbacks``, ``.usage.node``), counters and the budget
node (:mod:`ctx_langgraph.budget`), summary documents and the compaction node
(:mod:`ctx_langgraph.compaction`), memory records and extractors (:mod:`ctx_langgraph.memory`),
retention hooks and reports (:mod:`ctx_langgraph.retention`), provider-side compaction
(:mod:`ctx_langgraph.providers`).
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
    # the middleware imports langchain's agent package, which a graph built with
    # add_context_management or create_context_agent never needs: loaded on first use
    if name == "ContextManagementMiddleware":
        from ctx_langgraph.middleware import ContextManagementMiddleware

        globals()[name] = ContextManagementMiddleware
        return ContextManagementMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
