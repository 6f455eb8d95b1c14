"""Summarizers: the previous summary plus the uncovered span in, a new structured summary out.

:class:`ExtractiveSummarizer` is offline and deterministic (no model): it keeps key facts exact by
copying them out of the events with patterns. :class:`LLMSummarizer` asks any LangChain chat
model for the same format. Neither validates its output; the caller checks it with
:func:`~ctx_langgraph.compaction.validate_summary` and retries.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs

from ctx_langgraph.compaction.extractive import ExtractiveSummarizer, extract_key_facts
from ctx_langgraph.compaction.protocol import SUMMARY_TAG, Summarizer, SummaryRequest
from ctx_langgraph.core.streaming import TAG_NOSTREAM
from ctx_langgraph.history.types import HistoryEvent

__all__ = [
    "SUMMARY_TAG",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummaryRequest",
    "extract_key_facts",
]

log = logging.getLogger(__name__)

DEFAULT_INSTRUCTIONS: Final = """\
You maintain the running summary of a long conversation between a user, an AI assistant and \
its tools. Merge the previous summary with the new events into ONE updated summary. Never drop \
the previous summary: keep its goal, constraints, open items and every key fact unless a new \
event settles or corrects them.

Write exactly this markdown, every heading present, in this order, nothing before or after it \
and no code fences:

# Context summary (format v1)

## Goal
- what the user wants overall

## Constraints and preferences
- a constraint or preference of the user [seq 12]
- a corrected value (supersedes: the earlier value it replaces) [seq 55]

## Done
- an action taken and its result [seq 14, 15]

## Failed attempts
- what was tried, and why it failed [seq 20]

## Decisions
- a decision, and why [seq 22]

## Open questions
- a question still unanswered [seq 30]

## Next steps
- what remains to do [seq 31]

## Key facts
- id: INV-2023-0042 [seq 12]
- amount: $1,250.00 [seq 14]

Rules:
- A section with nothing to say is a single line "- (none)".
- When the user corrects an earlier constraint or value, keep only the new one and mark it \
"(supersedes: <old value>)".
- Key facts are identifiers, amounts, dates, paths, URLs, emails and names, copied character \
for character, one per line as "- kind: value [seq N]", where N is copied from the "[seq N]" \
header of the event that states it. Every key fact needs its [seq N]. Keep every key fact of \
the previous summary with its original seq.
- End other items with the seqs they come from, like "[seq 12, 40]".
- Be brief: the whole summary must stay under the token limit given below."""


_FENCED = re.compile(r"^\s*```[\w-]*[ \t]*\n(.*?)\n?```\s*$", re.S)


def _model_name(model: BaseChatModel) -> str:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return model._llm_type


def _event_line(event: HistoryEvent) -> str:
    who = event.role + (f" ({event.name})" if event.name else "")
    if event.role == "tool" and event.content.get("data", {}).get("status") == "error":
        who += " [status: error]"
    text = event.text.strip().replace("\n", "\n  ")  # continuation lines never look like headers
    return f"[seq {event.seq}] {who}: {text}"


class LLMSummarizer:
    """Summaries written by a LangChain chat model, in the structured format.

    The output cap is bound to the call (``max_tokens``: ChatAnthropic sends it as
    ``max_tokens``, ChatOpenAI as ``max_completion_tokens`` or ``max_output_tokens``), and the
    call is tagged ``ctx:summary`` so the usage ledger books it as a summary (and ``nostream``, so
    LangGraph does not stream it as if it were the agent's reply). The text is
    returned as written (code fences removed); validate it with
    :func:`~ctx_langgraph.compaction.validate_summary`.

    Args:
        model: any chat model.
        max_output_tokens: the model's own output limit; the bound cap is the smaller of it and
            the request's ``cap_tokens``.
        window_tokens: how many input tokens one call may take (``None``: unlimited); the caller
            splits larger spans into ordered batches.
        instructions: a system prompt to use instead of :data:`DEFAULT_INSTRUCTIONS`.

    Example:
        >>> from ctx_langgraph.budget import ApproximateCounter
        >>> from ctx_langgraph.compaction import SummaryDocument
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> summary = SummaryDocument(goal="Ship v2").render()
        >>> summarizer = LLMSummarizer(MeteringChatModel(replies=[f"```markdown\\n{summary}\\n```"]))
        >>> request = SummaryRequest(None, [], 0, cap_tokens=300, counter=ApproximateCounter())
        >>> summarizer.id, summarizer.summarize(request) == summary
        ('llm:gpt-4o', True)
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        max_output_tokens: int | None = None,
        window_tokens: int | None = None,
        instructions: str | None = None,
    ) -> None:
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.window_tokens = window_tokens
        self.instructions = instructions or DEFAULT_INSTRUCTIONS

    @property
    def id(self) -> str:
        return f"llm:{_model_name(self.model)}"

    def output_cap(self, request: SummaryRequest) -> int:
        """The ``max_tokens`` bound to the call."""
        if self.max_output_tokens is None:
            return request.cap_tokens
        return min(request.cap_tokens, self.max_output_tokens)

    def messages_for(self, request: SummaryRequest) -> list[BaseMessage]:
        """The prompt: fixed instructions, then the previous summary and the new events."""
        previous = (
            request.previous.render()
            if request.previous is not None
            else "(none: this is the first summary)"
        )
        events = "\n".join(_event_line(event) for event in request.events) or "(no new events)"
        return [
            SystemMessage(self.instructions),
            HumanMessage(
                f"Previous summary:\n<previous_summary>\n{previous}\n</previous_summary>\n\n"
                f"New events:\n<events>\n{events}\n</events>\n\n"
                f"Write the updated summary covering everything through seq "
                f"{request.covered_through_seq}, in at most {self.output_cap(request)} tokens."
            ),
        ]

    def _call_config(self, config: RunnableConfig | None) -> RunnableConfig:
        ours = RunnableConfig(tags=[SUMMARY_TAG, TAG_NOSTREAM], metadata={"ctx_purpose": "summary"})
        return merge_configs(ensure_config(config), ours)

    def summarize(self, request: SummaryRequest, *, config: RunnableConfig | None = None) -> str:
        messages, call_config = self.messages_for(request), self._call_config(config)
        try:
            reply = self.model.bind(max_tokens=self.output_cap(request)).invoke(
                messages, config=call_config
            )
        except TypeError as exc:
            if "max_tokens" not in str(exc):
                raise
            log.warning("%s does not take max_tokens; summarizing without an output cap", self.id)
            reply = self.model.invoke(messages, config=call_config)
        return _reply_text(reply)

    async def asummarize(
        self, request: SummaryRequest, *, config: RunnableConfig | None = None
    ) -> str:
        messages, call_config = self.messages_for(request), self._call_config(config)
        try:
            reply = await self.model.bind(max_tokens=self.output_cap(request)).ainvoke(
                messages, config=call_config
            )
        except TypeError as exc:
            if "max_tokens" not in str(exc):
                raise
            log.warning("%s does not take max_tokens; summarizing without an output cap", self.id)
            reply = await self.model.ainvoke(messages, config=call_config)
        return _reply_text(reply)


def _reply_text(reply: Any) -> str:
    text = reply.text if isinstance(reply, BaseMessage) else str(reply)
    fenced = _FENCED.match(text)
    return (fenced.group(1) if fenced else text).strip()
