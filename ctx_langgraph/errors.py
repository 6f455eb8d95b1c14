"""Typed errors of ctx-langgraph.

Every error says what happened, with the numbers, and what to do about it. All of them derive
from :class:`ContextManagementError`, so one ``except`` catches everything the package raises
on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctx_langgraph.history.types import Scope

__all__ = [
    "CompactionConflict",
    "ContextManagementError",
    "EventConflict",
    "HistoryStoreError",
    "ScopeError",
    "StaleCandidate",
    "UsageParseError",
]


class ContextManagementError(Exception):
    """Base class of every error raised on purpose by ctx-langgraph."""


class HistoryStoreError(ContextManagementError):
    """The history store cannot do its job: database unreachable, schema too old or too new,
    or a database error that is not one of the more specific errors below.

    The original driver exception, when there is one, is chained as ``__cause__``.
    """


class ScopeError(ContextManagementError, ValueError):
    """A scope (tenant, thread_id, branch) is malformed or names a branch that does not exist."""


class EventConflict(HistoryStoreError):
    """An append or edit would rewrite an event that the scope does not own.

    Raised when a branch tries to revise an event it inherited from its parent branch (the
    event is shared, so rewriting it would change the parent's history as well).
    """


class CompactionConflict(ContextManagementError):
    """Another worker committed a compaction checkpoint first.

    The compare-and-swap on the active generation failed: ``expected_generation`` is the
    generation the candidate was built on, ``actual_generation`` the one the store now holds.
    Rebuild the candidate from the new active checkpoint and retry.
    """

    def __init__(
        self,
        scope: Scope,
        *,
        candidate_id: str,
        expected_generation: int,
        actual_generation: int,
    ) -> None:
        self.scope = scope
        self.candidate_id = candidate_id
        self.expected_generation = expected_generation
        self.actual_generation = actual_generation
        super().__init__(
            f"compaction conflict in {scope}: candidate {candidate_id} was built on generation "
            f"{expected_generation}, but the active generation is now {actual_generation}; "
            "rebuild the candidate from the new active checkpoint and retry"
        )


class StaleCandidate(ContextManagementError):
    """A candidate's covered range changed (revised, hidden or deleted events) after its snapshot.

    Such a candidate summarizes history that no longer exists as it was; it is marked
    ``failed`` and must be rebuilt from a new snapshot.
    """

    def __init__(self, scope: Scope, *, candidate_id: str, reason: str) -> None:
        self.scope = scope
        self.candidate_id = candidate_id
        self.reason = reason
        super().__init__(
            f"stale compaction candidate {candidate_id} in {scope}: {reason}; "
            "take a new snapshot and rebuild the summary"
        )


class UsageParseError(ContextManagementError, ValueError):
    """A usage payload is malformed or cannot be interpreted.

    ``field`` names the offending field as a dotted path (``usage.prompt_tokens_details.cached_tokens``).
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"cannot read usage field {field!r}: {reason}")
