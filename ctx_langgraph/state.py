"""The graph state our nodes read and write: messages plus a small ``context`` channel.

``context`` holds plain JSON values only (no sets, no custom classes: they break
``LANGGRAPH_STRICT_MSGPACK`` and bloat every checkpoint, docs/design.md §3). Each node returns the
keys it changes; :func:`merge_context` merges them into the previous value (every key optional,
nested reports replaced whole). :class:`ContextReport` types the channel shared by the nodes.

Who writes what: ``ctx_budget`` (the estimate, the decision, what it recorded, how it kept the
view in step with the store), ``ctx_compact`` (the summary committed, or why not), ``ctx_usage``
(the baseline, the usage booked), the overflow recovery (``overflow``, ``shrink_tool_results``).

Examples:
    >>> report: ContextReport = {"projection_epoch": 2, "budget": {"decision": "proceed"}}
    >>> merge_context(report, {"projection_epoch": 3})["budget"]["decision"]
    'proceed'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, TypedDict

from ctx_langgraph.indexes import IndexReport, SegmentReport
from ctx_langgraph.makeup import RequestMakeup

__all__ = [
    "ArtifactSighting",
    "ArtifactsReport",
    "Baseline",
    "BudgetDecision",
    "BudgetReport",
    "CacheReport",
    "Calibration",
    "CompactRequest",
    "CompactionReport",
    "ContextReport",
    "ContextState",
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
    "RepairTotals",
    "RequestMakeup",
    "SegmentReport",
    "ServerCompaction",
    "SummarizerBackoff",
    "merge_context",
]


BudgetDecision = Literal["proceed", "compact", "precompact", "done"]
"""Where the router after ``ctx_budget`` sends the turn (``done``: a requested compaction was
served and there is nothing for the model to answer, so the run ends)."""


class CompactRequest(TypedDict, total=False):
    """``context["compact"]``: a compaction asked for now, whatever the budget says.

    Set it as graph input (``{"context": {"compact": {"instructions": "..."}}}``, from Studio or
    the app), through :func:`~ctx_langgraph.compaction.request.compact_thread`, or by the model
    with the ``compact_context`` tool. ``ctx_budget`` routes to ``ctx_compact``, which serves it
    once (committed or not) and clears it."""

    instructions: str | None
    """What the summary should keep above all (``"keep the API design decisions"``)."""
    requested_by: str
    """``user``, ``model`` or ``app`` (recorded with the summary version)."""
    keep_recent_tokens: int | None
    """The verbatim tail to keep (default: the configuration's ``keep_recent_tokens``)."""


class BudgetReport(TypedDict, total=False):
    """``context["budget"]``: the next request's estimate and the decision, written by
    ``ctx_budget`` on every pass (docs/design.md §5); read by the router, ``ctx_compact`` and
    the overflow recovery."""

    input_tokens: int
    """Estimated input tokens of the next request, margin excluded."""
    margin: int
    """The safety margin added to the estimate."""
    total: int
    """``input_tokens + margin``: what the trigger and the usable window are compared with
    (the overflow recovery raises it above ``usable`` to force a compaction)."""
    method: Literal["baseline", "recount", "provider"]
    """How the estimate was made: measured baseline + appended, a recount of the view, or
    the provider's own count near the limit."""
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
    """Present when the configured summarizer is backing off and the offline one must cover
    a request that cannot wait."""


class CacheReport(TypedDict, total=False):
    """``context["cache"]``: how much of the request about to be sent a provider's prompt
    cache can read, against the previous request sent on the thread (``ctx_budget``, on a pass
    that proceeds to the model; :mod:`ctx_langgraph.budget.prefix`)."""

    prefix_tokens: int
    """Leading tokens identical to the previous request (tool schemas and system prompt,
    then whole messages, in order)."""
    input_tokens: int
    """The request's tokens, as the same measure counts them."""
    ratio: float | None
    """``prefix_tokens / input_tokens``."""
    moved_by: str | None
    """The first part that differs from the previous request (``summary`` after a
    compaction, ``memory``, ``pinned rules``, ``cleared tool result``, ``tools or system
    prompt``, ``human message``, ...), None when the previous request is a prefix of this one."""
    head: list[str]
    """The digests (12 hex characters each) of the request's leading parts: the tool schemas
    and prompt, then the messages before the conversation (system prompts, pinned rules,
    memory, the summary). With ``messages`` and ``through``, what the next pass measures
    against; it does not grow with the thread."""
    messages: int
    """The request's messages."""
    through: str | None
    """The id of the request's last message."""
    digests: list[str]
    """Every part's digest: kept by older versions (read, no longer written)."""


class PendingRequest(TypedDict, total=False):
    """``context["request"]``: what ``ctx_budget`` estimated for the request about to be sent;
    ``ctx_usage`` sets the baseline from it, ``ctx_budget`` calibrates against it."""

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
    """The request's tokens by part (:mod:`ctx_langgraph.makeup`; a pass that lets the request
    through to the model): ``ctx_usage`` books it with the reply that answers this request."""


class Baseline(TypedDict, total=False):
    """``context["baseline"]``: the provider's measured input of the last request, written by
    ``ctx_usage`` after a complete usage report, reset to None by ``ctx_compact``; the next
    estimate starts from it while the projection epoch is unchanged (docs/design.md §5)."""

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
    """``context["calibration"]``: the approximate counter's learned ratio for this thread,
    written by ``ctx_budget`` on every pass when the counter is approximate."""

    chars_per_token: float
    """Characters of words per token."""
    count: int
    """How many measurements it learned from."""


class RecordedDigest(TypedDict):
    """``context["recorded_digest"]``: checksum of the recorded part of the state (written by
    ``ctx_budget`` and extended by ``ctx_usage``): an edit by id is noticed against it."""

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
    branch: str  # the branch it forked and was recorded on (the branch had gone on past it)


class ServerCompaction(TypedDict):
    """``context["server_compaction"]``: a reply carrying a provider's server-side compaction
    item, noticed by ``ctx_budget``; ``ctx_compact`` records the coverage and resets it."""

    message_id: str | None
    """The reply that carried the item."""
    item: dict[str, Any]
    """The provider's opaque compaction item."""
    provider: NotRequired[str]
    """Who made it: ``"openai-responses"`` or ``"anthropic"`` (absent in a state saved before
    Anthropic's compaction was supported: OpenAI's)."""
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
    """``context["memory"]``: what long-term memory did this pass (``ctx_budget``, when a
    memory is wired)."""

    changes: list[MemoryChangeReport]
    """What it learned from the user's new messages."""
    error: str
    """Why it was not updated or not loaded."""
    loaded: int
    """Records in the view's memory message."""
    tokens: int
    """Tokens of the memory message."""
    query: str
    """What the records are ranked by: the user's latest message when the summary last moved,
    held until the next compaction so the memory message keeps the prompt prefix cacheable."""
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
    """``context["artifacts"]``: the artifact trail the active summary carries (docs/design.md
    §6), written by ``ctx_compact``. The whole trail is in the summary message and in the
    summary version's ``metadata["artifact_trail"]``; the history lookup finds an entry by
    its artifact."""

    count: int
    """Entries in the trail."""
    tokens: int | None
    """The tokens of its section of the summary message."""
    evicted: int
    """Entries its cap (``ContextConfig.artifact_trail_tokens``) dropped over the thread's life."""
    newest: list[ArtifactSighting]
    """The most recently touched entries, newest first (at most five)."""


class CompactionReport(TypedDict, total=False):
    """``context["compaction"]``: the last compaction attempt, written by ``ctx_compact``
    (docs/design.md §6); ``ctx_budget`` does not send the same view back after a failure."""

    epoch: int
    """The projection epoch of the attempt."""
    at_message_id: str | None
    """The view's last message at the attempt."""
    status: str
    """``committed``, ``committed_precomputed``, ``reconciled``, ``failed``,
    ``nothing_to_cover``, ``not_recorded``, or ``refused`` (a malformed request)."""
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
    """``context["summarizer_backoff"]``: when the configured summarizer is tried again after
    failures in a row (``ctx_compact``; None after a success)."""

    failures: int
    """Failures in a row."""
    retry_after_pass: int
    """The ``budget_passes`` count from which it is tried again."""
    retry_at: float
    """The time (epoch seconds) from which it is tried again."""


class Precompaction(TypedDict):
    """``context["precompaction"]``: a candidate summary built in the background
    (``ctx_compact`` on a ``precompact`` decision)."""

    epoch: int
    """The projection epoch it started in (``ctx_budget`` does not start another)."""
    status: str
    """``started``."""


class ProviderEdits(TypedDict, total=False):
    """``context["provider_edits"]``: what the provider's own context editing cleared from the
    last request (``ctx_usage``); a recount takes it off."""

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
    """``context["overflow"]``: the recovery after a provider's context-length error (the
    overflow retry around the model call, docs/design.md §6)."""

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
    """The projection epoch of the request sent again (a reply is of that request, not of a
    ``context["request"]`` of another epoch)."""


class ContextReport(TypedDict, total=False):
    """The ``context`` channel: plain JSON bookkeeping of context management, one key per fact.

    Written by ``ctx_budget``, ``ctx_compact``, ``ctx_usage`` and the overflow recovery, each
    returning only the keys it changes (merged by :func:`merge_context`).
    """

    projection_epoch: int
    """Counts changes of the view's prefix (a compaction, an edit, cleared results, another
    system prompt, tool set or model): a baseline of another epoch is not trusted.
    ``ctx_budget`` bumps it, ``ctx_compact`` bumps it on a rewrite."""
    branch: str
    """The history store branch the state records on (``ctx_budget``; a fork starts a new one)."""
    recorded_through_id: str | None
    """The last message of the state recorded in the history store (``ctx_budget``, and
    ``ctx_usage`` when it recorded the reply)."""
    recorded_digest: RecordedDigest
    """Checksum of the recorded part of the state (``ctx_budget``, ``ctx_usage``)."""
    record_error: str
    """Why an edited message was not recorded (``ctx_budget``)."""
    record_warnings: int
    """The thread's running count of message times that could not be read and were recorded
    with the time before them or now (``ctx_budget``)."""
    edit_version: int
    """The store's edit version the view was last reconciled with (``ctx_budget``)."""
    active_checkpoint_id: str | None
    """The active summary the view holds (``ctx_compact``; ``ctx_budget`` when it reconciles
    with the store)."""
    active_generation: int
    """Its generation (``ctx_compact``, ``ctx_budget``)."""
    covered_through_seq: int
    """The last seq it covers (``ctx_compact``, ``ctx_budget``)."""
    artifacts: ArtifactsReport
    """The artifact trail of the active summary: how many entries, its tokens, the newest
    (``ctx_compact``)."""
    rebuild: bool
    """An edit took the summary away: ``ctx_budget`` sets it, ``ctx_compact`` clears it after
    rebuilding the summary from the raw history."""
    recorded_reply: RecordedReply
    """The reply ``ctx_usage`` recorded as it arrived."""
    server_compaction: ServerCompaction | None
    """A provider's server-side compaction to record (``ctx_budget``; ``ctx_compact`` resets)."""
    projected_for: str | None
    """The provider the view's summary is projected for (``ctx_budget``, ``ctx_compact``)."""
    repairs: RepairTotals
    """The thread's running count of view repairs (``ctx_budget``)."""
    shrink_tool_results: int
    """A smaller tool-result cap for the next ``ctx_budget`` pass, set by the overflow recovery
    when no cut was left; that pass consumes it."""
    fingerprint: str
    """Hash of the system prompt, tools and model the baseline measured (``ctx_budget``)."""
    budget: BudgetReport
    """The estimate and the decision of the last ``ctx_budget`` pass."""
    budget_passes: int
    """How many ``ctx_budget`` passes the thread had (the summarizer's backoff counts them)."""
    memory: MemoryReport
    """What long-term memory did on the last pass (``ctx_budget``, when wired)."""
    request: PendingRequest
    """The request about to be sent, as ``ctx_budget`` estimated it."""
    cache: CacheReport
    """The request's cacheable prefix against the thread's previous request (``ctx_budget``)."""
    calibration: Calibration
    """The approximate counter's learned ratio for this thread (``ctx_budget``)."""
    calibrated_with: str | None
    """The reply the calibration last learned from (``ctx_budget``)."""
    compaction: CompactionReport
    """The last compaction attempt (``ctx_compact``)."""
    summarizer_backoff: SummarizerBackoff | None
    """When the configured summarizer is tried again (``ctx_compact``)."""
    precompaction: Precompaction
    """A background candidate summary (``ctx_compact``)."""
    provider_edits: ProviderEdits
    """The provider's context edits on the last request (``ctx_usage``)."""
    index: IndexReport
    """The vector index after the turn (``ctx_usage``, when the store has an index)."""
    provider_edits_total: ProviderEditTotals
    """Running totals of the provider's context edits (``ctx_usage``)."""
    baseline: Baseline | None
    """The measured input of the last request (``ctx_usage``; None after a compaction)."""
    last_usage_message_id: str | None
    """The reply whose usage was booked last (``ctx_usage``: a re-run does not book twice)."""
    last_usage: LastUsage
    """The usage booked for the last reply (``ctx_usage``)."""
    overflow: OverflowReport
    """The last recovery after a provider's context-length error."""
    compact: CompactRequest | None
    """A compaction asked for now (input, ``compact_thread`` or the ``compact_context`` tool);
    ``ctx_compact`` serves it once and sets it to None."""


def merge_context(
    left: Mapping[str, Any] | None, right: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Reducer of the ``context`` channel: the update's keys replace the old ones.

    Examples:
        >>> merge_context({"projection_epoch": 1, "baseline": {"measured_input_tokens": 10}}, {"projection_epoch": 2})
        {'projection_epoch': 2, 'baseline': {'measured_input_tokens': 10}}
    """
    return {**(left or {}), **(right or {})}


class ContextState(TypedDict, total=False):
    """Messages of the working view plus the context-management bookkeeping."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The working view: the summary message (once there is one) and the uncovered tail."""
    context: Annotated[ContextReport, merge_context]
    """Plain JSON bookkeeping (:class:`ContextReport`):
    ``projection_epoch``, the capacity ``baseline`` (measured input tokens,
    ``input_through_message_id``, model, response id), the pending ``request``, the budget,
    compaction and memory reports, the last usage booked."""
