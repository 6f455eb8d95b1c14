"""The graph state: messages plus a small ``context`` channel of plain JSON values
(:class:`ContextReport`, docs/design.md §3). Nodes work with the facts flat (:class:`FlatContext`)
and return those they change; :func:`merge_context` files each under its key (:data:`LAYOUT`).

Examples:
    >>> report: ContextReport = {"view": {"epoch": 2}, "report": {"budget": {"decision": "proceed"}}}
    >>> merge_context(report, {"projection_epoch": 3})["report"]["budget"]["decision"]
    'proceed'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_origin, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, TypedDict

from ctx_langgraph.indexes import IndexReport, SegmentReport
from ctx_langgraph.makeup import RequestMakeup

__all__ = [
    "LAYOUT",
    "ArtifactSighting",
    "ArtifactsReport",
    "Backoff",
    "Baseline",
    "BudgetDecision",
    "BudgetReport",
    "CacheReport",
    "Calibration",
    "CompactRequest",
    "CompactionReport",
    "ContextReport",
    "ContextState",
    "FlatContext",
    "IndexReport",
    "LastUsage",
    "MemoryChangeReport",
    "MemoryReport",
    "OverflowReport",
    "PendingRequest",
    "Precompaction",
    "ProviderEditTotals",
    "ProviderEdits",
    "ProviderReport",
    "RecordedDigest",
    "RecordedReply",
    "RecordedState",
    "RepairTotals",
    "RequestMakeup",
    "SegmentReport",
    "ServerCompaction",
    "SummarizerBackoff",
    "SummaryState",
    "TurnReport",
    "ViewState",
    "merge_context",
    "merge_facts",
    "pack",
    "packed",
    "unpack",
]


BudgetDecision = Literal["proceed", "compact", "precompact", "done"]
"""Where the router after ``ctx_budget`` sends the turn (``done``: a requested compaction was
served, nothing for the model to answer)."""


class CompactRequest(TypedDict, total=False):
    """``context["compact"]``: a compaction asked for now (graph input, ``compact_thread`` or the
    ``compact_context`` tool), whatever the budget says; ``ctx_compact`` serves it once."""

    instructions: str | None
    """What the summary should keep above all (``"keep the API design decisions"``)."""
    requested_by: str
    """``user``, ``model`` or ``app`` (recorded with the summary version)."""
    keep_recent_tokens: int | None
    """The verbatim tail to keep (default: the configuration's ``keep_recent_tokens``)."""


class BudgetReport(TypedDict, total=False):
    """``context["budget"]``: the next request's estimate and the decision (``ctx_budget``)."""

    input_tokens: int
    """Estimated input tokens of the next request, margin excluded."""
    margin: int
    """The safety margin added to the estimate."""
    total: int
    """``input_tokens + margin``: what the trigger and the usable window are compared with."""
    method: Literal["baseline", "recount", "provider"]
    """Measured baseline + appended, a recount of the view, or the provider's count."""
    measured_baseline: int | None
    """The measured input the estimate started from (baseline method)."""
    appended: int
    """Tokens of the messages after the baseline's boundary (baseline method)."""
    overhead: int
    """Tool schemas and reply priming (recount method)."""
    system: int
    """Tokens of the leading system messages (recount method)."""
    summary: int
    """Tokens of the summary message (recount method)."""
    retrieved: int
    """Tokens of retrieved snippets (recount method)."""
    tail: int
    """Tokens of the uncovered tail (recount method)."""
    counted_messages: int
    """Messages whose count was needed this pass (cache hits included)."""
    provider_cleared: int
    """Tokens the provider's own context editing clears from a recounted request."""
    decision: BudgetDecision
    """The decision of this pass."""
    epoch_bumped_for: list[str]
    """Why the projection epoch moved this pass (empty when it did not)."""
    trigger: int
    """Compaction starts above this many tokens."""
    target: int
    """What a compaction aims to bring the request down to."""
    usable: int
    """The window minus the output reserve: a request above it must fail."""
    window: int
    """The model's context window."""
    output_reserve: int
    """Tokens kept free for the reply."""
    counter: str
    """The token counter's id (its calibration included)."""
    generation: int
    """Generation of the active summary the view holds."""
    summarizer: Literal["fallback"]
    """The configured summarizer is backing off: the offline one covers the request."""


class CacheReport(TypedDict, total=False):
    """``context["cache"]``: how much of the next request a provider's prompt cache can read,
    against the thread's previous request (:mod:`ctx_langgraph.budget.prefix`)."""

    prefix_tokens: int
    """Leading tokens identical to the previous request."""
    input_tokens: int
    """The request's tokens, as the same measure counts them."""
    ratio: float | None
    """``prefix_tokens / input_tokens``."""
    moved_by: str | None
    """The first part that differs (``summary``, ``memory``, ``tools or system prompt``, ...);
    None when the previous request is a prefix of this one."""
    head: list[str]
    """Digests of the request's leading parts (tools and prompt, the messages before the
    conversation): what the next pass measures against."""
    messages: int
    """The request's messages."""
    through: str | None
    """The id of the request's last message."""
    digests: list[str]
    """Every part's digest: kept by older versions (read, no longer written)."""


class PendingRequest(TypedDict, total=False):
    """``context["request"]``: what ``ctx_budget`` estimated for the request about to be sent."""

    epoch: int
    """The projection epoch the request was built in (a reply of another epoch is stale)."""
    input_through_message_id: str | None
    """The last message of the request (the baseline's boundary)."""
    estimate: int
    """The estimated input tokens."""
    method: Literal["baseline", "recount", "provider"]
    """How it was estimated."""
    measured_baseline: int | None
    """The measured input the estimate started from (baseline method)."""
    counted_tokens: int
    """What the counter itself guessed (the rest was measured): calibration compares it."""
    counted_word_chars: int
    """Word characters of what the approximate counter guessed (approximate counters only)."""
    makeup: RequestMakeup
    """The request's tokens by part (:mod:`ctx_langgraph.makeup`), booked with its reply."""


class Baseline(TypedDict, total=False):
    """``context["baseline"]``: the provider's measured input of the last request (``ctx_usage``;
    None after a compaction); the next estimate starts from it within the same epoch."""

    measured_input_tokens: int
    """Input tokens the provider measured."""
    input_through_message_id: str | None
    """The last message that was in that request."""
    projection_epoch: int
    """The epoch of the view it measured."""
    model: str | None
    """The model the provider reported."""
    response_id: str | None
    """The provider's response id."""
    reply_message_id: str | None
    """The reply that carried the usage (calibration learns from each one once)."""


class Calibration(TypedDict):
    """``context["calibration"]``: the approximate counter's learned ratio for this thread."""

    chars_per_token: float
    """Characters of words per token."""
    count: int
    """How many measurements it learned from."""


class RecordedDigest(TypedDict):
    """``context["recorded_digest"]``: checksum of the recorded part of the state."""

    first: str | None
    """Id of the first recorded message."""
    count: int
    """How many recorded messages it covers."""
    value: int
    """The running checksum of their ids and contents."""


class RecordedReply(TypedDict, total=False):
    """``context["recorded_reply"]``: the reply ``ctx_usage`` recorded as it arrived."""

    id: str
    """The reply's message id."""
    seq: int
    """Its seq in the history store (absent when recording failed)."""
    status: str
    """The append's status (``appended``, ``duplicate``, ``revised``)."""
    error: str
    """Why it was not recorded yet (``ctx_budget`` records it next)."""
    branch: str
    """The branch it forked and was recorded on (the branch had gone on past it)."""


class ServerCompaction(TypedDict):
    """``context["server_compaction"]``: a reply's server-side compaction item, to record."""

    message_id: str | None
    """The reply that carried the item."""
    item: dict[str, Any]
    """The provider's opaque compaction item."""
    provider: NotRequired[str]
    """``"openai-responses"`` or ``"anthropic"`` (absent: OpenAI's)."""
    item_tokens: NotRequired[int | None]
    """What the provider reported generating for it (Anthropic's compaction usage), if known."""
    model: NotRequired[str | None]
    """The model that made it (the reply's ``model_name``)."""


class RepairTotals(TypedDict):
    """``context["repairs"]``: the thread's running count of view repairs (``ctx_budget``)."""

    dangling_tool_calls: int
    """Tool calls that got a stand-in result."""
    orphan_tool_results: int
    """Tool results left out of the view."""


class MemoryChangeReport(TypedDict):
    """One change long-term memory made from the user's new messages."""

    action: str
    """``added``, ``refreshed`` or ``superseded``."""
    id: str
    """The memory record's id."""
    superseded: list[str]
    """Records it superseded."""


class MemoryReport(TypedDict, total=False):
    """``context["memory"]``: what long-term memory did this pass."""

    changes: list[MemoryChangeReport]
    """What it learned from the user's new messages."""
    error: str
    """Why it was not updated or not loaded."""
    loaded: int
    """Records in the view's memory message."""
    tokens: int
    """Tokens of the memory message."""
    query: str
    """What the records are ranked by (held until the next compaction, for the prompt cache)."""
    generation: int
    """The summary generation ``query`` was taken at."""


class ProviderReport(TypedDict, total=False):
    """``context["compaction"]["provider"]``: the provider's own window for the span."""

    kind: str
    """``server`` (an item a reply carried) or the compact endpoint's kind."""
    provider: str
    """Who made the item a reply carried (``openai-responses`` or ``anthropic``)."""
    status: str
    """``recorded``, ``compacted`` or ``failed``."""
    error: str
    """Why the provider's window is missing."""
    window_items: int
    """Items of the provider's window."""
    response_id: str | None
    """The compact endpoint's response id."""


class ArtifactSighting(TypedDict):
    """One entry of the artifact trail, as ``context["artifacts"]["newest"]`` lists it."""

    artifact: str
    """The path, URL, id or command."""
    kind: str
    """``path``, ``url``, ``id`` or ``command``."""
    last_seq: int
    """Where it was last touched."""
    action: str
    """What happened there: ``created``, ``read``, ``changed``, ``failed`` or ``mentioned``."""


class ArtifactsReport(TypedDict):
    """``context["artifacts"]``: the artifact trail the active summary carries (``ctx_compact``)."""

    count: int
    """Entries in the trail."""
    tokens: int | None
    """The tokens of its section of the summary message."""
    evicted: int
    """Entries its cap (``ContextConfig.artifact_trail_tokens``) dropped over the thread's life."""
    newest: list[ArtifactSighting]
    """The most recently touched entries, newest first (at most five)."""


class CompactionReport(TypedDict, total=False):
    """``context["compaction"]``: the last compaction attempt (``ctx_compact``)."""

    epoch: int
    """The projection epoch of the attempt."""
    at_message_id: str | None
    """The view's last message at the attempt."""
    status: str
    """``committed``, ``reconciled``, ``failed``, ``nothing_to_cover``, ``refused``, ..."""
    error: str
    """Why nothing was covered (``not_recorded``)."""
    fallback: str
    """The offline summarizer that covered the span instead."""
    attempts: int
    """Summarizer calls made."""
    duration_ms: int
    """From the start of the attempt to its summary version (the candidate, or the failure)."""
    cut: str
    """The kind of cut."""
    summarizer: str
    """The summarizer that wrote the committed summary."""
    problems: list[str]
    """The last problems met (validation, conflicts, timeouts)."""
    pruned_versions: int
    """Old summary versions pruned after the commit."""
    generation: int
    """Generation of the committed summary."""
    covered_through_seq: int
    """The last seq the summary covers."""
    summary_tokens: int | None
    """Tokens of the summary text (None: the store did not count them)."""
    removed_messages: int
    """History messages the rewrite took out of the view."""
    segments: SegmentReport
    """What the segment index's build did after this compaction (``segment_events``)."""
    provider: ProviderReport
    """The provider's own window for the span."""
    requested: CompactRequest
    """The compaction request this attempt served (absent for automatic compaction)."""
    request_error: str
    """Why a compaction request was not served (it was malformed)."""
    rounds: int
    """The request's ``ctx_budget`` -> ``ctx_compact`` rounds so far, this one included."""
    estimate_before: int | None
    """The request's estimate when this round started (progress: the next one is lower)."""
    stopped: str
    """Why the request went on over the trigger: rounds used up, or no progress made."""


class SummarizerBackoff(TypedDict):
    """``context["summarizer_backoff"]``: when the failing summarizer is tried again."""

    failures: int
    """Failures in a row."""
    retry_after_pass: int
    """The ``budget_passes`` count from which it is tried again."""
    retry_at: float
    """The time (epoch seconds) from which it is tried again."""


class Precompaction(TypedDict):
    """``context["precompaction"]``: a candidate summary built in the background."""

    epoch: int
    """The projection epoch it started in (``ctx_budget`` does not start another)."""
    status: str
    """``started``."""


class ProviderEdits(TypedDict, total=False):
    """``context["provider_edits"]``: what the provider's context editing cleared last request."""

    message_id: str | None
    """The reply that reported the edits."""
    applied_edits: list[dict[str, Any]]
    """The edits as the provider reported them."""
    cleared_input_tokens: int
    """Input tokens cleared."""
    cleared_tool_uses: int
    """Tool uses cleared."""


class ProviderEditTotals(TypedDict):
    """``context["provider_edits_total"]``: the thread's running totals of provider edits."""

    replies: int
    """Replies that reported edits."""
    cleared_input_tokens: int
    """Input tokens cleared in all."""
    cleared_tool_uses: int
    """Tool uses cleared in all."""


class LastUsage(TypedDict, total=False):
    """``context["last_usage"]``: the usage ``ctx_usage`` booked for the last reply."""

    call_key: str
    """The ledger's idempotency key of the call."""
    status: str
    """The ledger record's status (``complete``, ...)."""
    input_total: int | None
    """Measured input tokens."""
    output: int | None
    """Measured output tokens."""
    booked: str
    """How the ledger took it (new, duplicate, ...)."""
    stale: bool
    """The reply answered a request of an older projection epoch."""
    error: str
    """Why it is ``deferred`` (``ctx_budget`` books it when it records the reply)."""


class OverflowReport(TypedDict, total=False):
    """``context["overflow"]``: the recovery after a provider's context-length error."""

    retries: int
    """The thread's running count of recoveries."""
    error: str
    """The provider's error text."""
    error_type: str
    """The exception's type name."""
    compaction: str | None
    """The forced compaction's status."""
    shortened_tool_results: int
    """Tool results capped smaller when no cut was left."""
    at_message_id: str | None
    """The message the rejected request ended with."""
    unchanged: bool
    """Nothing could be compacted or shortened: the same request was sent again."""
    retry_epoch: int
    """The projection epoch of the request sent again."""


class ViewState(TypedDict, total=False):
    """``context["view"]``: what the working view was built for."""

    epoch: int
    """Counts changes of the view's prefix: a baseline of another epoch is not trusted."""
    fingerprint: str
    """Hash of the system prompt, tools and model the baseline measured."""
    provider: str | None
    """The provider the view's summary is projected for."""
    edit_version: int
    """The store's edit version the view was last reconciled with."""
    shrink_tool_results: int
    """A smaller tool-result cap for the next ``ctx_budget`` pass (overflow recovery)."""


class RecordedState(TypedDict, total=False):
    """``context["recorded"]``: how far the state is recorded in the history store."""

    through_id: str | None
    """The last message of the state recorded in the store."""
    digest: RecordedDigest
    """Checksum of the recorded part of the state (edits by id are found against it)."""
    reply: RecordedReply
    """The reply ``ctx_usage`` recorded as it arrived."""
    booked_id: str | None
    """The reply whose usage was booked last (a re-run does not book twice)."""
    calibrated_id: str | None
    """The reply the counter's calibration last learned from."""


class SummaryState(TypedDict, total=False):
    """``context["summary"]``: the active summary the view holds."""

    checkpoint_id: str | None
    """Its id in the store (None: no summary yet)."""
    generation: int
    """Its generation."""
    covered_through_seq: int
    """The last seq it covers."""
    rebuild: bool
    """An edit took the summary away: ``ctx_compact`` rebuilds it from the raw history."""
    server: ServerCompaction | None
    """A provider's server-side compaction to record."""
    candidate: Precompaction
    """A background candidate summary."""


class Backoff(TypedDict, total=False):
    """``context["backoff"]``: when the configured summarizer is tried again."""

    passes: int
    """How many ``ctx_budget`` passes the thread had (the backoff counts them)."""
    summarizer: SummarizerBackoff | None
    """The summarizer's failures and when it is tried again (None: not backing off)."""


class TurnReport(TypedDict, total=False):
    """``context["report"]``: what each step decided on its last pass (each replaced whole)."""

    budget: BudgetReport
    """The estimate and the decision of the last ``ctx_budget`` pass."""
    cache: CacheReport
    """The request's cacheable prefix against the thread's previous request."""
    compaction: CompactionReport
    """The last compaction attempt (``ctx_compact``)."""
    artifacts: ArtifactsReport
    """The artifact trail of the active summary: entries, tokens, the newest."""
    memory: MemoryReport
    """What long-term memory did on the last pass (when wired)."""
    last_usage: LastUsage
    """The usage booked for the last reply (``ctx_usage``)."""
    provider_edits: ProviderEdits
    """The provider's context edits on the last request (``ctx_usage``)."""
    provider_edits_total: ProviderEditTotals
    """Running totals of the provider's context edits."""
    index: IndexReport
    """The vector index after the turn (when the store has an index)."""
    overflow: OverflowReport
    """The last recovery after a provider's context-length error."""
    record_error: str
    """Why an edited message was not recorded."""
    record_warnings: int
    """Running count of message times that could not be read (recorded with a nearby time)."""
    repairs: RepairTotals
    """Running count of view repairs."""


class ContextReport(TypedDict, total=False):
    """The ``context`` channel: the control state the next turn needs, and the turn's report
    (bounded; :func:`merge_context` merges the grouped keys field by field)."""

    view: ViewState
    """What the working view was built for: the projection epoch, fingerprint, provider."""
    branch: str
    """The history store branch the state records on (a fork starts a new one)."""
    recorded: RecordedState
    """How far the state is recorded in the store, and the last reply booked."""
    summary: SummaryState
    """The active summary the view holds."""
    baseline: Baseline | None
    """The measured input of the last request (None after a compaction)."""
    calibration: Calibration
    """The approximate counter's learned ratio for this thread."""
    request: PendingRequest
    """The request about to be sent, as ``ctx_budget`` estimated it."""
    backoff: Backoff
    """When the configured summarizer is tried again."""
    compact: CompactRequest | None
    """A compaction asked for now; ``ctx_compact`` serves it once and sets it to None."""
    report: TurnReport
    """What each step decided on its last pass (budget, compaction, usage, overflow, ...)."""


class FlatContext(TypedDict, total=False):
    """The ``context`` channel as the nodes work with it, one key per fact (:func:`unpack`,
    :func:`pack`); ``Annotated`` with ``(key, field)``, where :data:`LAYOUT` files it (and it is
    documented)."""

    projection_epoch: Annotated[int, ("view", "epoch")]
    branch: str
    recorded_through_id: Annotated[str | None, ("recorded", "through_id")]
    recorded_digest: Annotated[RecordedDigest, ("recorded", "digest")]
    record_error: Annotated[str, ("report", "record_error")]
    record_warnings: Annotated[int, ("report", "record_warnings")]
    edit_version: Annotated[int, ("view", "edit_version")]
    active_checkpoint_id: Annotated[str | None, ("summary", "checkpoint_id")]
    active_generation: Annotated[int, ("summary", "generation")]
    covered_through_seq: Annotated[int, ("summary", "covered_through_seq")]
    artifacts: Annotated[ArtifactsReport, ("report", "artifacts")]
    rebuild: Annotated[bool, ("summary", "rebuild")]
    recorded_reply: Annotated[RecordedReply, ("recorded", "reply")]
    server_compaction: Annotated[ServerCompaction | None, ("summary", "server")]
    projected_for: Annotated[str | None, ("view", "provider")]
    repairs: Annotated[RepairTotals, ("report", "repairs")]
    shrink_tool_results: Annotated[int, ("view", "shrink_tool_results")]
    fingerprint: Annotated[str, ("view", "fingerprint")]
    budget: Annotated[BudgetReport, ("report", "budget")]
    budget_passes: Annotated[int, ("backoff", "passes")]
    memory: Annotated[MemoryReport, ("report", "memory")]
    request: PendingRequest
    cache: Annotated[CacheReport, ("report", "cache")]
    calibration: Calibration
    calibrated_with: Annotated[str | None, ("recorded", "calibrated_id")]
    compaction: Annotated[CompactionReport, ("report", "compaction")]
    summarizer_backoff: Annotated[SummarizerBackoff | None, ("backoff", "summarizer")]
    precompaction: Annotated[Precompaction, ("summary", "candidate")]
    provider_edits: Annotated[ProviderEdits, ("report", "provider_edits")]
    index: Annotated[IndexReport, ("report", "index")]
    provider_edits_total: Annotated[ProviderEditTotals, ("report", "provider_edits_total")]
    baseline: Baseline | None
    last_usage_message_id: Annotated[str | None, ("recorded", "booked_id")]
    last_usage: Annotated[LastUsage, ("report", "last_usage")]
    overflow: Annotated[OverflowReport, ("report", "overflow")]
    compact: CompactRequest | None


LAYOUT: dict[str, tuple[str, str]] = {
    fact: hint.__metadata__[0]
    for fact, hint in get_type_hints(FlatContext, include_extras=True).items()
    if get_origin(hint) is Annotated
}
"""Where each fact of :class:`FlatContext` is filed: ``fact: (key, field)`` (others: top keys)."""

_GROUPS = frozenset(group for group, _ in LAYOUT.values())
_FLAT = {placed: fact for fact, placed in LAYOUT.items()}


def pack(context: Mapping[str, Any] | None) -> dict[str, Any]:
    """File flat facts under the channel's keys (:data:`LAYOUT`); grouped keys pass through.

    Examples:
        >>> pack({"projection_epoch": 2, "budget": {"decision": "proceed"}, "branch": "main"})
        {'view': {'epoch': 2}, 'report': {'budget': {'decision': 'proceed'}}, 'branch': 'main'}
    """
    packed: dict[str, Any] = {}
    for key, value in (context or {}).items():
        placed = LAYOUT.get(key)
        if placed is not None:
            packed.setdefault(placed[0], {})[placed[1]] = value
        elif key in _GROUPS and isinstance(value, Mapping):
            packed[key] = {**packed.get(key, {}), **value}
        else:
            packed[key] = value
    return packed


def unpack(context: Mapping[str, Any] | None) -> FlatContext:
    """The channel as one flat fact per key (the inverse of :func:`pack`; flat input passes).

    Examples:
        >>> unpack({"view": {"epoch": 2}, "report": {"budget": {"decision": "proceed"}}})
        {'projection_epoch': 2, 'budget': {'decision': 'proceed'}}
    """
    flat: dict[str, Any] = {}
    for key, value in (context or {}).items():
        if key in _GROUPS and isinstance(value, Mapping):
            for field, item in value.items():
                flat[_FLAT.get((key, field)) or str(field)] = item
        else:
            flat[key] = value
    return flat  # type: ignore[return-value]


def merge_facts(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> FlatContext:
    """``right``'s facts over ``left``'s, flat (either side may be packed).

    Examples:
        >>> merge_facts({"view": {"epoch": 1}, "branch": "main"}, {"projection_epoch": 2})
        {'projection_epoch': 2, 'branch': 'main'}
    """
    return {**unpack(left), **unpack(right)}


def packed(update: dict[str, Any]) -> dict[str, Any]:
    """A node's update with its ``context`` facts filed under the channel's keys (:func:`pack`)."""
    if update and update.get("context") is not None:
        return {**update, "context": pack(update["context"])}
    return update


def merge_context(
    left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Reducer of the ``context`` channel: the update's facts (flat or packed) replace the old
    ones; the result is packed.

    Examples:
        >>> merged = merge_context({"view": {"epoch": 1}, "baseline": {"measured_input_tokens": 10}}, {"projection_epoch": 2})
        >>> merged["view"], merged["baseline"]
        ({'epoch': 2}, {'measured_input_tokens': 10})
    """
    merged = pack(left)
    for key, value in pack(right).items():
        old = merged.get(key)
        if key in _GROUPS and isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = {**old, **value}
        else:
            merged[key] = value
    return merged


class ContextState(TypedDict, total=False):
    """Messages of the working view plus the context-management bookkeeping."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The working view: the summary message (once there is one) and the uncovered tail."""
    context: Annotated[ContextReport, merge_context]
    """Plain JSON bookkeeping (:class:`ContextReport`)."""
