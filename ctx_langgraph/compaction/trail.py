"""The artifact trail: per thread, the artifacts the conversation touched, kept across summaries.

Each summary version carries one (docs/design.md §6): the previous trail merged with the span's
touches, capped on its own, stored in the checkpoint's ``metadata`` and rendered as the summary
text's last section (:data:`TRAIL_HEADING`).

Examples:
    >>> from ctx_langgraph.budget import ApproximateCounter
    >>> from ctx_langgraph.compaction.artifacts import Touch
    >>> trail = ArtifactTrail().merged([
    ...     Touch("/etc/app.yaml", "path", 3, "read", "read_file", "port: 8080"),
    ...     Touch("/etc/app.yaml", "path", 9, "changed", "write_file", "ok"),
    ... ])
    >>> print(trail.render())
    ## Artifact trail
    - path /etc/app.yaml: read 3; changed 9; state (write_file, seq 9): ok
    >>> trail.capped(5, ApproximateCounter()).entries
    ()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, cast

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.artifacts import ArtifactKind, Touch, span_touches
from ctx_langgraph.history.types import (
    ARTIFACT_TRAIL_HEADING,
    ARTIFACT_TRAIL_KEY,
    CompactionCheckpoint,
    HistoryEvent,
)
from ctx_langgraph.state import ArtifactsReport

__all__ = [
    "MAX_TOUCHES",
    "TRAIL_HEADING",
    "TRAIL_KEY",
    "ArtifactEntry",
    "ArtifactTrail",
    "merged_trail",
    "next_trail",
    "with_trail",
]

TRAIL_HEADING: Final = ARTIFACT_TRAIL_HEADING
"""The heading of the artifact trail's section, last in the summary message."""
TRAIL_KEY: Final = ARTIFACT_TRAIL_KEY
"""The key of the trail in a checkpoint's ``metadata``."""
TRAIL_VERSION: Final = 1
MAX_TOUCHES: Final = 6
"""The seqs an entry keeps: its first touch and the newest ones."""
NEWEST_SHOWN: Final = 5


@dataclass(frozen=True)
class ArtifactEntry:
    """One artifact of the trail: what was done to it at which seqs, and its last known state."""

    artifact: str
    kind: ArtifactKind
    touches: tuple[tuple[int, str], ...]
    """(seq, action) in seq order: the first one and the newest (at most :data:`MAX_TOUCHES`)."""
    state: str | None = None
    """The last known state, verbatim; None when nothing said more than its name."""
    state_seq: int | None = None
    state_via: str | None = None
    """Who gave the state: the tool's name, ``user`` or ``assistant``."""

    @property
    def first_seq(self) -> int:
        return self.touches[0][0]

    @property
    def last_seq(self) -> int:
        return self.touches[-1][0]

    @property
    def rank(self) -> int:
        """What losing it costs: 3 created or changed, 2 last mentioned with a state, 1 read."""
        if any(action in ("created", "changed") for _, action in self.touches):
            return 3
        return 2 if self.touches[-1][1] == "mentioned" and self.state is not None else 1

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(seq for seq, _ in self.touches))

    def touched(self, touch: Touch) -> ArtifactEntry:
        """This entry after a newer ``touch``: a call replaces the state, a mention only when it
        says something."""
        touches = self.touches
        if (touch.seq, touch.action) not in touches:
            touches = (*touches, (touch.seq, touch.action))
            if len(touches) > MAX_TOUCHES:
                touches = (touches[0], *touches[-(MAX_TOUCHES - 1) :])
        if touch.state is None and touch.action == "mentioned":
            return replace(self, touches=touches)
        return replace(
            self, touches=touches, state=touch.state, state_seq=touch.seq, state_via=touch.via
        )

    def render(self, *, shown: str | None = None) -> str:
        """One list item: ``- kind artifact: action seqs; ...; state (via, seq N): text``;
        ``shown``: where the same state is quoted already, to point there instead."""
        actions: dict[str, list[str]] = {}
        for seq, action in self.touches:
            actions.setdefault(action, []).append(str(seq))
        done = "; ".join(f"{action} {', '.join(seqs)}" for action, seqs in actions.items())
        if self.state is None or self.state.strip() == self.artifact:
            return f"- {self.kind} {self.artifact}: {done}"
        if shown:
            return f"- {self.kind} {self.artifact}: {done}; state (seq {self.state_seq}) quoted {shown}"
        named = "" if self.artifact in self.state else f" {self.artifact}"
        head = f"- {self.kind}{named}: {done}; state ({self.state_via}, seq {self.state_seq}):"
        lines = self.state.splitlines()
        if len(lines) == 1:
            return f"{head} {lines[0]}"
        return "\n".join([head, *(f"    {text}" if text.strip() else "" for text in lines)])

    def to_json(self) -> dict[str, Any]:
        return {
            "artifact": self.artifact,
            "kind": self.kind,
            "touches": [[seq, action] for seq, action in self.touches],
            "state": self.state,
            "state_seq": self.state_seq,
            "state_via": self.state_via,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArtifactEntry:
        return cls(
            artifact=str(data["artifact"]),
            kind=cast(ArtifactKind, str(data["kind"])),
            touches=tuple((int(seq), str(action)) for seq, action in data["touches"]),
            state=None if data.get("state") is None else str(data["state"]),
            state_seq=None if data.get("state_seq") is None else int(data["state_seq"]),
            state_via=None if data.get("state_via") is None else str(data["state_via"]),
        )


@dataclass(frozen=True)
class ArtifactTrail:
    """The trail of one summary version: entries, the one touched longest ago first."""

    entries: tuple[ArtifactEntry, ...] = ()
    evicted: int = 0
    """Entries dropped by the cap over the thread's life."""
    tokens: int | None = field(default=None, compare=False)
    """The rendered section's token count, when :meth:`capped` counted it."""

    @classmethod
    def from_checkpoint(cls, checkpoint: CompactionCheckpoint | None) -> ArtifactTrail:
        """The trail a summary version carries (empty for a version without one)."""
        data = (checkpoint.metadata or {}).get(TRAIL_KEY) if checkpoint is not None else None
        return cls.from_metadata(data)

    @classmethod
    def from_metadata(cls, data: Any) -> ArtifactTrail:
        """The trail stored as :meth:`to_metadata`; anything else reads as an empty trail."""
        if not isinstance(data, Mapping) or data.get("version") != TRAIL_VERSION:
            return cls()
        entries = tuple(ArtifactEntry.from_json(e) for e in data.get("entries") or ())
        tokens = data.get("tokens")
        return cls(entries, int(data.get("evicted") or 0), None if tokens is None else int(tokens))

    def metadata(self) -> dict[str, Any]:
        """The checkpoint ``metadata`` that carries this trail."""
        return {TRAIL_KEY: self.to_metadata()}

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON, for the checkpoint's ``metadata[TRAIL_KEY]``."""
        return {
            "version": TRAIL_VERSION,
            "entries": [entry.to_json() for entry in self.entries],
            "evicted": self.evicted,
            "tokens": self.tokens,
        }

    def merged(self, touches: Iterable[Touch]) -> ArtifactTrail:
        """This trail after the touches of a newer span (in seq order)."""
        by_key = {(e.kind, e.artifact): e for e in self.entries}
        for touch in touches:
            key = (touch.kind, touch.artifact)
            entry = by_key.pop(key, None)
            if entry is None:
                entry = ArtifactEntry(touch.artifact, touch.kind, ())
            by_key[key] = entry.touched(touch)
        entries = sorted(by_key.values(), key=lambda e: (e.last_seq, e.first_seq))
        return replace(self, entries=tuple(entries), tokens=None)

    def render(self, prose: str = "") -> str:
        """The summary's section (empty for an empty trail); a state the ``prose`` quotes
        already is pointed to, not repeated."""
        return self._render(self.entries, _folded(prose))

    @staticmethod
    def _render(entries: Sequence[ArtifactEntry], folded_prose: str = "") -> str:
        if not entries:
            return ""
        lines, shown = [f"## {TRAIL_HEADING}"], set()
        for entry in entries:
            key = (entry.state_seq, entry.state)
            where = None
            if key in shown:
                where = "above"
            elif entry.state and folded_prose and _folded(entry.state) in folded_prose:
                where = "in the summary above"
            lines.append(entry.render(shown=where))
            shown.add(key)
        return "\n".join(lines)

    def capped(self, max_tokens: int, counter: TokenCounter, prose: str = "") -> ArtifactTrail:
        """The trail within ``max_tokens`` beside ``prose``: the lowest
        :attr:`~ArtifactEntry.rank` goes first, and within a rank the oldest entry."""
        folded = _folded(prose)
        order = sorted(self.entries, key=lambda e: (e.rank, e.last_seq, e.first_seq))

        def kept(drop: int) -> list[ArtifactEntry]:
            dropped = {id(e) for e in order[:drop]}
            return [e for e in self.entries if id(e) not in dropped]

        def tokens(drop: int) -> int:
            entries = kept(drop)
            return counter.count_text(self._render(entries, folded)) if entries else 0

        low, high = 0, len(order)  # the fewest evictions that fit
        while low < high:
            middle = (low + high) // 2
            if tokens(middle) <= max_tokens:
                high = middle
            else:
                low = middle + 1
        return replace(
            self, entries=tuple(kept(low)), evicted=self.evicted + low, tokens=tokens(low)
        )

    def find(self, queries: Sequence[str]) -> list[ArtifactEntry]:
        """The entries ``queries`` name (in a query, or holding a path-like word of one), the
        most recently touched first.

        Examples:
            >>> from ctx_langgraph.compaction.artifacts import Touch
            >>> trail = ArtifactTrail().merged([Touch("/srv/app/worker.yaml", "path", 4, "read", "read_file", None)])
            >>> [e.artifact for e in trail.find(["what does worker.yaml say?"])], trail.find(["worker"])
            (['/srv/app/worker.yaml'], [])
        """
        texts = [q.strip() for q in queries if q.strip()]
        words = {word.strip(".,;:!?'\"`()[]") for text in texts for word in text.split()}
        pathlike = {w for w in words if len(w) >= 4 and any(c in w for c in "/.")}
        return [
            entry
            for entry in reversed(self.entries)
            if entry.artifact in words
            or any(entry.artifact in text for text in texts)
            or any(word in entry.artifact for word in pathlike)
        ]

    def report(self) -> ArtifactsReport:
        """``context["artifacts"]``: count, tokens, evictions and the newest entries."""
        return {
            "count": len(self.entries),
            "tokens": self.tokens,
            "evicted": self.evicted,
            "newest": [
                {
                    "artifact": e.artifact,
                    "kind": e.kind,
                    "last_seq": e.last_seq,
                    "action": e.touches[-1][1],
                }
                for e in reversed(self.entries[-NEWEST_SHOWN:])
            ],
        }


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def with_trail(text: str, trail: ArtifactTrail) -> str:
    """A summary text with the trail as its last section."""
    section = trail.render(text)
    return f"{text.rstrip()}\n\n{section}" if section else text


def next_trail(
    active: CompactionCheckpoint | None,
    events: Iterable[HistoryEvent],
    max_tokens: int,
    counter: TokenCounter,
    prose: str = "",
) -> ArtifactTrail:
    """``active``'s trail merged with the touches of ``events``, capped (empty when 0)."""
    if max_tokens <= 0:
        return ArtifactTrail()
    return merged_trail(active, events).capped(max_tokens, counter, prose)


def merged_trail(
    active: CompactionCheckpoint | None, events: Iterable[HistoryEvent]
) -> ArtifactTrail:
    """``active``'s trail merged with the touches of ``events``, before any cap."""
    return ArtifactTrail.from_checkpoint(active).merged(span_touches(events))
