"""What every summarizer takes and gives: a :class:`SummaryRequest` in, the rendered summary out."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.compaction.format import (
    SummaryDocument,
)
from ctx_langgraph.history.types import HistoryEvent

__all__ = ["SUMMARY_TAG", "Summarizer", "SummaryRequest"]

SUMMARY_TAG: Final = "ctx:summary"
"""Tag of summarizer model calls; the usage ledger books them with purpose ``summary``."""


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize: the previous summary and the uncovered span after it.

    ``events`` are the visible events after the old cursor, in seq order; the new summary
    covers everything through ``covered_through_seq``. ``instructions`` steer what it keeps
    (never the format or the cap); ``view`` is what the agent's model would see now (sent by
    ``LLMSummarizer(in_conversation=True)`` as its prefix).
    """

    previous: SummaryDocument | None
    events: Sequence[HistoryEvent]
    covered_through_seq: int
    cap_tokens: int
    counter: TokenCounter
    instructions: str | None = None
    view: Sequence[BaseMessage] | None = None

    def __post_init__(self) -> None:
        seqs = [event.seq for event in self.events]
        if any(later <= earlier for earlier, later in itertools.pairwise(seqs)):
            raise ValueError(f"events must be in strictly increasing seq order, got {seqs[:20]}")
        if seqs and seqs[-1] > self.covered_through_seq:
            raise ValueError(
                f"event seq {seqs[-1]} is beyond covered_through_seq={self.covered_through_seq}"
            )
        if self.cap_tokens <= 0:
            raise ValueError(f"cap_tokens must be positive, got {self.cap_tokens}")
        if self.instructions is not None and not isinstance(self.instructions, str):
            raise TypeError(
                f"instructions must be text or None, got {type(self.instructions).__name__}"
            )
        object.__setattr__(self, "events", tuple(self.events))
        if self.view is not None:
            object.__setattr__(self, "view", tuple(self.view))


@runtime_checkable
class Summarizer(Protocol):
    """Turns a :class:`SummaryRequest` into the rendered text of the new summary."""

    @property
    def id(self) -> str:
        """Recorded on the checkpoint (``summarizer_id``): which summarizer wrote it."""
        ...

    @property
    def window_tokens(self) -> int | None:
        """How many input tokens one call can take; ``None`` means unlimited."""
        ...

    def summarize(self, request: SummaryRequest) -> str: ...

    async def asummarize(self, request: SummaryRequest) -> str: ...
