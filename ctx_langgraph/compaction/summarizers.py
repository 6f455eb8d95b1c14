"""Summarizers: the previous summary plus the uncovered span in, a new structured summary out.

:class:`ExtractiveSummarizer` is offline (patterns, no model); :class:`LLMSummarizer` asks a chat
model for the same format; :func:`default_summarizer` picks one for the wiring.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import (
    FakeChatModel,
    FakeListChatModel,
    FakeMessagesListChatModel,
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.config import ensure_config, merge_configs

from ctx_langgraph.compaction.extractive import ExtractiveSummarizer, extract_key_facts
from ctx_langgraph.compaction.protocol import SUMMARY_TAG, Summarizer, SummaryRequest
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.core.dates import day_label
from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.stream_usage import asks_stream_usage
from ctx_langgraph.core.streaming import TAG_NOSTREAM
from ctx_langgraph.errors import SummaryModelError
from ctx_langgraph.history.types import HistoryEvent
from ctx_langgraph.view.markers import is_summary

__all__ = [
    "OFFLINE_MODEL_MARKER",
    "SUMMARY_TAG",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummaryRequest",
    "chat_model_of",
    "default_summarizer",
    "extract_key_facts",
    "is_offline_model",
    "resolve_summary_model",
]

log = logging.getLogger(__name__)

DEFAULT_INSTRUCTIONS: Final = """\
You maintain the running summary of a long conversation between a user, an AI assistant and \
its tools. Merge the previous summary with the new events into ONE updated summary. Never drop \
the previous summary: keep its goal, constraints, open items and every key fact unless a new \
event settles or corrects them.

Write exactly this markdown, every heading present, in this order, nothing before or after it \
and no code fences:

# Context summary (format v2)

## Goal
- what the user wants overall

## Constraints and preferences
- a constraint or preference of the user [seq 12, Mon 8 May 2023]
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

## Key statements
- Ann: "a short message worth keeping, quoted word for word" [seq 33, Tue 9 May 2023]

## Key facts
- id: INV-2023-0042 [seq 12, Mon 8 May 2023]
- amount: $1,250.00 [seq 14]

Rules:
- A section with nothing to say is a single line "- (none)".
- When the user corrects an earlier constraint or value, keep only the new one and mark it \
"(supersedes: <old value>)".
- Key facts are identifiers, amounts, dates, paths, URLs, emails and names, copied character \
for character, one per line as "- kind: value [seq N]", where N is copied from the "[seq N, day]" \
header of the event that states it. Every key fact needs its [seq N]. Keep every key fact of \
the previous summary with its original seq.
- Key statements quote short messages of the people word for word, with the speaker: what they \
stated, decided, planned or did (events of their lives, with when they happened).
- End other items with the seqs they come from, like "[seq 12, 40]". After the seq, add the \
day from the event's header ("[seq 12, Mon 8 May 2023]") when it differs from the item above.
- Write dates as days (the header's day), never as "yesterday" or "last week" alone.
- Be brief: the whole summary must stay under the token limit given below."""


_INDEX_WORDS: Final = 8
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
    text = event.text.strip().replace("\n", "\n  ")
    return f"[seq {event.seq}, {day_label(event.created_at)}] {who}: {text}"


class LLMSummarizer:
    """Summaries written by a LangChain chat model, in the structured format.

    The output cap is bound to the call as ``max_tokens``; the call is tagged ``ctx:summary``
    (booked as a summary) and ``nostream``. The text is returned as written, code fences
    removed; validate it with :func:`~ctx_langgraph.compaction.validate_summary`.

    Args:
        model: any chat model.
        max_output_tokens: the model's own output limit (the cap is the smaller of it and the
            request's ``cap_tokens``).
        window_tokens: input tokens one call may take (``None``: unlimited); larger spans are
            split into ordered batches.
        instructions: a system prompt to use instead of :data:`DEFAULT_INSTRUCTIONS`.
        in_conversation: send the request's ``view`` and then one message with the
            instructions and an index of the span's events, so the provider's prompt cache
            covers all but that message. Without a view the call is the standalone prompt.
        tools: with ``in_conversation``, the agent's tools, bound so the cached prefix matches.
        system_prompt: with ``in_conversation``, the system prompt the agent's model node puts
            before the view.

    Examples:
        >>> from ctx_langgraph.budget import ApproximateCounter
        >>> from ctx_langgraph.compaction import SummaryDocument
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> summary = SummaryDocument(goal="Ship v2").render()
        >>> summarizer = LLMSummarizer(MeteringChatModel(replies=[f"```markdown\\n{summary}\\n```"]))
        >>> request = SummaryRequest(None, [], 0, cap_tokens=300, counter=ApproximateCounter())
        >>> summarizer.id, summarizer.summarize(request) == summary
        ('llm:gpt-4o', True)

        In the conversation, the view first and the instructions last:

        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from ctx_langgraph.history import SQLiteHistoryStore
        >>> store = SQLiteHistoryStore.from_path(":memory:"); _ = store.setup()
        >>> view = [HumanMessage("Ship v2 by Friday", id="h1"), AIMessage("On it.", id="a1"),
        ...         HumanMessage("And the docs?", id="h2")]
        >>> _ = store.append("t", view)
        >>> request = SummaryRequest(None, store.read_events("t")[:2], 2, cap_tokens=300,
        ...                          counter=ApproximateCounter(), view=view)
        >>> messages = LLMSummarizer(MeteringChatModel(replies=[summary]),
        ...                          in_conversation=True).messages_for(request)
        >>> messages[:3] == view, type(messages[-1]).__name__
        (True, 'HumanMessage')
        >>> print(messages[-1].text.split("</events>")[0].split("<events>")[1].strip())
        [seq 1] human: Ship v2 by Friday
        [seq 2] ai: On it.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        max_output_tokens: int | None = None,
        window_tokens: int | None = None,
        instructions: str | None = None,
        in_conversation: bool = False,
        tools: Sequence[Any] = (),
        system_prompt: str | None = None,
    ) -> None:
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.window_tokens = window_tokens
        self.instructions = instructions or DEFAULT_INSTRUCTIONS
        self.in_conversation = in_conversation
        self.tools = list(tools)
        self.system_prompt = system_prompt

    @property
    def id(self) -> str:
        return f"llm:{_model_name(self.model)}"

    def output_cap(self, request: SummaryRequest) -> int:
        if self.max_output_tokens is None:
            return request.cap_tokens
        return min(request.cap_tokens, self.max_output_tokens)

    def messages_for(self, request: SummaryRequest) -> list[BaseMessage]:
        """The prompt: instructions, previous summary and new events (in the conversation: the
        view, then one message with the instructions and an index of the span's events)."""
        previous = (
            request.previous.render()
            if request.previous is not None
            else "(none: this is the first summary)"
        )
        focus = ""
        if request.instructions and request.instructions.strip():
            focus = (
                "What to keep above all in this summary (the user's request; it does not change "
                f"the format, the rules or the limit):\n<focus>\n{request.instructions.strip()}"
                "\n</focus>\n\n"
            )
        previous = f"Previous summary:\n<previous_summary>\n{previous}\n</previous_summary>"
        ask = (
            f"{focus}Write the updated summary covering everything through seq "
            f"{request.covered_through_seq}, in at most {self.output_cap(request)} tokens."
        )
        if self.in_conversation and request.view:
            return self._in_conversation(request, request.view, previous, ask)
        events = "\n".join(_event_line(event) for event in request.events) or "(no new events)"
        return [
            SystemMessage(self.instructions),
            HumanMessage(f"{previous}\n\nNew events:\n<events>\n{events}\n</events>\n\n{ask}"),
        ]

    def _in_conversation(
        self, request: SummaryRequest, view: Sequence[BaseMessage], previous: str, ask: str
    ) -> list[BaseMessage]:
        prefix: list[BaseMessage] = []
        if self.system_prompt and not (view and view[0].type == "system"):
            prefix.append(SystemMessage(self.system_prompt))
        in_view = any(is_summary(m) for m in view)
        carried = (
            "The previous summary is the summary message in the conversation above."
            if in_view or request.previous is None
            else previous
        )
        index = "\n".join(_index_line(event) for event in request.events) or "(no new events)"
        return [
            *prefix,
            *view,
            HumanMessage(
                "Stop the conversation here: do not answer it and do not call any tool. Your "
                "task now is to write the conversation's running summary.\n\n"
                f"{self.instructions}\n\n{carried}\n\n"
                "The new events to merge into it are these messages of the conversation above, "
                "by seq (the first words of each; read them in full above); messages after the "
                f"last of them stay in the conversation verbatim, leave them out:\n<events>\n"
                f"{index}\n</events>\n\n{ask}"
            ),
        ]

    def _flow(self, request: SummaryRequest, config: RunnableConfig | None) -> Flow[str]:
        """The model call with the output cap (and, in the conversation, the agent's tools)."""
        messages = self.messages_for(request)
        ours = RunnableConfig(tags=[SUMMARY_TAG, TAG_NOSTREAM], metadata={"ctx_purpose": "summary"})
        call_config = merge_configs(ensure_config(config), ours)
        try:
            model: Any = asks_stream_usage(self.model)
            if self.in_conversation and request.view and self.tools:
                model = model.bind_tools(self.tools)
            bound = model.bind(max_tokens=self.output_cap(request))
            reply = yield from call(bound.invoke, bound.ainvoke, messages, config=call_config)
        except TypeError as exc:
            if "max_tokens" not in str(exc):
                raise
            log.warning("%s does not take max_tokens; summarizing without an output cap", self.id)
            reply = yield from call(
                self.model.invoke, self.model.ainvoke, messages, config=call_config
            )
        return _reply_text(reply)

    def summarize(self, request: SummaryRequest, *, config: RunnableConfig | None = None) -> str:
        return run(self._flow(request, config))

    async def asummarize(
        self, request: SummaryRequest, *, config: RunnableConfig | None = None
    ) -> str:
        return await arun(self._flow(request, config))


def _index_line(event: HistoryEvent) -> str:
    words = event.text.split()
    head = " ".join(words[:_INDEX_WORDS]) + (" ..." if len(words) > _INDEX_WORDS else "")
    return f"[seq {event.seq}] {event.role}: {head}"


def _reply_text(reply: Any) -> str:
    text = reply.text if isinstance(reply, BaseMessage) else str(reply)
    fenced = _FENCED.match(text)
    return (fenced.group(1) if fenced else text).strip()


OFFLINE_MODEL_MARKER: Final = "ctx_offline_model"
"""A class attribute that, ``True`` on a chat model class, marks it as an offline fake (the
wiring keeps the extractive summarizer for it)."""

_FAKE_CHAT_MODELS: Final = (
    FakeChatModel,
    FakeListChatModel,
    FakeMessagesListChatModel,
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
_API_KEYS: Final = {
    "anthropic": "ANTHROPIC_API_KEY",
    "cohere": "COHERE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "openai": "OPENAI_API_KEY",
    "together": "TOGETHER_API_KEY",
    "xai": "XAI_API_KEY",
}
"""The environment variable each provider's client reads its key from."""

_INFERRED: Final = (
    (("gpt-", "o1", "o3", "o4", "chatgpt"), "openai"),
    (("claude",), "anthropic"),
    (("mistral",), "mistralai"),
    (("command",), "cohere"),
    (("grok",), "xai"),
    (("deepseek",), "deepseek"),
)


def chat_model_of(model: Any) -> BaseChatModel | None:
    """The chat model under ``model``: itself, or the one a binding wraps (``None``: none).

    Examples:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> fake = FakeListChatModel(responses=["hi"])
        >>> chat_model_of(fake.bind(stop=["."])) is fake, chat_model_of("not a model")
        (True, None)
    """
    for _depth in range(16):
        if not isinstance(model, RunnableBindingBase):
            break
        model = model.bound
    return model if isinstance(model, BaseChatModel) else None


def is_offline_model(model: Any) -> bool:
    """Whether ``model`` (or the chat model a binding wraps) is an offline fake: its class sets
    :data:`OFFLINE_MODEL_MARKER`, or it is one of langchain_core's fake chat models.

    Examples:
        >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> is_offline_model(MeteringChatModel(replies=["ok"])), is_offline_model(
        ...     GenericFakeChatModel(messages=iter(["ok"])))
        (True, True)
    """
    chat = chat_model_of(model)
    if chat is None:
        return False
    return (
        isinstance(chat, _FAKE_CHAT_MODELS)
        or getattr(type(chat), OFFLINE_MODEL_MARKER, None) is True
    )


def _provider_of(spec: str) -> str | None:
    provider, colon, name = spec.partition(":")
    if colon:
        return provider.strip().lower()
    lowered = name.strip().lower() or provider.strip().lower()
    return next((p for prefixes, p in _INFERRED if lowered.startswith(prefixes)), None)


def resolve_summary_model(
    spec: BaseChatModel | str, *, argument: str = "summary_model"
) -> BaseChatModel:
    """The chat model of a ``summary_model=`` argument: an instance as it is, a spec string
    (``"openai:gpt-4o-mini"``) made by ``init_chat_model``. ``argument`` names it in errors.

    Raises:
        SummaryModelError: the provider's API key is not set, its package is not installed,
            or the spec names no known provider.
        TypeError: ``spec`` is neither a chat model nor a string.

    Examples:
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> model = MeteringChatModel(replies=["ok"])
        >>> resolve_summary_model(model) is model
        True
        >>> resolve_summary_model("nosuch:model-x")
        Traceback (most recent call last):
        ...
        ctx_langgraph.errors.SummaryModelError: summary_model='nosuch:model-x' cannot be used: ValueError: Unable to infer model provider ...
    """
    if isinstance(spec, BaseChatModel):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f"{argument} must be a chat model or an init_chat_model spec such as "
            f"'openai:gpt-4o-mini', got {type(spec).__name__}"
        )
    key = _API_KEYS.get(_provider_of(spec) or "")
    if key is not None and not os.environ.get(key):
        raise SummaryModelError(
            spec, f"{key} is not set in the environment", key=key, argument=argument
        )
    try:
        from langchain.chat_models import init_chat_model

        return init_chat_model(spec)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"[:400]
        raise SummaryModelError(spec, reason, argument=argument) from exc


def _summary_window(
    chat: BaseChatModel, own: bool, config: ContextConfig, model: Any
) -> int | None:
    """Input tokens one summary call may take: the agent's usable window for its own model,
    else the summary model's profile window."""
    profile = getattr(chat, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if not own and isinstance(window, int) and window > 0:
        return window
    try:
        return config.resolve(model).usable
    except ValueError:
        return window if isinstance(window, int) and window > 0 else None


def default_summarizer(
    model: Any = None,
    *,
    summary_model: BaseChatModel | str | None = None,
    config: ContextConfig | None = None,
) -> Summarizer:
    """The summarizer the wiring uses when no ``summarizer=`` is given: an
    :class:`LLMSummarizer` on ``summary_model`` if given, else on ``model`` when it is a real
    chat model (or a spec string), else the :class:`ExtractiveSummarizer`. One call takes at
    most the agent's usable window, or a separate summary model's own window.


    Raises:
        SummaryModelError: a spec string cannot be made into a chat model (a missing API key).

    Examples:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> from ctx_langgraph.testing import MeteringChatModel
        >>> fake = FakeListChatModel(responses=["ok"])
        >>> type(default_summarizer()).__name__, type(default_summarizer(fake)).__name__
        ('ExtractiveSummarizer', 'ExtractiveSummarizer')
        >>> default_summarizer(fake, summary_model=MeteringChatModel(replies=["ok"])).id
        'llm:gpt-4o'
    """
    config = config or ContextConfig()
    if summary_model is not None:
        chat = resolve_summary_model(summary_model)
        return LLMSummarizer(chat, window_tokens=_summary_window(chat, False, config, model))
    if isinstance(model, str):
        chat = resolve_summary_model(model, argument="model")
    else:
        found = chat_model_of(model)
        if found is None or is_offline_model(found):
            return ExtractiveSummarizer()
        chat = found
    return LLMSummarizer(chat, window_tokens=_summary_window(chat, True, config, model))
