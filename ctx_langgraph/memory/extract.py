"""Memory extractors: what in a conversation is worth remembering across threads, as
:class:`~ctx_langgraph.memory.MemoryCandidate` objects; a failure raises
:class:`~ctx_langgraph.errors.MemoryExtractionError` and never affects the conversation.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from ctx_langgraph.core.effects import Flow, arun, call, run
from ctx_langgraph.core.stream_usage import asks_stream_usage
from ctx_langgraph.core.streaming import TAG_NOSTREAM
from ctx_langgraph.errors import MemoryExtractionError
from ctx_langgraph.memory.types import MemoryCandidate, MemoryRecord

__all__ = [
    "ChatModelExtractor",
    "LangmemExtractor",
    "MemoryExtractor",
    "RuleExtractor",
]

MEMORY_TAG: Final = "ctx:memory"


@runtime_checkable
class MemoryExtractor(Protocol):
    """Turns new messages (and the memories that exist) into memory candidates."""

    def extract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]: ...

    async def aextract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]: ...


_END = r"(?=\s*(?:[.!?](?:\s|$)|[;\n]|,(?!\s*not\b)|\s+and\s+|\s+but\s+|$))"
_VALUE = r"(?P<value>(?:[^,.;!?\n]|[.!?](?=\S)){1,80}?)"
_OLD = r"(?:\s*,?\s*(?:and\s+)?not\s+(?P<old>(?:[^,.;!?\n]|[.!?](?=\S)){1,80}?))?"
_MY_FACT = re.compile(
    rf"\b(?:actually,?\s+|correction:?\s+)?my\s+(?P<key>[a-z][a-z0-9 '-]{{0,40}}?)\s+"
    rf"(?:is|are)\s+(?:now\s+|actually\s+)?{_VALUE}{_OLD}{_END}",
    re.I,
)
_I_FACT = re.compile(
    rf"\bI\s+(?P<verb>live|work|am based|study)\s+(?P<prep>in|at|for)\s+{_VALUE}{_OLD}{_END}",
    re.I,
)
_PREFERENCE = re.compile(
    rf"\bI\s+(?:(?:really|strongly)\s+)?(?P<verb>prefer|like|love|hate|dislike|always want|never want)"
    rf"\s+{_VALUE}{_END}",
    re.I,
)
_CALL_ME = re.compile(rf"\b(?:please\s+)?call me\s+{_VALUE}{_END}", re.I)
_REMEMBER = re.compile(r"\b(?:please\s+)?remember(?:\s+that)?\s+(?P<value>[^.!?\n]{3,200})", re.I)
_NOT_KEY_WORDS = "bad fault pleasure guess question point problem bet hope plan idea name's turn"
_NOT_KEYS: Final = frozenset(_NOT_KEY_WORDS.split(" "))
_FILLER = re.compile(r"^(?:a|an|the)\s+", re.I)


def _clean(value: str) -> str:
    return " ".join(value.strip().strip("\"'`").split())


def _key(raw: str) -> str | None:
    key = " ".join(raw.lower().split())
    if not key or key in _NOT_KEYS or len(key.split()) > 4:
        return None
    return key


class RuleExtractor:
    """The offline, deterministic extractor: first-person facts, preferences and corrections in
    the user's messages (only human messages are read; a model's words are not memories).

    Examples:
        >>> from langchain_core.messages import HumanMessage
        >>> extractor = RuleExtractor()
        >>> [(c.key, c.content) for c in extractor.extract(
        ...     [HumanMessage("Hi! My order id is A-1172 and I live in Lisbon.", id="m1")], [])]
        [('order id', "The user's order id is A-1172."), ('lives in', 'The user lives in Lisbon.')]
        >>> fix = extractor.extract([HumanMessage("Sorry, my order id is B-2291, not A-1172.", id="m9")], [])
        >>> fix[0].content, fix[0].replaces_value, fix[0].source_event_ids
        ("The user's order id is B-2291.", 'A-1172', ('m9',))
    """

    reads_existing = False  # the memory need not load the existing records for it

    def __init__(self, *, confidence: float = 0.9) -> None:
        self.confidence = confidence

    def extract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord] = ()
    ) -> list[MemoryCandidate]:
        """Candidates from the human messages among ``messages``, in reading order."""
        found: list[MemoryCandidate] = []
        for message in messages:
            if message.type != "human":
                continue
            found += self._from_text(message.text, (str(message.id),) if message.id else ())
        return found

    async def aextract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord] = ()
    ) -> list[MemoryCandidate]:
        """Async twin of :meth:`extract` (no I/O)."""
        return self.extract(messages, existing)

    def _from_text(self, text: str, sources: tuple[str, ...]) -> list[MemoryCandidate]:
        hits: list[tuple[int, MemoryCandidate]] = []

        def add(
            match: re.Match[str], content: str, kind: str = "profile", key: str | None = None
        ) -> None:
            candidate = MemoryCandidate(
                content, key=key, kind=kind, confidence=self.confidence, source_event_ids=sources
            )
            if old := match.groupdict().get("old"):
                candidate = replace(candidate, replaces_value=_clean(old))
            hits.append((match.start(), candidate))

        for match in _MY_FACT.finditer(text):
            key, value = _key(match["key"]), _clean(match["value"])
            if key and value and value.lower() not in ("it", "this", "that"):
                add(match, f"The user's {key} is {value}.", key=key)
        for match in _I_FACT.finditer(text):
            verb, prep = match["verb"].lower(), match["prep"]
            key = {"am based": "based in", "live": "lives in"}.get(verb) or f"{verb}s {prep}"
            phrase = {"am based": "is based"}.get(verb, f"{verb}s")
            add(match, f"The user {phrase} {prep.lower()} {_clean(match['value'])}.", key=key)
        for match in _PREFERENCE.finditer(text):
            value = _clean(_FILLER.sub("", match["value"]))
            add(match, f"The user {match['verb'].lower()}s {value}.", "preference")
        for match in _CALL_ME.finditer(text):
            add(match, f"The user wants to be called {_clean(match['value'])}.", key="name")
        for match in _REMEMBER.finditer(text):
            add(match, f"{_clean(match['value']).rstrip('.')}.", "note")
        return [candidate for _, candidate in sorted(hits, key=lambda hit: hit[0])]


EXTRACTION_PROMPT: Final = """You maintain a long-term memory about the user.
Read the new messages and return what is worth remembering across conversations: stable facts
about the user (identifiers, names, places, accounts), preferences, and corrections.

Answer with a JSON list only, no prose. Each item:
{"key": short slot name or null, "content": one standalone sentence,
 "confidence": 0..1, "supersedes": id of an existing memory it corrects or null}
Use the same key as an existing memory when the new fact replaces it. Return [] when nothing
is worth remembering. Never store secrets (passwords, API keys, card numbers)."""


def _fenced(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


def parse_candidates(
    text: str, sources: tuple[str, ...], known_ids: set[str]
) -> list[MemoryCandidate]:
    """The candidates in a model's JSON answer; :class:`MemoryExtractionError` unless it is a
    list of objects with a string ``content``."""
    body = _fenced(text)
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        raise MemoryExtractionError(f"the answer is not JSON: {body[:80]!r}") from None
    if isinstance(data, dict) and isinstance(data.get("memories"), list):
        data = data["memories"]
    if not isinstance(data, list):
        raise MemoryExtractionError(f"the answer is not a JSON list: {body[:80]!r}")
    candidates = []
    for number, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            raise MemoryExtractionError(f"item {number} has no string 'content': {item!r:.80}")
        key = item.get("key")
        supersedes = item.get("supersedes")
        try:
            confidence = float(item.get("confidence", 0.7))
            candidates.append(
                MemoryCandidate(
                    item["content"].strip(),
                    key=" ".join(key.lower().split())
                    if isinstance(key, str) and key.strip()
                    else None,
                    kind=str(item.get("kind") or "fact"),
                    confidence=min(1.0, max(0.0, confidence)),
                    source_event_ids=sources,
                    supersedes=supersedes if supersedes in known_ids else None,
                )
            )
        except (TypeError, ValueError) as exc:
            raise MemoryExtractionError(f"item {number} is not a valid memory: {exc}") from None
    return candidates


def _config() -> RunnableConfig:
    return RunnableConfig(tags=[MEMORY_TAG, TAG_NOSTREAM], metadata={"ctx_purpose": "memory"})


def _sources(messages: Sequence[BaseMessage]) -> tuple[str, ...]:
    return tuple(str(m.id) for m in messages if m.id and m.type == "human")


def _transcript(messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]) -> str:
    lines = ["Existing memories:"]
    lines += [f"- id={r.id} key={r.key or '-'}: {r.content}" for r in existing] or ["- (none)"]
    lines.append("\nNew messages:")
    lines += [f"{m.type}: {m.text}" for m in messages if m.text.strip()]
    return "\n".join(lines)


class ChatModelExtractor:
    """Memory extraction by any chat model (one call per batch of new messages). Its usage is
    booked with purpose ``memory`` (metadata ``ctx_purpose``).

    Examples:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> answer = '[{"key": "order id", "content": "The order id is B-2291.", "confidence": 0.9}]'
        >>> extractor = ChatModelExtractor(GenericFakeChatModel(messages=iter([AIMessage(answer)])))
        >>> [c.key for c in extractor.extract([HumanMessage("my order id is B-2291", id="m1")], [])]
        ['order id']
    """

    def __init__(self, model: Any, *, prompt: str = EXTRACTION_PROMPT) -> None:
        self.model = model
        self.prompt = prompt

    def _extract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> Flow[list[MemoryCandidate]]:
        request = [SystemMessage(self.prompt), HumanMessage(_transcript(messages, existing))]
        try:
            model = asks_stream_usage(self.model)
            reply = yield from call(model.invoke, model.ainvoke, request, config=_config())
        except Exception as exc:
            raise MemoryExtractionError(f"the model call failed: {exc!r:.200}") from exc
        return parse_candidates(reply.text, _sources(messages), {r.id for r in existing})

    def extract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]:
        """Ask the model; raise :class:`MemoryExtractionError` when it fails or answers garbage."""
        return run(self._extract(messages, existing))

    async def aextract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]:
        """Async twin of :meth:`extract`."""
        return await arun(self._extract(messages, existing))


class LangmemExtractor:
    """langmem's memory manager as an extractor: the existing memories go in as langmem's
    ``existing``; an update of one of them comes back as a candidate that supersedes it.

    Args:
        manager: a runnable from ``langmem.create_memory_manager(model, ...)``, or a chat model
            (or ``"provider:model"`` string) to build one with the default schema.
    """

    def __init__(self, manager: Any) -> None:
        if not hasattr(manager, "invoke") or not hasattr(manager, "ainvoke") or _is_model(manager):
            manager = _langmem().create_memory_manager(manager)
        self.manager = manager

    def _input(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> dict[str, Any]:
        memory = _langmem().Memory
        return {
            "messages": list(messages),
            "existing": [(r.id, memory(content=r.content)) for r in existing],
        }

    def _candidates(
        self, results: Any, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]:
        known = {r.id: r for r in existing}
        sources = _sources(messages)
        candidates = []
        for result in results or ():
            memory_id, content = getattr(result, "id", None), getattr(result, "content", None)
            text = getattr(content, "content", content)
            if not isinstance(text, str):
                raise MemoryExtractionError(
                    f"langmem returned a memory without text: {result!r:.80}"
                )
            old = known.get(str(memory_id))
            if old is not None and old.content == text.strip():
                continue
            candidates.append(
                MemoryCandidate(
                    text.strip(),
                    key=old.key if old is not None else None,
                    kind="fact",
                    confidence=0.7,
                    source_event_ids=sources,
                    supersedes=old.id if old is not None else None,
                )
            )
        return candidates

    def _extract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> Flow[list[MemoryCandidate]]:
        manager = self.manager
        try:
            given = self._input(messages, existing)
            results = yield from call(manager.invoke, manager.ainvoke, given, config=_config())
        except Exception as exc:
            raise MemoryExtractionError(f"langmem's memory manager failed: {exc!r:.200}") from exc
        return self._candidates(results, messages, existing)

    def extract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]:
        """Run the memory manager; its failures raise :class:`MemoryExtractionError`."""
        return run(self._extract(messages, existing))

    async def aextract(
        self, messages: Sequence[BaseMessage], existing: Sequence[MemoryRecord]
    ) -> list[MemoryCandidate]:
        """Async twin of :meth:`extract`."""
        return await arun(self._extract(messages, existing))


def _langmem() -> Any:
    """langmem's extraction module (optional; imported late, its deprecation warnings muted)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langmem.knowledge import extraction  # type: ignore[import-untyped]
    return extraction


def _is_model(value: Any) -> bool:
    from langchain_core.language_models import BaseChatModel

    return isinstance(value, str | BaseChatModel)
