"""Typed errors of ctx-langgraph: each says what happened and what to do; all derive from
:class:`ContextManagementError`.
"""

from __future__ import annotations

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


class ContextManagementError(Exception):
    """Base class of every error raised on purpose by ctx-langgraph."""


class HistoryStoreError(ContextManagementError):
    """The history store cannot do its job (database unreachable, schema too old or too new,
    a database error); the driver's exception is chained as ``__cause__``."""


class EmbeddingError(ContextManagementError):
    """The history store's embedding model failed, timed out or returned no vector of the
    index's dimensions. Never raised into a turn: a search falls back to words."""


class ScopeError(ContextManagementError, ValueError):
    """A scope (tenant, thread_id, branch) is malformed or names a branch that does not exist."""


class ThreadIdMissing(ScopeError):
    """A run without ``config["configurable"]["thread_id"]``, raised before anything is stored
    or sent; a ``ValueError`` too."""

    def __init__(self) -> None:
        super().__init__(
            "this run has no thread id, so its messages belong to no thread (and are never "
            'pooled with another run\'s): pass config={"configurable": {"thread_id": '
            '"<one id per conversation>"}} to invoke/stream, as LangGraph requires with a '
            "checkpointer"
        )


class EventConflict(HistoryStoreError):
    """An append or edit would rewrite an event the scope does not own (a branch revising an
    event it inherited from its parent)."""


class CompactionConflict(ContextManagementError):
    """Another worker committed a compaction checkpoint first: the candidate was built on
    ``expected_generation``, the store now holds ``actual_generation``."""

    def __init__(
        self,
        scope: object,
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
    """A candidate's covered range changed after its snapshot: it is marked ``failed`` and must
    be rebuilt."""

    def __init__(self, scope: object, *, candidate_id: str, reason: str) -> None:
        self.scope = scope
        self.candidate_id = candidate_id
        self.reason = reason
        super().__init__(
            f"stale compaction candidate {candidate_id} in {scope}: {reason}; "
            "take a new snapshot and rebuild the summary"
        )


class CoverageUnavailable(ContextManagementError, ValueError):
    """A summary cannot cover a branch through ``through_seq``: no events yet, or ``through_seq``
    not between what the active summary covers and the branch head (usually another worker
    committed first: read the active summary again). A ``ValueError`` too."""

    def __init__(
        self,
        scope: object,
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
    """A usage payload is malformed; ``field`` names the offending field as a dotted path."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"cannot read usage field {field!r}: {reason}")


class ContextBudgetExceeded(ContextManagementError):
    """The next request cannot fit the model's window whatever is compacted; raised before it
    is sent, with ``estimate``, ``usable`` and ``largest`` (the largest verbatim message)."""

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
    """The provider could not count a request's input tokens (HTTP error, timeout, no
    ``input_tokens``); ``status_code`` is the HTTP status when there was a reply."""

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
    """Compaction produced no valid summary within its attempts and time, and the request does
    not fit without one; the previous summary stays active."""

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
    """A compaction request cannot be served as given (bad instructions, ``requested_by`` or
    ``keep_recent_tokens``, or a graph without context management); nothing was compacted."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"compaction request not served: {problem}")


class SummaryFormatError(ContextManagementError, ValueError):
    """A summary text does not follow the structured format: a missing ``section`` or an
    unreadable ``line`` (1-based). Such a summary is never committed."""

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
    """A ``summary_model`` (or ``model``) spec string cannot be made into a chat model: no API
    key (``key`` names the variable), no integration package, or an unknown provider."""

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
    """Checkpoint retention cannot prune as asked (an unsupported checkpointer, a sync call on an
    async saver, a ``DeltaChannel`` thread); nothing of the thread was deleted."""


class DatasetError(ContextManagementError, ValueError):
    """An evaluation dataset (LoCoMo file, JSONL trace, generated session) is malformed."""


class DocumentError(ContextManagementError, ValueError):
    """A thread export document cannot be imported; ``path`` names the offending place
    (``events[3].seq``). Nothing was written."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"not a thread export this version can import: {path}: {reason}. Nothing was "
            "written; import the document export_thread made, unchanged"
        )


class MemoryExtractionError(ContextManagementError):
    """A memory extractor failed or answered no list of memories (the turn goes on)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"memory extraction failed: {reason}")
        self.reason = reason


class MemoryStoreError(ContextManagementError):
    """The long-term memory's LangGraph store could not be read or written."""


class ProviderCompactionError(ContextManagementError):
    """A provider's own compaction failed; the readable summary of the span is used instead."""

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(f"{provider} compaction failed: {reason}")
        self.provider = provider
        self.reason = reason
