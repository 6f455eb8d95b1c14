"""Long-term memory records, the candidates extractors propose, and who a run remembers as."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from langchain_core.runnables import RunnableConfig

from ctx_langgraph.core.scope import Scope

__all__ = [
    "MemoryCandidate",
    "MemoryRecord",
    "MemoryScopeKind",
    "MemoryScopes",
    "MemoryStatus",
]

RECORD_FORMAT: Final = "ctx_memory/v1"
"""Marks a store item as one of our records (other items in the same namespaces are skipped)."""
MemoryScopeKind = Literal["user", "project", "thread"]
"""What a memory record belongs to: a ``user``, a ``project`` or a ``thread``."""
MemoryStatus = Literal["active", "superseded", "invalid"]
"""A memory record's status: ``active``, ``superseded`` (a newer value for its key replaced
it) or ``invalid`` (the message it came from was deleted, hidden or revised)."""
_KINDS: tuple[str, ...] = get_args(MemoryScopeKind)
_STATUSES: tuple[str, ...] = get_args(MemoryStatus)


def _time(value: Any) -> dt.datetime | None:
    if value is None or value == "":
        return None
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class MemoryRecord:
    """One long-term memory: what is remembered, for whom, from where, and whether it still holds.

    ``scope`` and ``owner`` say whose memory it is; ``key`` names the slot a fact fills ("order
    id"), so a new value supersedes the old record; ``source_*`` name the events it came from
    (deleting, hiding or revising one makes the record ``invalid`` and purges its content).

    Examples:
        >>> import datetime as dt
        >>> now = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
        >>> record = MemoryRecord("m1", "user", "u-7", "The user's order id is B-2291.", key="order id",
        ...                       created_at=now, updated_at=now, expires_at=now + dt.timedelta(days=30))
        >>> record.is_live(now), record.is_live(now + dt.timedelta(days=31))
        (True, False)
        >>> MemoryRecord.from_json(record.to_json()) == record
        True
    """

    id: str
    scope: MemoryScopeKind
    owner: str
    content: str
    tenant: str = "default"
    key: str | None = None
    kind: str = "fact"
    source_thread: str | None = None
    source_event_ids: tuple[str, ...] = ()
    source_seqs: tuple[int, ...] = ()
    created_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    updated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))
    confidence: float = 1.0
    expires_at: dt.datetime | None = None
    status: MemoryStatus = "active"
    superseded_by: str | None = None
    replaces: str | None = None
    """The id of the record this one superseded."""

    def __post_init__(self) -> None:
        if self.scope not in _KINDS:
            raise ValueError(f"memory scope must be one of {_KINDS}, got {self.scope!r}")
        if self.status not in _STATUSES:
            raise ValueError(f"memory status must be one of {_STATUSES}, got {self.status!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be within 0..1, got {self.confidence}")

    def is_live(self, now: dt.datetime) -> bool:
        """Active and not expired at ``now``: the only records ever loaded into a model's context."""
        return self.status == "active" and (self.expires_at is None or self.expires_at > now)

    def to_json(self) -> dict[str, Any]:
        """The record as the store keeps it (JSON-ready; the store filters on these keys)."""
        return {
            "format": RECORD_FORMAT,
            "id": self.id,
            "scope": self.scope,
            "owner": self.owner,
            "tenant": self.tenant,
            "content": self.content,
            "key": self.key,
            "kind": self.kind,
            "source_thread": self.source_thread,
            "source_event_ids": list(self.source_event_ids),
            "source_seqs": list(self.source_seqs),
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "confidence": self.confidence,
            "expires_at": _iso(self.expires_at),
            "status": self.status,
            "superseded_by": self.superseded_by,
            "replaces": self.replaces,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryRecord:
        """The record :meth:`to_json` wrote. Raises ``ValueError`` (or ``KeyError``) on a bad one."""
        created = _time(data["created_at"])
        updated = _time(data.get("updated_at")) or created
        assert created is not None and updated is not None
        return cls(
            id=str(data["id"]),
            scope=data["scope"],
            owner=str(data["owner"]),
            tenant=str(data.get("tenant") or "default"),
            content=str(data.get("content") or ""),
            key=data.get("key"),
            kind=str(data.get("kind") or "fact"),
            source_thread=data.get("source_thread"),
            source_event_ids=tuple(str(x) for x in data.get("source_event_ids") or ()),
            source_seqs=tuple(int(x) for x in data.get("source_seqs") or ()),
            created_at=created,
            updated_at=updated,
            confidence=float(data.get("confidence", 1.0)),
            expires_at=_time(data.get("expires_at")),
            status=data.get("status") or "active",
            superseded_by=data.get("superseded_by"),
            replaces=data.get("replaces"),
        )

    def purged(self, now: dt.datetime) -> MemoryRecord:
        """The record made ``invalid`` with its content and key erased (its sources were removed)."""
        return replace(self, status="invalid", content="", key=None, updated_at=now)


@dataclass(frozen=True)
class MemoryCandidate:
    """A memory an extractor proposes: new, a repeat, or a correction of the record it names
    (``supersedes``), fills the slot of (``key``) or states the wrong value of (``replaces_value``,
    "..., not A-1172")."""

    content: str
    key: str | None = None
    kind: str = "fact"
    scope: MemoryScopeKind | None = None
    """Whose memory it is; None means the memory's ``default_scope``."""
    confidence: float = 1.0
    source_event_ids: tuple[str, ...] = ()
    expires_at: dt.datetime | None = None
    supersedes: str | None = None
    replaces_value: str | None = None

    def __post_init__(self) -> None:
        if not self.content.strip():
            raise ValueError("a memory candidate needs content")
        if self.scope is not None and self.scope not in _KINDS:
            raise ValueError(f"memory scope must be one of {_KINDS}, got {self.scope!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be within 0..1, got {self.confidence}")


@dataclass(frozen=True)
class MemoryScopes:
    """Who a run remembers as: always its thread, and its user and project when the run's
    ``configurable`` names them (``user_id``, ``project_id`` by default). Never from data a
    model supplied.

    Examples:
        >>> scopes = MemoryScopes.from_config({"configurable": {"thread_id": "t1", "user_id": "u-7"}})
        >>> scopes.owners()
        [('thread', 't1'), ('user', 'u-7')]
        >>> scopes.owner_of("project") is None
        True
    """

    tenant: str
    thread_id: str
    user_id: str | None = None
    project_id: str | None = None

    @classmethod
    def from_config(
        cls,
        config: RunnableConfig | None,
        scope: Scope | None = None,
        *,
        user_key: str = "user_id",
        project_key: str = "project_id",
    ) -> MemoryScopes:
        """The scopes of a run: tenant and thread from ``scope`` (or ``configurable``), user and
        project from ``configurable[user_key]`` / ``configurable[project_key]``."""
        configurable = (config or {}).get("configurable") or {}
        user = configurable.get(user_key)
        project = configurable.get(project_key)
        tenant = scope.tenant if scope else str(configurable.get("ctx_tenant") or "default")
        thread = scope.thread_id if scope else str(configurable.get("thread_id") or "default")
        return cls(
            tenant,
            thread,
            str(user) if user not in (None, "") else None,
            str(project) if project not in (None, "") else None,
        )

    def owner_of(self, kind: MemoryScopeKind) -> str | None:
        """The owner id of ``kind`` for this run (None when the run names none)."""
        return {"thread": self.thread_id, "user": self.user_id, "project": self.project_id}[kind]

    def owners(self) -> list[tuple[MemoryScopeKind, str]]:
        """Every (scope, owner) this run reads, the thread first."""
        kinds: Sequence[MemoryScopeKind] = ("thread", "user", "project")
        return [(kind, owner) for kind in kinds if (owner := self.owner_of(kind)) is not None]
