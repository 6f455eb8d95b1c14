"""The public API is what ``__all__`` exports; this pins it so a change is a visible diff."""

import inspect

import ctx_langgraph
import ctx_langgraph.history
import ctx_langgraph.usage

EXPECTED = [
    "AsyncRetentionHook",
    "CheckpointRetention",
    "RetentionError",
    "RetentionHook",
    "PinnedRules",
    "AnthropicContextEditing",
    "CompactionBackend",
    "OpenAIResponsesCompaction",
    "ProviderCompactionError",
    "LongTermMemory",
    "MemoryExtractionError",
    "MemoryRecord",
    "MemoryScopes",
    "MemoryStoreError",
    "RuleExtractor",
    "RetentionPolicy",
    "RetentionReport",
    "add_context_management",
    "create_context_agent",
    "ContextManagementMiddleware",
    "make_history_lookup_tool",
    "SummaryFormatError",
    "CompactionFailed",
    "make_compact_node",
    "SummaryDocument",
    "Summarizer",
    "LLMSummarizer",
    "ExtractiveSummarizer",
    "ProviderCountError",
    "ContextBudgetExceeded",
    "ContextConfig",
    "make_budget_router",
    "make_budget_node",
    "TokenCounter",
    "TiktokenCounter",
    "BudgetEstimate",
    "ApproximateCounter",
    "AppendResult",
    "AsyncLedgerCallbackHandler",
    "BookedDelta",
    "BranchInfo",
    "CompactionCheckpoint",
    "CompactionConflict",
    "ContextManagementError",
    "DocumentError",
    "ContextState",
    "CoverageSnapshot",
    "EventConflict",
    "HistoryEvent",
    "HistoryStore",
    "HistoryStoreError",
    "KeyFact",
    "LedgerCallbackHandler",
    "LedgerRecord",
    "ModelPrice",
    "NormalizedUsage",
    "PostgresHistoryStore",
    "PriceTable",
    "SQLiteHistoryStore",
    "Scope",
    "ScopeError",
    "SearchPage",
    "StaleCandidate",
    "UsageAccumulator",
    "UsageLedger",
    "UsageParseError",
    "UsageTotals",
    "__version__",
    "make_usage_node",
    "normalize_usage",
]

EXPECTED_HISTORY = [
    "DEFAULT_BRANCH",
    "DEFAULT_TENANT",
    "SCHEMA_VERSION",
    "AppendResult",
    "BranchInfo",
    "CompactionCheckpoint",
    "CoverageSnapshot",
    "HistoryEvent",
    "HistoryStore",
    "KeyFact",
    "PostgresHistoryStore",
    "SQLiteHistoryStore",
    "Scope",
    "SearchPage",
    "text_projection",
]


EXPECTED_USAGE = [
    "COUNT_FIELDS",
    "DEFAULT_PRICES",
    "PURPOSES",
    "BookedDelta",
    "LedgerRecord",
    "ModelPrice",
    "NormalizedUsage",
    "PriceTable",
    "UsageAccumulator",
    "UsageLedger",
    "UsageStatus",
    "UsageTotals",
    "call_key_for",
    "detect_format",
    "normalize_usage",
]


def test_exported_members_are_pinned():
    assert sorted(ctx_langgraph.__all__) == sorted(EXPECTED)
    assert sorted(ctx_langgraph.history.__all__) == sorted(EXPECTED_HISTORY)
    assert sorted(ctx_langgraph.usage.__all__) == sorted(EXPECTED_USAGE)


def test_every_exported_member_exists_and_is_documented():
    for module in (ctx_langgraph, ctx_langgraph.history, ctx_langgraph.usage):
        for name in module.__all__:
            member = getattr(module, name)
            if inspect.isclass(member) or inspect.isfunction(member):
                assert member.__doc__, f"{module.__name__}.{name} has no docstring"


def test_errors_share_one_base():
    from ctx_langgraph import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ContextManagementError)
    assert issubclass(errors.ScopeError, ValueError)
