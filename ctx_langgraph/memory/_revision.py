"""What remembering a candidate writes (a repeat refreshes, a new value for a key supersedes, the
rest is added), and what importing an exported record writes. Pure.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ctx_langgraph.errors import MemoryExtractionError
from ctx_langgraph.memory._layout import Entry, Namespace, norm
from ctx_langgraph.memory.types import MemoryCandidate, MemoryRecord, MemoryScopeKind, MemoryScopes

Action = Literal["added", "refreshed", "superseded"]


@dataclass(frozen=True)
class MemoryChange:
    """What :meth:`LongTermMemory.remember` did with one candidate."""

    action: Action
    record: MemoryRecord
    superseded: tuple[str, ...] = ()
    """Ids of the records the new one replaced."""


def _holds(content: str, value: str) -> bool:
    """Whether ``content`` states ``value`` (word-bounded, case-insensitive)."""
    value = value.strip()
    return bool(value) and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", content, re.I) is not None


def check_candidates(candidates: Any) -> None:
    if not isinstance(candidates, list) or not all(
        isinstance(c, MemoryCandidate) for c in candidates
    ):
        raise MemoryExtractionError(
            f"the extractor returned {type(candidates).__name__}, not a list of MemoryCandidate"
        )


def matches(entries: Sequence[Entry], candidate: MemoryCandidate) -> list[Entry]:
    """The active records a candidate replaces or repeats."""
    wanted = norm(candidate.content)
    return [
        e
        for e in entries
        if e.record.id == candidate.supersedes
        or (candidate.key is not None and e.record.key == candidate.key)
        or e.norm == wanted
        or (candidate.replaces_value and _holds(e.record.content, candidate.replaces_value))
    ]


@dataclass(frozen=True)
class Slot:
    """Where a candidate goes: its scope kind, owner and namespace."""

    kind: MemoryScopeKind
    owner: str
    namespace: Namespace


@dataclass(frozen=True)
class Stamp:
    """What every record written for a candidate carries: its sources and times."""

    event_ids: tuple[str, ...]
    seqs: tuple[int, ...]
    now: dt.datetime
    expires: dt.datetime | None


def revision(
    scopes: MemoryScopes,
    slot: Slot,
    candidate: MemoryCandidate,
    hits: Sequence[Entry],
    stamp: Stamp,
) -> tuple[MemoryChange, list[MemoryRecord]]:
    """The record ``candidate`` writes (refreshed or new) and the records it supersedes."""
    targets = [e.record for e in hits]
    same = next((e.record for e in hits if e.norm == norm(candidate.content)), None)
    now = stamp.now
    if same is not None:
        record = replace(
            same,
            updated_at=now,
            confidence=max(same.confidence, candidate.confidence),
            source_event_ids=tuple(dict.fromkeys(same.source_event_ids + stamp.event_ids)),
            source_seqs=tuple(dict.fromkeys(same.source_seqs + stamp.seqs)),
            expires_at=stamp.expires if stamp.expires is not None else same.expires_at,
        )
        action: Action = "refreshed"
    else:
        record = MemoryRecord(
            id=str(uuid.uuid4()),
            scope=slot.kind,
            owner=slot.owner,
            content=candidate.content.strip(),
            tenant=scopes.tenant,
            key=candidate.key,
            kind=candidate.kind,
            source_thread=scopes.thread_id,
            source_event_ids=stamp.event_ids,
            source_seqs=stamp.seqs,
            created_at=now,
            updated_at=now,
            confidence=candidate.confidence,
            expires_at=stamp.expires,
            replaces=targets[0].id if targets else None,
        )
        action = "superseded" if targets else "added"
    old = [
        replace(r, status="superseded", superseded_by=record.id, updated_at=now)
        for r in targets
        if r is not same
    ]
    return MemoryChange(action, record, tuple(r.id for r in old)), old


def imported(
    document: Mapping[str, Any], tenant: str | None, thread_id: str | None
) -> MemoryRecord:
    """An exported record, moved into ``tenant`` and ``thread_id`` when they are given."""
    try:
        record = MemoryRecord.from_json(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a memory record: {exc!r}") from exc
    old_thread = record.source_thread
    record = replace(record, tenant=tenant or record.tenant)
    if thread_id is not None:
        record = replace(
            record,
            source_thread=thread_id if old_thread is not None else None,
            owner=thread_id if record.scope == "thread" else record.owner,
        )
    return record
