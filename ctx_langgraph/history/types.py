"""Records of the history store: scopes, events, compaction checkpoints, search pages."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, TypeVar

from langchain_core.messages import BaseMessage, messages_from_dict

from ctx_langgraph.core.scope import DEFAULT_BRANCH, DEFAULT_TENANT, Scope

__all__ = [
    "ARTIFACT_TRAIL_HEADING",
    "ARTIFACT_TRAIL_KEY",
    "DEFAULT_BRANCH",
    "DEFAULT_TENANT",
    "DERIVED_METADATA_KEYS",
    "AppendOutcome",
    "AppendResult",
    "AppendStatus",
    "BranchInfo",
    "CheckpointStatus",
    "CompactionCheckpoint",
    "CoverageSnapshot",
    "HistoryEvent",
    "KeyFact",
    "RankedHit",
    "Scope",
    "SearchPage",
    "Segment",
    "SegmentStatus",
    "ThreadRow",
]

ARTIFACT_TRAIL_KEY: Final = "artifact_trail"
"""The key of a summary version's ``metadata`` holding its artifact trail."""
ARTIFACT_TRAIL_HEADING: Final = "Artifact trail"
"""The heading of the artifact trail's section: the last of a summary text that has one."""
DERIVED_METADATA_KEYS: Final = (ARTIFACT_TRAIL_KEY,)
"""Keys of a summary version's ``metadata`` that quote the events it covers: an edit, hiding or
deletion of a covered event clears them with the summary's text and key facts."""

AppendStatus = Literal["appended", "duplicate", "revised"]
CheckpointStatus = Literal["candidate", "active", "superseded", "failed", "invalid"]
SegmentStatus = Literal["active", "superseded", "invalid"]
R = TypeVar("R")


@dataclass(frozen=True)
class HistoryEvent:
    """One recorded message, as the scope that read it sees it.

    ``branch`` is the branch that owns the row: for events inherited from a parent branch it is
    the parent's name, while ``seq`` is the same in both (branches share the prefix).
    """

    seq: int
    event_id: str
    branch: str
    role: str
    name: str | None
    content: dict[str, Any]
    """The message serialized by ``langchain_core.messages.message_to_dict``."""
    text: str
    """The searchable text projection (message text, tool call names and arguments)."""
    tool_call_ids: tuple[str, ...]
    """Ids of the tool calls an AI message makes, or the id a tool message answers."""
    tool_names: tuple[str, ...]
    revision: int
    visible: bool
    created_at: dt.datetime

    @property
    def message(self) -> BaseMessage:
        """The LangChain message, rebuilt exactly as it was appended."""
        return messages_from_dict([self.content])[0]


@dataclass(frozen=True)
class AppendResult:
    """What one append did to one message."""

    event_id: str
    seq: int
    revision: int
    status: AppendStatus


@dataclass(frozen=True)
class AppendOutcome:
    """What :meth:`~ctx_langgraph.history.HistoryStore.append_after` did: the messages'
    results and the branch after them, or nothing when the branch had moved on."""

    results: list[AppendResult]
    """One per message, in order (empty when ``diverged``)."""
    head: BranchInfo | None
    """The branch after the append (None when ``diverged``); ``head.scope`` names the branch
    written, a new one when the append forked."""
    diverged: bool = False
    """The branch holds other events after ``after``: nothing was written (``fork=False``)."""
    forked_from: str | None = None
    """The branch the append forked from (``fork=True`` and the branch had gone on past
    ``after`` with other events); None when it wrote on the branch it was given."""
    value: Any = None
    """What the ``then`` operation returned (None without one)."""


@dataclass(frozen=True)
class BranchInfo:
    """A branch's lineage, head and active compaction pointer."""

    scope: Scope
    parent_branch: str | None
    fork_seq: int | None
    head_seq: int
    """The highest seq this branch has assigned (inherited events included); 0 when empty."""
    active_checkpoint_id: str | None
    active_generation: int
    created_at: dt.datetime
    edit_version: int = 0
    """The thread's edit counter (hides, deletions and revisions so far): a reader that saw
    another value knows some event it holds may have changed."""


@dataclass(frozen=True)
class ThreadRow:
    """One thread of a tenant: how many branches it has, its highest head seq and summary
    generation, and when its first branch was created."""

    thread_id: str
    branches: int
    head_seq: int
    active_generation: int
    created_at: dt.datetime


@dataclass(frozen=True)
class KeyFact:
    """An exact fact kept by a summary (identifier, amount, date, path, URL, name) with its source.

    ``day`` and ``tool`` are optional (summaries written before them have neither): the day of
    the source event as a summary shows it (``Mon 8 May 2023``), and the tool whose call or
    output the value was read from (``None``: a person stated it).

    Examples:
        >>> fact = KeyFact("ORD-7", 12, "id", day="Mon 8 May 2023", tool="search_orders")
        >>> KeyFact.from_json(fact.to_json()) == fact
        True
        >>> KeyFact("ORD-7", 12, "id").to_json()
        {'text': 'ORD-7', 'source_seq': 12, 'kind': 'id', 'source_event_id': None}
    """

    text: str
    source_seq: int
    kind: str = "fact"
    source_event_id: str | None = None
    replaces: str | None = None
    """The old value a user correction named as wrong ("B-2291, not A-1172")."""
    day: str | None = None
    """The day of the source event (``Mon 8 May 2023``); ``None`` when not known."""
    tool: str | None = None
    """The tool whose call or output holds the value; ``None`` when a person stated it."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "source_seq": self.source_seq,
            "kind": self.kind,
            "source_event_id": self.source_event_id,
        }
        optional = {"replaces": self.replaces, "day": self.day, "tool": self.tool}
        return data | {key: value for key, value in optional.items() if value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeyFact:
        return cls(
            text=str(data["text"]),
            source_seq=int(data["source_seq"]),
            kind=str(data.get("kind", "fact")),
            source_event_id=data.get("source_event_id"),
            replaces=data.get("replaces") or None,
            day=data.get("day") or None,
            tool=data.get("tool") or None,
        )


@dataclass(frozen=True)
class CoverageSnapshot:
    """A fixed view of the span a new summary will cover, taken before summarizing. A candidate
    built from it (:meth:`~ctx_langgraph.history.HistoryStore.create_candidate`) is refused at
    commit when another was committed since or a covered event was edited since."""

    scope: Scope
    base_checkpoint_id: str | None
    base_generation: int
    first_seq: int
    """First seq of the span newly folded in (the base's ``covered_through_seq + 1``)."""
    covered_through_seq: int
    events: tuple[HistoryEvent, ...]
    """The visible events of the span, in seq order."""
    source_revision: int
    """The thread's edit counter when the snapshot was taken."""
    range_hash: str
    """sha256 of (seq, event_id, revision) of every visible event of the span."""


def _to_json(record: Any) -> dict[str, Any]:
    """A summary version's or segment's fields as plain JSON, the scope spread in place."""
    data: dict[str, Any] = {}
    for item in fields(record):
        value = getattr(record, item.name)
        if isinstance(value, Scope):
            data |= {"tenant": value.tenant, "thread_id": value.thread_id, "branch": value.branch}
        elif isinstance(value, dt.datetime):
            data[item.name] = value.isoformat()
        elif item.name == "key_facts":
            data[item.name] = [fact.to_json() for fact in value]
        else:
            data[item.name] = value
    return data


def _from_json(cls: type[R], data: Mapping[str, Any]) -> R:
    """The record :func:`_to_json` wrote, read back by the type of each field."""
    values: dict[str, Any] = {}
    for item in fields(cls):  # type: ignore[arg-type]
        name, kind, raw = item.name, item.type, data.get(item.name)
        if kind == "Scope":
            raw = Scope(str(data["thread_id"]), str(data["tenant"]), str(data["branch"]))
        elif kind in ("int", "str"):
            raw = int(data[name]) if kind == "int" else str(data[name])
        elif kind == "dt.datetime":
            raw = dt.datetime.fromisoformat(str(data[name]))
        elif kind == "dt.datetime | None":
            raw = None if raw is None else dt.datetime.fromisoformat(str(raw))
        elif name == "key_facts":
            raw = tuple(KeyFact.from_json(fact) for fact in raw or ())
        elif name == "metadata":
            raw = dict(raw or {})
        elif name == "status":
            raw = data["status"]
        values[name] = raw
    return cls(**values)


@dataclass(frozen=True)
class CompactionCheckpoint:
    """One summary version: what it says and exactly which events it covers."""

    id: str
    scope: Scope
    generation: int
    parent_id: str | None
    first_seq: int
    covered_through_seq: int
    first_kept_event_id: str | None
    source_revision: int
    range_hash: str
    summary_text: str | None
    provider_state: dict[str, Any] | None
    format_version: int
    summarizer_id: str | None
    key_facts: tuple[KeyFact, ...]
    summary_tokens: int | None
    status: CheckpointStatus
    error: str | None
    created_at: dt.datetime
    committed_at: dt.datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (times as ISO-8601, the scope's branch as ``branch``): what an export
        holds. :meth:`from_json` reads it back."""
        return _to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompactionCheckpoint:
        return _from_json(cls, data)


@dataclass(frozen=True)
class Segment:
    """One segment of the index: a summary of a separate range of history (``first_seq`` to
    ``last_seq``). A range rebuilt after an edit gets a new ``generation`` (the old row is
    ``superseded``); an edit in its range makes an active segment ``invalid``."""

    id: str
    scope: Scope
    first_seq: int
    last_seq: int
    generation: int
    source_revision: int
    """The thread's edit counter when the range was read."""
    range_hash: str
    """sha256 of (seq, event_id, revision) of every visible event of the range."""
    summary_text: str | None
    key_facts: tuple[KeyFact, ...]
    summarizer_id: str | None
    summary_tokens: int | None
    status: SegmentStatus
    error: str | None
    created_at: dt.datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, as an export holds it (:meth:`from_json` reads it back)."""
        return _to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Segment:
        return _from_json(cls, data)


@dataclass(frozen=True)
class SearchPage:
    """One page of search hits in seq order, with the cursor of the next page."""

    hits: tuple[HistoryEvent, ...]
    next_cursor: str | None
    has_more: bool

    def __len__(self) -> int:
        return len(self.hits)


@dataclass(frozen=True)
class RankedHit:
    """One event a ranked search found, with its BM25 score (higher ranks first; see
    :meth:`~ctx_langgraph.history.HistoryStore.rank`)."""

    event: HistoryEvent
    score: float
