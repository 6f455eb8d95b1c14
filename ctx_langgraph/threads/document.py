"""The check a thread export passes, whole, before :func:`~ctx_langgraph.threads.import_thread`
writes any of it: every field's type and range, what it refers to, what must be unique, and
that every message decodes; the first problem raises
:class:`~ctx_langgraph.errors.DocumentError` naming its path (``events[3].seq``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from ctx_langgraph.history.args import shown
from ctx_langgraph.history.types import CheckpointStatus, Scope, SegmentStatus
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.threads._attached import AttachedPartChecks
from ctx_langgraph.threads._values import INTEGER, Record, at, encodes, fail

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "check_document", "export_scope"]

EXPORT_FORMAT = "ctx-langgraph/thread"
"""The ``format`` field of every thread export document."""
EXPORT_VERSION = 1
"""The ``version`` of the export document this package writes and reads."""

_SUMMARY_STATUSES: tuple[str, ...] = get_args(CheckpointStatus)
_SEGMENT_STATUSES: tuple[str, ...] = get_args(SegmentStatus)
_POINTED_STATUSES = ("active", "superseded")  # a branch's own active summary, or inherited


def check_document(document: object, dialect: Dialect) -> None:
    """Check an export before importing it into a ``dialect`` database.

    Raises:
        DocumentError: the first problem found, with its path in the document.

    Examples:
        >>> from ctx_langgraph.storage.dialects import SQLITE
        >>> check_document({"format": "ctx-langgraph/thread", "version": 1, "tenant": "default",
        ...                 "thread_id": "t", "thread": {}}, SQLITE)
        Traceback (most recent call last):
        ...
        ctx_langgraph.errors.DocumentError: not a thread export this version can import: thread.edit_version: missing. Nothing was written; import the document export_thread made, unchanged
    """
    _Checker(nul_free=dialect.name == "postgres").document(document)


def export_scope(document: object) -> Scope:
    """The thread an export names (its tenant and thread id, on the default branch).

    Raises:
        DocumentError: it is not an export this version reads, or names no valid thread.

    Examples:
        >>> export_scope({"format": "ctx-langgraph/thread", "version": 1, "tenant": "acme",
        ...               "thread_id": "t-1"})
        Scope(thread_id='t-1', tenant='acme', branch='main')
    """
    return _Checker(nul_free=False).header(document)[1]


@dataclass(frozen=True)
class _Branch:
    path: str
    parent: str | None
    fork_seq: int | None
    head_seq: int
    active_id: str | None
    active_generation: int


@dataclass(frozen=True)
class _Summary:
    branch: str
    generation: int
    covered_through_seq: int
    status: str


_ANY_TEXT = frozenset({"events", "revisions", "summaries", "segments"})  # stored escaped


class _Checker(AttachedPartChecks):
    """Walks one document; each method checks one part and returns what later parts refer to."""

    def header(self, value: object) -> tuple[Mapping[str, Any], Scope]:
        """The document, once its format and version are this version's, and its scope."""
        document = Record(self, "", self.mapping("", value))
        format_name = document.get("format", None)
        if not isinstance(format_name, str) or format_name != EXPORT_FORMAT:
            fail("format", f"expected {EXPORT_FORMAT!r}, got {shown(format_name)}")
        version = document.get("version", None)
        if isinstance(version, bool) or not isinstance(version, int) or version != EXPORT_VERSION:
            fail("version", f"expected {EXPORT_VERSION}, got {shown(version)}")
        tenant = document.name("tenant", "tenant")
        return document.row, Scope(document.name("thread_id", "thread_id"), tenant)

    def document(self, value: object) -> None:
        document, scope = self.header(value)
        self.unicode(document)
        thread_key = (scope.tenant, scope.thread_id)
        doc = Record(self, "", document)
        if "exported_at" in document:
            self.time("exported_at", document["exported_at"])
        thread = self.record("thread", doc.get("thread"))
        edit_version = thread.integer("edit_version", 0)
        thread.time("created_at")
        branches = self.branches(doc.get("branches"))
        events = self.events(doc.get("events"), branches)
        self.revisions(doc.get("revisions"), branches, events)
        self.edits(doc.get("edits"), branches, edit_version)
        summaries = self.summaries(doc.get("summaries"), branches, thread_key, edit_version)
        self.active_pointers(branches, summaries)
        segments = document.get("segments")
        if segments is not None:  # (exports made before the segment index have none)
            self.segments(segments, branches, thread_key, edit_version)
        ledger = document.get("ledger")
        if ledger:
            self.ledger(ledger)
        memories = document.get("memories")
        if memories is not None:
            self.memories(memories)

    def unicode(self, document: Mapping[str, Any]) -> None:
        """Every string, key or value, outside the history's own (escaped) text is text both
        databases can encode (JSON can carry a lone surrogate; UTF-8 cannot)."""
        document = {k: v for k, v in document.items() if k not in _ANY_TEXT}
        try:
            json.dumps(document, ensure_ascii=False, default=lambda _: None).encode()
            return
        except (TypeError, ValueError, RecursionError):
            pass  # find where; a cycle, an odd key or a deep value is left to its part's check
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("", document)]
        while stack:
            path, value = stack.pop()
            if isinstance(value, str):
                if not encodes(value):
                    fail(path, f"expected text, got a lone surrogate in {shown(value)}")
                continue
            if not isinstance(value, (Mapping, list, tuple)) or id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, Mapping):
                for key, item in value.items():
                    printable = str(key).encode("utf-8", "backslashreplace").decode()
                    if isinstance(key, str) and not encodes(key):
                        fail(at(path, printable), "expected text, got a lone surrogate in the key")
                    stack.append((at(path, printable), item))
            else:
                stack.extend((at(path, index), item) for index, item in enumerate(value))

    def branches(self, value: object) -> dict[str, _Branch]:
        rows = self.items("branches", value)
        if not rows:
            fail("branches", "expected at least one branch (every thread has its main branch)")
        branches: dict[str, _Branch] = {}
        for index, item in enumerate(rows):
            row = self.record(at("branches", index), item)
            name = row.name("branch")
            if name in branches:
                fail(row.at("branch"), f"branch {name!r} is listed twice")
            parent = row.get("parent_branch")
            if parent is not None:
                parent = self.name(row.at("parent_branch"), parent)
            fork_seq = row.optional_integer("fork_seq", 0)
            if parent is None and fork_seq is not None:
                fail(
                    row.at("fork_seq"),
                    f"a branch without a parent has no fork point, got {fork_seq}",
                )
            if parent is not None and fork_seq is None:
                fail(
                    row.at("fork_seq"), f"expected the seq branch {name!r} was forked at, got None"
                )
            head_seq = row.integer("head_seq", 0)
            if fork_seq is not None and head_seq < fork_seq:
                fail(
                    row.at("head_seq"),
                    f"head_seq {head_seq} is below the branch's fork_seq {fork_seq}",
                )
            active_id = row.optional_text("active_checkpoint_id", empty=False)
            active_generation = row.integer("active_generation", 0)
            row.time("created_at")
            branches[name] = _Branch(
                row.path, parent, fork_seq, head_seq, active_id, active_generation
            )
        for name, branch in branches.items():
            if branch.parent is None:
                continue
            where = at(branch.path, "parent_branch")
            parent_branch = branches.get(branch.parent)
            if parent_branch is None:
                fail(where, f"no branch {branch.parent!r} in branches")
            assert branch.fork_seq is not None
            if branch.fork_seq > parent_branch.head_seq:
                fail(
                    at(branch.path, "fork_seq"),
                    f"fork_seq {branch.fork_seq} is past the head_seq {parent_branch.head_seq} "
                    f"of its parent {branch.parent!r}",
                )
            seen = {name}
            current: str | None = branch.parent
            while current is not None:
                if current in seen:
                    fail(where, f"the parent chain of {name!r} loops back to {current!r}")
                seen.add(current)
                current = branches[current].parent
        return branches

    def branch_of(self, row: Record, branches: Mapping[str, _Branch]) -> str:
        name = row.name("branch")
        if name not in branches:
            fail(row.at("branch"), f"no branch {name!r} in branches")
        return name

    def events(
        self, value: object, branches: Mapping[str, _Branch]
    ) -> dict[tuple[str, int], tuple[str, int]]:
        """Returns (event id, revision) by (branch, seq)."""
        events: dict[tuple[str, int], tuple[str, int]] = {}
        ids: set[tuple[str, str]] = set()
        for index, item in enumerate(self.items("events", value)):
            row = self.record(at("events", index), item)
            branch = self.branch_of(row, branches)
            seq = row.integer("seq", 1)
            owner = branches[branch]
            if seq > owner.head_seq:
                fail(
                    row.at("seq"),
                    f"seq {seq} is past the head_seq {owner.head_seq} of branch {branch!r} "
                    f"({owner.path}); the next append would collide with it",
                )
            if owner.fork_seq is not None and seq <= owner.fork_seq:
                fail(
                    row.at("seq"),
                    f"seq {seq} is not after the fork_seq {owner.fork_seq} of branch {branch!r}; "
                    "a branch's own events come after its fork point",
                )
            if (branch, seq) in events:
                fail(row.at("seq"), f"branch {branch!r} has two events at seq {seq}")
            event_id = row.text("event_id", empty=False, column=False)  # (stored escaped)
            if (branch, event_id) in ids:
                fail(row.at("event_id"), f"branch {branch!r} has two events {event_id!r}")
            ids.add((branch, event_id))
            revision = row.integer("revision", 1, INTEGER)
            self.flag(row.at("visible"), row.get("visible"))
            row.time("created_at")
            self.message(row.at("message"), row.get("message"), event_id)
            events[(branch, seq)] = (event_id, revision)
        return events

    def revisions(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        events: Mapping[tuple[str, int], tuple[str, int]],
    ) -> None:
        seen: set[tuple[str, int, int]] = set()
        for index, item in enumerate(self.items("revisions", value)):
            row = self.record(at("revisions", index), item)
            branch = self.branch_of(row, branches)
            seq = row.integer("seq", 1)
            event_id = row.text("event_id", empty=False, column=False)  # (stored escaped)
            revision = row.integer("revision", 1, INTEGER)
            current = events.get((branch, seq))
            if current is None:
                fail(row.at("seq"), f"no event of branch {branch!r} at seq {seq} in events")
            if current[0] != event_id:
                fail(
                    row.at("event_id"),
                    f"the event at seq {seq} of branch {branch!r} is {current[0]!r}, not "
                    f"{event_id!r}",
                )
            if revision >= current[1]:
                fail(
                    row.at("revision"),
                    f"an earlier revision must be below the event's revision {current[1]}, "
                    f"got {revision}",
                )
            if (branch, seq, revision) in seen:
                fail(row.at("revision"), f"revision {revision} of that event is listed twice")
            seen.add((branch, seq, revision))
            row.time("replaced_at")
            self.message(row.at("message"), row.get("message"), event_id)

    def edits(self, value: object, branches: Mapping[str, _Branch], edit_version: int) -> None:
        for index, item in enumerate(self.items("edits", value)):
            row = self.record(at("edits", index), item)
            branch = self.branch_of(row, branches)
            row.integer("seq", 1, branches[branch].head_seq)
            version = row.integer("edit_version", 1)
            if version > edit_version:
                fail(
                    row.at("edit_version"),
                    f"edit {version} is past the thread's edit_version {edit_version}",
                )
            row.text("kind", empty=False)
            row.time("created_at")

    def same_thread(self, row: Record, thread: tuple[str, str]) -> None:
        """The row names the document's tenant and thread id."""
        for key, expected in zip(("tenant", "thread_id"), thread, strict=True):
            if row.get(key) != expected:
                fail(
                    row.at(key),
                    f"expected the document's {key} {expected!r}, got {shown(row.row[key])}",
                )

    def json_object(self, row: Record, key: str) -> None:
        """An optional field holding a plain JSON object."""
        value = row.row.get(key)
        if value is not None:
            self.mapping(row.at(key), value)
            self.json_value(row.at(key), value)

    def summaries(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        thread: tuple[str, str],
        edit_version: int,
    ) -> dict[str, _Summary]:
        summaries: dict[str, _Summary] = {}
        for index, item in enumerate(self.items("summaries", value)):
            row = self.record(at("summaries", index), item)
            summary_id = row.text("id", empty=False)
            if summary_id in summaries:
                fail(row.at("id"), f"summary version {summary_id!r} is listed twice")
            self.same_thread(row, thread)
            branch = self.branch_of(row, branches)
            generation = row.integer("generation", 1)
            row.optional_text("parent_id", empty=False, default=None)
            head_seq = branches[branch].head_seq
            first_seq = row.integer("first_seq", 1, head_seq)
            covered = row.integer("covered_through_seq", first_seq, head_seq)
            row.optional_text("first_kept_event_id", column=False, default=None)
            row.integer("source_revision", 0, edit_version)
            row.text("range_hash")
            row.optional_text("summary_text", column=False, default=None)
            self.json_object(row, "provider_state")
            row.integer("format_version", 0, INTEGER)
            row.optional_text("summarizer_id", column=False, default=None)
            self.key_facts(row.at("key_facts"), row.row.get("key_facts"), covered)
            row.optional_integer("summary_tokens", 0, INTEGER, default=None)
            status = row.choice("status", _SUMMARY_STATUSES)
            row.optional_text("error", column=False, default=None)
            row.time("created_at")
            if row.row.get("committed_at") is not None:
                row.time("committed_at")
            self.json_object(row, "metadata")
            summaries[summary_id] = _Summary(branch, generation, covered, status)
        return summaries

    def segments(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        thread: tuple[str, str],
        edit_version: int,
    ) -> None:
        """The segment index: each row's range lies within its branch, and its key facts cite
        seqs of that range."""
        seen: set[str] = set()
        for index, item in enumerate(self.items("segments", value)):
            row = self.record(at("segments", index), item)
            segment_id = row.text("id", empty=False)
            if segment_id in seen:
                fail(row.at("id"), f"segment {segment_id!r} is listed twice")
            seen.add(segment_id)
            self.same_thread(row, thread)
            branch = self.branch_of(row, branches)
            head_seq = branches[branch].head_seq
            first = row.integer("first_seq", 1, head_seq)
            last = row.integer("last_seq", first, head_seq)
            row.integer("generation", 1)
            row.integer("source_revision", 0, edit_version)
            row.text("range_hash")
            row.optional_text("summary_text", column=False, default=None)
            self.key_facts(row.at("key_facts"), row.row.get("key_facts"), last, first)
            row.optional_text("summarizer_id", column=False, default=None)
            row.optional_integer("summary_tokens", 0, INTEGER, default=None)
            row.choice("status", _SEGMENT_STATUSES)
            row.optional_text("error", column=False, default=None)
            row.time("created_at")
            self.json_object(row, "metadata")

    def key_facts(self, path: str, value: object, covered: int, first: int = 1) -> None:
        if value is None:
            return
        for index, item in enumerate(self.items(path, value)):
            fact = self.record(at(path, index), item)
            fact.text("text", column=False)
            fact.integer("source_seq", first, covered)
            self.text(fact.at("kind"), fact.row.get("kind", "fact"), column=False)
            for key in ("source_event_id", "replaces", "day", "tool"):
                fact.optional_text(key, column=False, default=None)

    def active_pointers(
        self, branches: Mapping[str, _Branch], summaries: Mapping[str, _Summary]
    ) -> None:
        """A branch's active summary is on its own lineage, within what the branch can see."""
        for name, branch in branches.items():
            if branch.active_id is None:
                continue
            path = at(branch.path, "active_checkpoint_id")
            summary = summaries.get(branch.active_id)
            if summary is None:
                fail(path, f"no summary version {branch.active_id!r} in summaries")
            if summary.status not in _POINTED_STATUSES:
                fail(path, f"summary version {branch.active_id!r} is {summary.status}")
            bound: int | None = None
            current, current_name = branch, name
            while current_name != summary.branch:
                if current.parent is None:
                    fail(
                        path,
                        f"summary version {branch.active_id!r} belongs to branch "
                        f"{summary.branch!r}, which branch {name!r} does not descend from",
                    )
                fork = current.fork_seq or 0
                bound = fork if bound is None else min(bound, fork)
                current_name = current.parent
                current = branches[current_name]
            if bound is not None and summary.covered_through_seq > bound:
                fail(
                    path,
                    f"summary version {branch.active_id!r} covers through seq "
                    f"{summary.covered_through_seq}, past the fork point {bound} of {name!r}",
                )
            if summary.generation != branch.active_generation:
                fail(
                    at(branch.path, "active_generation"),
                    f"expected the active summary's generation {summary.generation}, got "
                    f"{branch.active_generation}",
                )
