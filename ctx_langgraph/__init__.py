"""ctx-langgraph: context management for LangGraph agents that does not forget, does not
over-count, and recovers after a crash.

The public API is what ``__all__`` lists; everything else is an implementation detail.
"""

from importlib.metadata import PackageNotFoundError, version

from ctx_langgraph.budget import (
    ApproximateCounter,
    BudgetEstimate,
    TiktokenCounter,
    TokenCounter,
    make_budget_node,
    make_budget_router,
)
from ctx_langgraph.compaction import (
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryDocument,
    make_compact_node,
)
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.errors import (
    CompactionConflict,
    CompactionFailed,
    ContextBudgetExceeded,
    ContextManagementError,
    DocumentError,
    EventConflict,
    HistoryStoreError,
    MemoryExtractionError,
    MemoryStoreError,
    ProviderCompactionError,
    ProviderCountError,
    RetentionError,
    ScopeError,
    StaleCandidate,
    SummaryFormatError,
    UsageParseError,
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
from ctx_langgraph.integration import add_context_management, create_context_agent
from ctx_langgraph.lookup import make_history_lookup_tool
from ctx_langgraph.memory import LongTermMemory, MemoryRecord, MemoryScopes, RuleExtractor
from ctx_langgraph.middleware import ContextManagementMiddleware
from ctx_langgraph.providers import (
    AnthropicContextEditing,
    CompactionBackend,
    OpenAIResponsesCompaction,
)
from ctx_langgraph.retention import (
    AsyncRetentionHook,
    CheckpointRetention,
    RetentionHook,
    RetentionPolicy,
    RetentionReport,
)
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import ContextState
from ctx_langgraph.usage import (
    BookedDelta,
    LedgerRecord,
    ModelPrice,
    NormalizedUsage,
    PriceTable,
    UsageAccumulator,
    UsageLedger,
    UsageTotals,
    normalize_usage,
)
from ctx_langgraph.usage.callbacks import AsyncLedgerCallbackHandler, LedgerCallbackHandler
from ctx_langgraph.usage.node import make_usage_node

try:
    __version__ = version("ctx-langgraph")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "AnthropicContextEditing",
    "AppendResult",
    "ApproximateCounter",
    "AsyncLedgerCallbackHandler",
    "AsyncRetentionHook",
    "BookedDelta",
    "BranchInfo",
    "BudgetEstimate",
    "CheckpointRetention",
    "CompactionBackend",
    "CompactionCheckpoint",
    "CompactionConflict",
    "CompactionFailed",
    "ContextBudgetExceeded",
    "ContextConfig",
    "ContextManagementError",
    "ContextManagementMiddleware",
    "ContextState",
    "CoverageSnapshot",
    "DocumentError",
    "EventConflict",
    "ExtractiveSummarizer",
    "HistoryEvent",
    "HistoryStore",
    "HistoryStoreError",
    "KeyFact",
    "LLMSummarizer",
    "LedgerCallbackHandler",
    "LedgerRecord",
    "LongTermMemory",
    "MemoryExtractionError",
    "MemoryRecord",
    "MemoryScopes",
    "MemoryStoreError",
    "ModelPrice",
    "NormalizedUsage",
    "OpenAIResponsesCompaction",
    "PinnedRules",
    "PostgresHistoryStore",
    "PriceTable",
    "ProviderCompactionError",
    "ProviderCountError",
    "RetentionError",
    "RetentionHook",
    "RetentionPolicy",
    "RetentionReport",
    "RuleExtractor",
    "SQLiteHistoryStore",
    "Scope",
    "ScopeError",
    "SearchPage",
    "StaleCandidate",
    "Summarizer",
    "SummaryDocument",
    "SummaryFormatError",
    "TiktokenCounter",
    "TokenCounter",
    "UsageAccumulator",
    "UsageLedger",
    "UsageParseError",
    "UsageTotals",
    "__version__",
    "add_context_management",
    "create_context_agent",
    "make_budget_node",
    "make_budget_router",
    "make_compact_node",
    "make_history_lookup_tool",
    "make_usage_node",
    "normalize_usage",
]
