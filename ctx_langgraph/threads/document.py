"""The check a thread export passes, whole, before :func:`~ctx_langgraph.threads.import_thread`
writes any of it.

An export is plain JSON that may have been edited, cut short or forged on its way here. Every
field the import reads is checked: its type and range; what it refers to (an event's branch, a
branch's parent and fork point, a summary's covered range, an active summary pointer); that
what the database keys by is unique; and that every message decodes the way the store reads it
back. The first problem raises :class:`~ctx_langgraph.errors.DocumentError` naming its path in
the document (``events[3].seq``), so a tampered export fails before the first row is written
instead of half-importing or leaving a thread that later appends or reads trip over.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from ctx_langgraph.history.args import shown
from ctx_langgraph.history.types import CheckpointStatus, Scope, SegmentStatus
from ctx_langgraph.storage.dialects import Dialect
from ctx_langgraph.threads._attached import AttachedPartChecks
from ctx_langgraph.threads._values import INTEGER, at, encodes, fail

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "check_document", "export_scope"]

EXPORT_FORMAT = "ctx-langgraph/thread"
"""The ``format`` field of every thread export document."""
EXPORT_VERSION = 1
"""The ``version`` of the export document this package writes and reads."""

_SUMMARY_STATUSES: tuple[str, ...] = get_args(CheckpointStatus)
_SEGMENT_STATUSES: tuple[str, ...] = get_args(SegmentStatus)
_POINTED_STATUSES = ("active", "superseded")
"""What a branch's active pointer can name: its own active summary, or the one it inherited."""


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
    """What the checks of the other parts need to know of one branch."""

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


_ANY_TEXT = frozenset({"events", "revisions", "summaries", "segments"})
"""The parts of a document whose text columns are stored escaped (NUL, lone surrogates)."""


class _Checker(AttachedPartChecks):
    """Walks one document; each method checks one part and returns what later parts refer to."""

    def header(self, value: object) -> tuple[Mapping[str, Any], Scope]:
        """The document as a mapping, once its format and version are the ones this version
        reads, with the scope it names (tenant, thread id, default branch)."""
        document = self.mapping("", value)
        format_name = self.field(document, "", "format", None)
        if not isinstance(format_name, str) or format_name != EXPORT_FORMAT:
            fail("format", f"expected {EXPORT_FORMAT!r}, got {shown(format_name)}")
        version = self.field(document, "", "version", None)
        if isinstance(version, bool) or not isinstance(version, int) or version != EXPORT_VERSION:
            fail("version", f"expected {EXPORT_VERSION}, got {shown(version)}")
        tenant = self.name("tenant", self.field(document, "", "tenant"), "tenant")
        thread_id = self.name("thread_id", self.field(document, "", "thread_id"), "thread_id")
        return document, Scope(thread_id, tenant)

    def document(self, value: object) -> None:
        document, scope = self.header(value)
        self.unicode(document)
        tenant, thread_id = scope.tenant, scope.thread_id
        if "exported_at" in document:
            self.time("exported_at", document["exported_at"])
        thread = self.mapping("thread", self.field(document, "", "thread"))
        edit_version = self.integer(
            "thread.edit_version", self.field(thread, "thread", "edit_version"), 0
        )
        self.time("thread.created_at", self.field(thread, "thread", "created_at"))
        branches = self.branches(self.field(document, "", "branches"))
        events = self.events(self.field(document, "", "events"), branches)
        self.revisions(self.field(document, "", "revisions"), branches, events)
        self.edits(self.field(document, "", "edits"), branches, edit_version)
        summaries = self.summaries(
            self.field(document, "", "summaries"), branches, (tenant, thread_id), edit_version
        )
        self.active_pointers(branches, summaries)
        segments = document.get("segments")
        if segments is not None:  # (exports made before the segment index have none)
            self.segments(segments, branches, (tenant, thread_id), edit_version)
        ledger = document.get("ledger")
        if ledger:
            self.ledger(ledger)
        memories = document.get("memories")
        if memories is not None:
            self.memories(memories)

    def unicode(self, document: Mapping[str, Any]) -> None:
        """Every string, key or value, is text both databases can encode (JSON can carry a
        lone surrogate such as ``"\\ud800"``; UTF-8 cannot). The history's own text (events,
        revisions, summaries) is stored escaped: any text goes there."""
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
            path = at("branches", index)
            row = self.mapping(path, item)
            name = self.name(at(path, "branch"), self.field(row, path, "branch"))
            if name in branches:
                fail(at(path, "branch"), f"branch {name!r} is listed twice")
            parent = self.field(row, path, "parent_branch")
            if parent is not None:
                parent = self.name(at(path, "parent_branch"), parent)
            fork_seq = self.optional_integer(
                at(path, "fork_seq"), self.field(row, path, "fork_seq"), 0
            )
            if parent is None and fork_seq is not None:
                fail(
                    at(path, "fork_seq"),
                    f"a branch without a parent has no fork point, got {fork_seq}",
                )
            if parent is not None and fork_seq is None:
                fail(
                    at(path, "fork_seq"),
                    f"expected the seq branch {name!r} was forked at, got None",
                )
            head_seq = self.integer(at(path, "head_seq"), self.field(row, path, "head_seq"), 0)
            if fork_seq is not None and head_seq < fork_seq:
                fail(
                    at(path, "head_seq"),
                    f"head_seq {head_seq} is below the branch's fork_seq {fork_seq}",
                )
            active_id = self.optional_text(
                at(path, "active_checkpoint_id"),
                self.field(row, path, "active_checkpoint_id"),
                empty=False,
            )
            active_generation = self.integer(
                at(path, "active_generation"), self.field(row, path, "active_generation"), 0
            )
            self.time(at(path, "created_at"), self.field(row, path, "created_at"))
            branches[name] = _Branch(path, parent, fork_seq, head_seq, active_id, active_generation)
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

    def branch_of(self, path: str, value: object, branches: Mapping[str, _Branch]) -> str:
        name = self.name(path, value)
        if name not in branches:
            fail(path, f"no branch {name!r} in branches")
        return name

    def events(
        self, value: object, branches: Mapping[str, _Branch]
    ) -> dict[tuple[str, int], tuple[str, int]]:
        """Returns (event id, revision) by (branch, seq)."""
        events: dict[tuple[str, int], tuple[str, int]] = {}
        ids: set[tuple[str, str]] = set()
        for index, item in enumerate(self.items("events", value)):
            path = at("events", index)
            row = self.mapping(path, item)
            branch = self.branch_of(at(path, "branch"), self.field(row, path, "branch"), branches)
            seq = self.integer(at(path, "seq"), self.field(row, path, "seq"), 1)
            owner = branches[branch]
            if seq > owner.head_seq:
                fail(
                    at(path, "seq"),
                    f"seq {seq} is past the head_seq {owner.head_seq} of branch {branch!r} "
                    f"({owner.path}); the next append would collide with it",
                )
            if owner.fork_seq is not None and seq <= owner.fork_seq:
                fail(
                    at(path, "seq"),
                    f"seq {seq} is not after the fork_seq {owner.fork_seq} of branch {branch!r}; "
                    "a branch's own events come after its fork point",
                )
            if (branch, seq) in events:
                fail(at(path, "seq"), f"branch {branch!r} has two events at seq {seq}")
            event_id = self.text(  # (stored escaped: any text)
                at(path, "event_id"), self.field(row, path, "event_id"), empty=False, column=False
            )
            if (branch, event_id) in ids:
                fail(at(path, "event_id"), f"branch {branch!r} has two events {event_id!r}")
            ids.add((branch, event_id))
            revision = self.integer(
                at(path, "revision"), self.field(row, path, "revision"), 1, INTEGER
            )
            self.flag(at(path, "visible"), self.field(row, path, "visible"))
            self.time(at(path, "created_at"), self.field(row, path, "created_at"))
            self.message(at(path, "message"), self.field(row, path, "message"), event_id)
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
            path = at("revisions", index)
            row = self.mapping(path, item)
            branch = self.branch_of(at(path, "branch"), self.field(row, path, "branch"), branches)
            seq = self.integer(at(path, "seq"), self.field(row, path, "seq"), 1)
            event_id = self.text(  # (stored escaped: any text)
                at(path, "event_id"), self.field(row, path, "event_id"), empty=False, column=False
            )
            revision = self.integer(
                at(path, "revision"), self.field(row, path, "revision"), 1, INTEGER
            )
            current = events.get((branch, seq))
            if current is None:
                fail(at(path, "seq"), f"no event of branch {branch!r} at seq {seq} in events")
            if current[0] != event_id:
                fail(
                    at(path, "event_id"),
                    f"the event at seq {seq} of branch {branch!r} is {current[0]!r}, not "
                    f"{event_id!r}",
                )
            if revision >= current[1]:
                fail(
                    at(path, "revision"),
                    f"an earlier revision must be below the event's revision {current[1]}, "
                    f"got {revision}",
                )
            if (branch, seq, revision) in seen:
                fail(at(path, "revision"), f"revision {revision} of that event is listed twice")
            seen.add((branch, seq, revision))
            self.time(at(path, "replaced_at"), self.field(row, path, "replaced_at"))
            self.message(at(path, "message"), self.field(row, path, "message"), event_id)

    def edits(self, value: object, branches: Mapping[str, _Branch], edit_version: int) -> None:
        for index, item in enumerate(self.items("edits", value)):
            path = at("edits", index)
            row = self.mapping(path, item)
            branch = self.branch_of(at(path, "branch"), self.field(row, path, "branch"), branches)
            head_seq = branches[branch].head_seq
            self.integer(at(path, "seq"), self.field(row, path, "seq"), 1, head_seq)
            version = self.integer(
                at(path, "edit_version"), self.field(row, path, "edit_version"), 1
            )
            if version > edit_version:
                fail(
                    at(path, "edit_version"),
                    f"edit {version} is past the thread's edit_version {edit_version}",
                )
            self.text(at(path, "kind"), self.field(row, path, "kind"), empty=False)
            self.time(at(path, "created_at"), self.field(row, path, "created_at"))

    def summaries(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        thread: tuple[str, str],
        edit_version: int,
    ) -> dict[str, _Summary]:
        summaries: dict[str, _Summary] = {}
        for index, item in enumerate(self.items("summaries", value)):
            path = at("summaries", index)
            row = self.mapping(path, item)
            summary_id = self.text(at(path, "id"), self.field(row, path, "id"), empty=False)
            if summary_id in summaries:
                fail(at(path, "id"), f"summary version {summary_id!r} is listed twice")
            for key, expected in zip(("tenant", "thread_id"), thread, strict=True):
                if self.field(row, path, key) != expected:
                    fail(
                        at(path, key),
                        f"expected the document's {key} {expected!r}, got {shown(row[key])}",
                    )
            branch = self.branch_of(at(path, "branch"), self.field(row, path, "branch"), branches)
            generation = self.integer(
                at(path, "generation"), self.field(row, path, "generation"), 1
            )
            self.optional_text(at(path, "parent_id"), row.get("parent_id"), empty=False)
            head_seq = branches[branch].head_seq
            first_seq = self.integer(
                at(path, "first_seq"), self.field(row, path, "first_seq"), 1, head_seq
            )
            covered = self.integer(
                at(path, "covered_through_seq"),
                self.field(row, path, "covered_through_seq"),
                first_seq,
                head_seq,
            )
            self.optional_text(
                at(path, "first_kept_event_id"), row.get("first_kept_event_id"), column=False
            )
            self.integer(
                at(path, "source_revision"),
                self.field(row, path, "source_revision"),
                0,
                edit_version,
            )
            self.text(at(path, "range_hash"), self.field(row, path, "range_hash"))
            self.optional_text(at(path, "summary_text"), row.get("summary_text"), column=False)
            provider_state = row.get("provider_state")
            if provider_state is not None:
                self.mapping(at(path, "provider_state"), provider_state)
                self.json_value(at(path, "provider_state"), provider_state)
            self.integer(
                at(path, "format_version"), self.field(row, path, "format_version"), 0, INTEGER
            )
            self.optional_text(at(path, "summarizer_id"), row.get("summarizer_id"), column=False)
            self.key_facts(at(path, "key_facts"), row.get("key_facts"), covered)
            self.optional_integer(at(path, "summary_tokens"), row.get("summary_tokens"), 0, INTEGER)
            status = self.choice(
                at(path, "status"), self.field(row, path, "status"), _SUMMARY_STATUSES
            )
            self.optional_text(at(path, "error"), row.get("error"), column=False)
            self.time(at(path, "created_at"), self.field(row, path, "created_at"))
            self.optional_time(at(path, "committed_at"), row.get("committed_at"))
            metadata = row.get("metadata")
            if metadata is not None:
                self.mapping(at(path, "metadata"), metadata)
                self.json_value(at(path, "metadata"), metadata)
            summaries[summary_id] = _Summary(branch, generation, covered, status)
        return summaries

    def segments(
        self,
        value: object,
        branches: Mapping[str, _Branch],
        thread: tuple[str, str],
        edit_version: int,
    ) -> None:
        """The segment index: each row names this thread and a branch, its range lies within
        the branch, and its key facts cite seqs of that range."""
        seen: set[str] = set()
        for index, item in enumerate(self.items("segments", value)):
            path = at("segments", index)
            row = self.mapping(path, item)
            segment_id = self.text(at(path, "id"), self.field(row, path, "id"), empty=False)
            if segment_id in seen:
                fail(at(path, "id"), f"segment {segment_id!r} is listed twice")
            seen.add(segment_id)
            for key, expected in zip(("tenant", "thread_id"), thread, strict=True):
                if self.field(row, path, key) != expected:
                    fail(
                        at(path, key),
                        f"expected the document's {key} {expected!r}, got {shown(row[key])}",
                    )
            branch = self.branch_of(at(path, "branch"), self.field(row, path, "branch"), branches)
            head_seq = branches[branch].head_seq
            first = self.integer(
                at(path, "first_seq"), self.field(row, path, "first_seq"), 1, head_seq
            )
            last = self.integer(
                at(path, "last_seq"), self.field(row, path, "last_seq"), first, head_seq
            )
            self.integer(at(path, "generation"), self.field(row, path, "generation"), 1)
            self.integer(
                at(path, "source_revision"),
                self.field(row, path, "source_revision"),
                0,
                edit_version,
            )
            self.text(at(path, "range_hash"), self.field(row, path, "range_hash"))
            self.optional_text(at(path, "summary_text"), row.get("summary_text"), column=False)
            self.key_facts(at(path, "key_facts"), row.get("key_facts"), last, first)
            self.optional_text(at(path, "summarizer_id"), row.get("summarizer_id"), column=False)
            self.optional_integer(at(path, "summary_tokens"), row.get("summary_tokens"), 0, INTEGER)
            self.choice(at(path, "status"), self.field(row, path, "status"), _SEGMENT_STATUSES)
            self.optional_text(at(path, "error"), row.get("error"), column=False)
            self.time(at(path, "created_at"), self.field(row, path, "created_at"))
            metadata = row.get("metadata")
            if metadata is not None:
                self.mapping(at(path, "metadata"), metadata)
                self.json_value(at(path, "metadata"), metadata)

    def key_facts(self, path: str, value: object, covered: int, first: int = 1) -> None:
        if value is None:
            return
        for index, item in enumerate(self.items(path, value)):
            where = at(path, index)
            fact = self.mapping(where, item)
            self.text(at(where, "text"), self.field(fact, where, "text"), column=False)
            self.integer(
                at(where, "source_seq"), self.field(fact, where, "source_seq"), first, covered
            )
            self.text(at(where, "kind"), fact.get("kind", "fact"), column=False)
            for key in ("source_event_id", "replaces", "day", "tool"):
                self.optional_text(at(where, key), fact.get(key), column=False)

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
            current: _Branch | None = branch
            current_name = name
            while current is not None and current_name != summary.branch:
                if current.parent is None:
                    current = None
                    break
                fork = current.fork_seq or 0
                bound = fork if bound is None else min(bound, fork)
                current_name = current.parent
                current = branches[current_name]
            if current is None:
                fail(
                    path,
                    f"summary version {branch.active_id!r} belongs to branch {summary.branch!r}, "
                    f"which branch {name!r} does not descend from",
                )
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
