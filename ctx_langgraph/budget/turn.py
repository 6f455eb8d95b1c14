"""What one ``ctx_budget`` pass works with: the node's settings (shared by every thread) and the
turn (one pass of one thread)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ctx_langgraph.budget.counters import CountCache, TokenCounter
from ctx_langgraph.budget.estimate import BudgetEstimate
from ctx_langgraph.config import ContextConfig, ResolvedBudget
from ctx_langgraph.history.base import HistoryStore
from ctx_langgraph.history.types import AppendResult, BranchInfo, Scope
from ctx_langgraph.memory.store import LongTermMemory
from ctx_langgraph.memory.types import MemoryRecord
from ctx_langgraph.providers.count import ProviderCountHook
from ctx_langgraph.rules import PinnedRules
from ctx_langgraph.state import (
    BudgetDecision,
    CacheReport,
    CompactionReport,
    FlatContext,
    MemoryReport,
    RequestMakeup,
)
from ctx_langgraph.storage.statements import Op

__all__ = ["BudgetPass", "BudgetSettings", "LateBooker"]

LateBooker = Callable[[AIMessage, Scope], tuple[Op[Any], Any]]
"""The booking of an answer no ``ctx_usage`` booked, and the database it runs on
(:func:`ctx_langgraph.usage.node.answer_booker`)."""


@dataclass(frozen=True)
class BudgetSettings:
    """The node's configuration, resolved once: what every step reads, for every thread."""

    store: HistoryStore
    config: ContextConfig
    budget: ResolvedBudget
    counter: TokenCounter
    """The configured counter (an approximate one is copied per pass with its calibration)."""
    cache: CountCache
    tools: Sequence[Any]
    compact_node: str | None
    provider_count: ProviderCountHook | None
    exact_count_above: float
    pinned_rules: PinnedRules | None
    memory: LongTermMemory | None
    overhead_text: str
    """The tool schemas and the node's own system prompt, as the fingerprint hashes them."""
    overhead_tokens: int
    model_id: str
    provider: str
    system_prompt_tokens: int = 0
    """The part of ``overhead_tokens`` that is the node's own system prompt."""
    book_late: LateBooker | None = None
    lookup_tools: frozenset[str] = frozenset()
    """The names the history lookup tool goes by among ``tools``."""

    def summary_allowance(self) -> int:
        """The most a summary takes in a request: its cap and, beside it, its artifact trail."""
        cap = self.config.summary_cap(self.budget.target)
        if not self.config.trail_inside:
            cap += self.config.artifact_trail_cap(cap)
        return cap

    def memory_allowance(self) -> int:
        """The memory message's budget: its own cap, at most a quarter of the window."""
        assert self.memory is not None
        return min(self.memory.max_tokens, max(0, self.budget.usable // 4))


@dataclass
class BudgetPass:
    """The working data of one pass; each step reads it and fills in its part."""

    messages: Sequence[BaseMessage]
    state_messages: Sequence[BaseMessage]
    context: FlatContext
    """A copy of the state's ``context``: the facts a step changes here are reported."""
    given: Mapping[str, Any]
    run_config: RunnableConfig | None
    scope: Scope
    counter: TokenCounter
    epoch: int
    reasons: list[str] = field(default_factory=list)
    recorded_through: str | None = None
    fresh: list[BaseMessage] = field(default_factory=list)
    prefix: list[BaseMessage] = field(default_factory=list)
    """The recorded part of the state (messages before the first new one)."""
    checksum: int = 0
    by_id: dict[str, AppendResult] = field(default_factory=dict)
    head: BranchInfo | None = None
    rewritten: bool = False
    """The view changed beyond replacements: the update replaces all messages."""
    replacements: dict[str, BaseMessage] = field(default_factory=dict)
    """Capped or cleared tool results (and calls whose arguments were cleared), by id."""
    records: list[MemoryRecord] | None = None
    memory_info: MemoryReport = field(default_factory=lambda: MemoryReport())
    view: Sequence[BaseMessage] = ()
    fingerprint: str = ""
    estimate: BudgetEstimate | None = None
    decision: BudgetDecision = "proceed"
    fallback: bool = False
    """The configured summarizer is backing off: the offline one covers the span."""
    compaction: CompactionReport | None = None
    """The last compaction's report with why no more rounds run (``stopped``)."""
    cache: CacheReport | None = None
    makeup: RequestMakeup | None = None

    def note(self, reason: str) -> None:
        """The view changed for ``reason``: the update replaces it, the epoch moves."""
        self.rewritten = True
        self.reasons.append(reason)
