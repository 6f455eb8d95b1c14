"""The public API is what ``__all__`` exports; this pins it so a change is a visible diff."""

import importlib
import inspect
import subprocess
import sys

import ctx_langgraph
import ctx_langgraph.history
import ctx_langgraph.usage

EXPECTED = [
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
    "RankedHit",
    "SQLiteHistoryStore",
    "Scope",
    "SearchPage",
    "scope_from_config",
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


SUBPACKAGE_HOMES = {
    "ctx_langgraph.budget": [
        "ApproximateCounter",
        "BudgetEstimate",
        "TiktokenCounter",
        "TokenCounter",
        "default_counter",
        "make_budget_node",
        "make_budget_router",
    ],
    "ctx_langgraph.compaction": ["SummaryDocument", "make_compact_node"],
    "ctx_langgraph.errors": [
        "CompactionConflict",
        "CompactionFailed",
        "ContextBudgetExceeded",
        "DocumentError",
        "EventConflict",
        "HistoryStoreError",
        "MemoryExtractionError",
        "MemoryStoreError",
        "ProviderCompactionError",
        "ProviderCountError",
        "RetentionError",
        "ScopeError",
        "StaleCandidate",
        "SummaryFormatError",
        "UsageParseError",
    ],
    "ctx_langgraph.history": [
        "AppendResult",
        "BranchInfo",
        "CompactionCheckpoint",
        "CoverageSnapshot",
        "HistoryEvent",
        "KeyFact",
        "SearchPage",
    ],
    "ctx_langgraph.memory": ["MemoryRecord", "MemoryScopes", "RuleExtractor"],
    "ctx_langgraph.providers": [
        "AnthropicContextEditing",
        "CompactionBackend",
        "OpenAIResponsesCompaction",
    ],
    "ctx_langgraph.retention": ["AsyncRetentionHook", "RetentionHook", "RetentionReport"],
    "ctx_langgraph.usage": [
        "BookedDelta",
        "LedgerRecord",
        "ModelPrice",
        "NormalizedUsage",
        "UsageAccumulator",
        "UsageTotals",
    ],
    "ctx_langgraph.usage.callbacks": ["AsyncLedgerCallbackHandler", "LedgerCallbackHandler"],
    "ctx_langgraph.usage.node": ["make_usage_node"],
    "ctx_langgraph.budget.prefix": ["RequestShape", "cacheable_prefix", "request_shape"],
}


def test_names_outside_the_top_level_have_a_public_home():
    for module_name, names in SUBPACKAGE_HOMES.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert name in module.__all__, f"{module_name} does not export {name}"
            assert getattr(module, name) is not None


def test_importing_the_package_leaves_langchain_agents_unloaded():
    """``ContextManagementMiddleware`` (langchain's agent package) loads on first use only."""
    code = (
        "import sys, ctx_langgraph; assert 'langchain.agents' not in sys.modules; "
        "ctx_langgraph.ContextManagementMiddleware; assert 'langchain.agents' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
