"""Typed errors of ctx-langgraph.

Every error says what happened, with the numbers, and what to do about it. All of them derive
from :class:`ContextManagementError`, so one ``except`` catches everything the package raises
on purpose.
"""

from __future__ import annotations

from typing import Protocol

__all__ = [
    "CompactRequestError",
    "CompactionConflict",
    "CompactionFailed",
    "ContextBudgetExceeded",
    "ContextManagementError",
    "CoverageUnavailable",
    "DatasetError",
    "DocumentError",
    "EmbeddingError",
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
    "SummaryModelError",
    "ThreadIdMissing",
    "UsageParseError",
]


class _Scoped(Protocol):
    """What an error needs of a :class:`~ctx_langgraph.core.scope.Scope` (named structurally, so
    this bottom module imports nothing of the package)."""

    @property
    def thread_id(self) -> str: ...

    @property
    def tenant(self) -> str: ...

    @property
    def branch(self) -> str: ...


class ContextManagementError(Exception):
    """Base class of every error raised on purpose by ctx-langgraph."""


class HistoryStoreError(ContextManagementError):
    """The history store cannot do its job: database unreachable, schema too old or too new,
    or a database error that is not one of the more specific errors below.

    The original driver exception, when there is one, is chained as ``__cause__``.
    """


class EmbeddingError(ContextManagementError):
    """The history store's embedding model failed, timed out or returned something that is not
    a vector of the index's dimensions. Never raised into a turn: the events stay pending (and
    are embedded later) and a search falls back to words (docs/design.md §4)."""


class ScopeError(ContextManagementError, ValueError):
    """A scope (tenant, thread_id, branch) is malformed or names a branch that does not exist."""


class ThreadIdMissing(ScopeError):
    """A run without ``config["configurable"]["thread_id"]``: there is no thread to record its
    messages in, book its usage under or read its history from, and the messages of two
    anonymous runs must never share one. Raised before anything is stored or sent (as LangGraph
    raises for a graph compiled with a checkpointer); a ``ValueError`` too."""

    def __init__(self) -> None:
        super().__init__(
            "this run has no thread id, so its messages belong to no thread (and are never "
            'pooled with another run\'s): pass config={"configurable": {"thread_id": '
            '"<one id per conversation>"}} to invoke/stream, as LangGraph requires with a '
            "checkpointer"
        )


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
        scope: _Scoped,
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

    def __init__(self, scope: _Scoped, *, candidate_id: str, reason: str) -> None:
        self.scope = scope
        self.candidate_id = candidate_id
        self.reason = reason
        super().__init__(
            f"stale compaction candidate {candidate_id} in {scope}: {reason}; "
            "take a new snapshot and rebuild the summary"
        )


class CoverageUnavailable(ContextManagementError, ValueError):
    """A summary cannot cover a branch through ``through_seq``: the thread has no events yet
    (``covered_through_seq`` is None), or ``through_seq`` is not after what the active summary
    covers and at most the branch head.

    The usual cause is a race: another worker committed a summary covering the span since the
    active summary was read. Read the active summary again; if it covers the span, use it.
    (A ``ValueError`` too, for callers that caught the untyped error.)
    """

    def __init__(
        self,
        scope: _Scoped,
        *,
        through_seq: int,
        covered_through_seq: int | None = None,
        head_seq: int | None = None,
    ) -> None:
        self.scope = scope
        self.through_seq = through_seq
        self.covered_through_seq = covered_through_seq
        self.head_seq = head_seq
        if covered_through_seq is None:
            message = f"nothing to compact in {scope}: it has no events"
        else:
            message = (
                f"cannot cover {scope} through seq {through_seq}: the active summary covers "
                f"through seq {covered_through_seq} and the branch head is seq {head_seq}"
            )
        super().__init__(message)


class UsageParseError(ContextManagementError, ValueError):
    """A usage payload is malformed or cannot be interpreted.

    ``field`` names the offending field as a dotted path (``usage.prompt_tokens_details.cached_tokens``).
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"cannot read usage field {field!r}: {reason}")


class ContextBudgetExceeded(ContextManagementError):
    """The next request cannot fit the model's window, and nothing we can do would make it fit.

    Raised before the request is sent (a request that must fail is never sent). The numbers:
    ``estimate`` (input tokens incl. the safety margin), ``usable`` (window minus the output
    reserve), and ``largest`` (the largest single message that must stay verbatim).
    """

    def __init__(
        self, *, estimate: int, usable: int, window: int, reserve: int, largest: int, advice: str
    ) -> None:
        self.estimate = estimate
        self.usable = usable
        self.window = window
        self.reserve = reserve
        self.largest = largest
        super().__init__(
            f"the next request needs about {estimate:,} input tokens but only {usable:,} fit "
            f"(window {window:,} - output reserve {reserve:,}); the largest message that must stay "
            f"verbatim has {largest:,} tokens. {advice}"
        )


class ProviderCountError(ContextManagementError):
    """The provider could not count a request's input tokens.

    Raised by the provider count hooks (:mod:`ctx_langgraph.providers.count`) on any
    failure: an HTTP error reply, a timeout or lost connection, or a reply without a usable
    ``input_tokens`` number. ``provider`` names the provider (``anthropic``, ``openai``),
    ``status_code`` is the HTTP status when there was a reply, and ``reason`` says what went
    wrong; the original exception, when there is one, is chained as ``__cause__``. Nothing was
    counted, so the caller can fall back to its local estimate.
    """

    def __init__(self, provider: str, reason: str, *, status_code: int | None = None) -> None:
        self.provider = provider
        self.reason = reason
        self.status_code = status_code
        status = f" (HTTP {status_code})" if status_code is not None else ""
        super().__init__(
            f"{provider} token count failed{status}: {reason}; "
            "fall back to the local token estimate for this request"
        )


class CompactionFailed(ContextManagementError):
    """Compaction could not produce a valid summary within its attempts and time budget, and the
    request does not fit without it. The previous summary stays active and no message was removed.
    """

    def __init__(self, *, attempts: int, problems: list[str], estimate: int, usable: int) -> None:
        self.attempts = attempts
        self.problems = problems
        self.estimate = estimate
        self.usable = usable
        detail = "; ".join(problems[-3:]) or "no detail"
        super().__init__(
            f"compaction failed after {attempts} attempt(s) ({detail}); the request needs about "
            f"{estimate:,} input tokens and {usable:,} fit. The previous summary is still active and "
            "nothing was removed: retry later, raise summary_max_tokens, or use a larger window."
        )


class CompactRequestError(ContextManagementError, ValueError):
    """A compaction request cannot be served as given: its instructions are not text or are too
    long, ``requested_by`` is unknown, ``keep_recent_tokens`` is not a count, or the graph given
    to :func:`~ctx_langgraph.compaction.request.compact_thread` has no context management.
    Nothing was compacted and nothing was lost."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"compaction request not served: {problem}")


class SummaryFormatError(ContextManagementError, ValueError):
    """A summary text does not follow the structured summary format.

    Raised by :meth:`~ctx_langgraph.compaction.SummaryDocument.parse` when a required section
    heading is missing (``section`` names it) or a line cannot be read, such as a key fact
    without its ``[seq N]`` source (``line`` is its 1-based line number). A summary that fails
    to parse is never committed: regenerate it.
    """

    def __init__(
        self, problem: str, *, section: str | None = None, line: int | None = None
    ) -> None:
        self.problem = problem
        self.section = section
        self.line = line
        where = f" (line {line})" if line is not None else ""
        super().__init__(
            f"malformed summary{where}: {problem}; regenerate the summary in the structured "
            "format (every section heading present, every key fact with its [seq N])"
        )


class SummaryModelError(ContextManagementError, ValueError):
    """A ``summary_model`` (or ``model``) spec string cannot be made into a chat model: its provider's API key
    is not set (``key`` names the environment variable), its integration package is missing, or
    ``init_chat_model`` does not know the provider."""

    def __init__(
        self, spec: str, reason: str, *, key: str | None = None, argument: str = "summary_model"
    ) -> None:
        super().__init__(
            f"{argument}={spec!r} cannot be used: {reason}. "
            + (f"Set {key}, or pass " if key else "Pass ")
            + f"a chat model instance as {argument}, or summarizer=ExtractiveSummarizer() "
            "for offline summaries"
        )
        self.spec = spec
        self.reason = reason
        self.key = key


class RetentionError(ContextManagementError):
    """Checkpoint retention cannot prune as asked: an unsupported checkpointer, a sync call on
    an async saver, or a thread whose values are rebuilt from older checkpoints (a
    ``DeltaChannel``). Nothing of the refused thread was deleted."""


class DatasetError(ContextManagementError, ValueError):
    """An evaluation dataset (LoCoMo file, JSONL trace, generated session) is malformed.

    The message names the file and, for line formats, the line number.
    """


class DocumentError(ContextManagementError, ValueError):
    """A thread export document cannot be imported: it is not an export this version reads,
    or one of its fields is missing, of the wrong type, or inconsistent with the rest.

    ``path`` names the offending place in the document (``events[3].seq``) and ``reason`` says
    what is wrong with it. The whole document is checked before anything is written, so
    nothing was imported.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"not a thread export this version can import: {path}: {reason}. Nothing was "
            "written; import the document export_thread made, unchanged"
        )


class MemoryExtractionError(ContextManagementError):
    """A memory extractor failed or answered something that is not a list of memories.

    The conversation is not affected: the turn goes on without new memories.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"memory extraction failed: {reason}")
        self.reason = reason


class MemoryStoreError(ContextManagementError):
    """The long-term memory's LangGraph store could not be read or written (down, refused,
    or holding a record this version cannot read)."""


class ProviderCompactionError(ContextManagementError):
    """A provider's own compaction failed (HTTP error, timeout, a reply without a window).

    The readable summary of the same span is committed anyway; only the opaque window is
    missing, and the next requests are built from the readable summary.
    """

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider} compaction failed: {reason}")
        self.provider = provider
        self.reason = reason
