"""The public API is what ``__all__`` exports; this pins it so a change is a visible diff."""

import ctx_langgraph
import ctx_langgraph.history

EXPECTED = [
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


def test_exported_members_are_pinned():
    assert sorted(ctx_langgraph.__all__) == sorted(EXPECTED)
    assert sorted(ctx_langgraph.history.__all__) == sorted(EXPECTED_HISTORY)


def test_every_exported_member_exists_and_is_documented():
    for module in (ctx_langgraph, ctx_langgraph.history):
        for name in module.__all__:
            member = getattr(module, name)
            if callable(member):
                assert member.__doc__, f"{module.__name__}.{name} has no docstring"


def test_errors_share_one_base():
    from ctx_langgraph import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ContextManagementError)
    assert issubclass(errors.ScopeError, ValueError)
