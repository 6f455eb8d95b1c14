"""The history store: raw history, compaction checkpoints with an active pointer, and search.

Two backends with one interface and one conformance suite:
:class:`SQLiteHistoryStore` (embedded default) and :class:`PostgresHistoryStore`.
"""

from ctx_langgraph.core.scope import scope_from_config
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.postgres import PostgresHistoryStore
from ctx_langgraph.history.rows import text_projection
from ctx_langgraph.history.sqlite import SQLiteHistoryStore
from ctx_langgraph.history.types import (
    DEFAULT_BRANCH,
    DEFAULT_TENANT,
    AppendResult,
    BranchInfo,
    CompactionCheckpoint,
    CoverageSnapshot,
    HistoryEvent,
    KeyFact,
    RankedHit,
    Scope,
    SearchPage,
)
from ctx_langgraph.storage.migrations import SCHEMA_VERSION

__all__ = [
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
