"""What the replay's model inputs held, call by call: coverage faults, orphaned tool messages,
the summaries (each new one checked for drift), and the history lookup's results."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, ToolMessage

from ctx_langgraph.budget.counters import TokenCounter
from ctx_langgraph.eval.drift import GenerationCheck, PlantedFact, check_generation
from ctx_langgraph.eval.metrics import coverage, orphan_tool_messages
from ctx_langgraph.eval.pricing import CallTokens
from ctx_langgraph.eval.replay import LOOKUP_TOOL, ModelCall
from ctx_langgraph.eval.strategies import (
    Strategy,
    claimed_by_prefix,
    strategy_spec,
    summary_messages,
)
from ctx_langgraph.view.markers import SUMMARY_FLAG

__all__ = [
    "CallChecks",
    "call_tokens",
    "check_calls",
    "claimed",
    "is_lookup_result",
    "retrieval_tokens",
    "summary_key",
]


@dataclass
class CallChecks:
    """What the replay's model inputs held: coverage faults, orphans, summaries."""

    gaps: int = 0
    overlaps: int = 0
    orphans: int = 0
    most_summaries: int = 0
    compaction_calls: list[int] = field(default_factory=list)
    """Indexes of the calls right after a compaction (the first with a new summary)."""
    generations: list[GenerationCheck] = field(default_factory=list)
    """Each new summary checked against the facts it covers (one per compaction call)."""


def summary_key(message: BaseMessage) -> str:
    """What tells one summary from the next: our checkpoint id, else a digest of the text."""
    flag = message.additional_kwargs.get(SUMMARY_FLAG)
    if isinstance(flag, dict) and flag.get("checkpoint_id"):
        return str(flag["checkpoint_id"])
    return hashlib.sha1(message.text.encode()).hexdigest()


def claimed(
    strategy: Strategy, call: ModelCall, history: Sequence[str], ids_by_seq: list[str]
) -> frozenset[str]:
    """The ids of the messages the summary in ``call`` covers: ours through its
    ``covered_through_seq``, langmem's as it records them, LangChain's by the prefix it
    replaced (:func:`~ctx_langgraph.eval.strategies.claimed_by_prefix`)."""
    summaries = summary_messages(call.messages)
    if not summaries:
        return frozenset()
    if strategy_spec(strategy.name).family == "ours":
        flag = summaries[0].additional_kwargs.get(SUMMARY_FLAG) or {}
        through = int(flag.get("covered_through_seq", 0))
        return frozenset(ids_by_seq[:through])
    if call.claimed is not None:  # langmem records the ids it summarized
        return call.claimed
    return claimed_by_prefix(call.messages, history)


def check_calls(
    strategy: Strategy,
    replay_calls: Sequence[ModelCall],
    history: list[str],
    history_at_call: Sequence[int],
    facts: Sequence[PlantedFact] = (),
) -> CallChecks:
    """Every replay call checked: coverage against the history said before it, orphans,
    summaries; each summary seen for the first time checked for drift against ``facts``."""
    ids_by_seq: list[str] = []
    if strategy.store is not None:
        ids_by_seq = [e.event_id for e in strategy.store.read_events("eval")]
    checks = CallChecks()
    last_key: str | None = None
    for index, call in enumerate(replay_calls):
        seen = history[: history_at_call[index]]
        summaries = summary_messages(call.messages)
        present = {str(m.id) for m in call.messages if m.id and m not in summaries}
        covered = claimed(strategy, call, seen, ids_by_seq)
        gap, overlap = coverage(present, covered, seen, len(summaries))
        checks.gaps += gap
        checks.overlaps += overlap
        checks.orphans += orphan_tool_messages(call.messages)
        checks.most_summaries = max(checks.most_summaries, len(summaries))
        key = summary_key(summaries[0]) if summaries else None
        if key is not None and key != last_key:
            checks.compaction_calls.append(index)
            text = "\n".join(summary.text for summary in summaries)
            generation = len(checks.generations) + 1
            checks.generations.append(
                check_generation(generation, index, call.turn, text, covered, facts)
            )
        last_key = key
    return checks


def is_lookup_result(message: BaseMessage) -> bool:
    """A history lookup page: the tool's name, or the artifact the lookup tool sets."""
    if not isinstance(message, ToolMessage):
        return False
    artifact = message.artifact
    return message.name == LOOKUP_TOOL or (isinstance(artifact, dict) and "ctx_lookup" in artifact)


def retrieval_tokens(messages: Sequence[BaseMessage], counter: TokenCounter) -> int:
    """Tokens of the history lookup's results in one model input."""
    return sum(counter.count_message(m) for m in messages if is_lookup_result(m))


def call_tokens(calls: Sequence[ModelCall], counter: TokenCounter) -> list[CallTokens]:
    """Each call's input, cacheable prefix, output and lookup-result tokens (for pricing)."""
    return [
        CallTokens(
            call.input_tokens,
            call.cacheable_prefix,
            call.output_tokens,
            min(call.input_tokens, retrieval_tokens(call.messages, counter)),
        )
        for call in calls
    ]
