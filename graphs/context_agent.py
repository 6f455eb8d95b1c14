"""LangGraph Studio graph: a tool-using support agent with context management.

The agent answers order questions with two demo tools, ``get_order_status`` and ``search_docs``,
plus ``history_lookup`` (exact old messages from the history store). Around its ``model`` node
sit our nodes: ``ctx_budget`` (records every message, caps big tool results, estimates the next
request), ``ctx_compact`` (summarizes the old part of the thread when the estimate is over the
trigger) and ``ctx_usage`` (books what the provider reported). In Studio, open the state's
``context`` channel: ``context.budget`` is the estimate of the next request (``input_tokens``,
``method``, ``decision``), ``context.baseline`` the last measured request and, after a compaction,
``context.compaction`` and ``context.active_generation`` say what was summarized.

Try "Where is ORD-1042?", then "Where is ORD-1047?" (its tracking log is too big for the context:
the state holds a capped preview, the history store the whole text), then "Recall ORD-1047".

The model is picked when the module is imported:

- ``OPENAI_API_KEY`` set: ``ChatOpenAI`` (``CTX_OPENAI_MODEL``, default ``gpt-4o-mini``);
- else ``ANTHROPIC_API_KEY`` set: ``ChatAnthropic`` (``CTX_ANTHROPIC_MODEL``, default
  ``claude-3-5-haiku-latest``);
- else an offline scripted model (``MeteringChatModel`` driven by ``tool_agent_reply``) that
  reports exact token usage, so the budget numbers are real without a network.

A real model also writes the compaction summaries; the offline one uses the extractive summarizer.
With OpenAI the model talks to the Responses API and compacts through OpenAI's compact endpoint
too (``OpenAIResponsesCompaction``: its window is sent, our readable summary kept beside it);
with Anthropic, old tool results are cleared by Anthropic's context editing above 12k tokens.
The history store is PostgreSQL when ``CTX_HISTORY_DSN`` is set (a libpq URL: every server
worker shares it), else the SQLite file ``CTX_HISTORY_DB`` (default: ``ctx-history.sqlite`` in
the temp directory). The graph is compiled without a checkpointer: ``langgraph dev`` supplies one.

Long-term memory is on: tell the agent "my name is Ann and I live in Lisbon", and a later thread
with the same ``user_id`` in the assistant's configurable starts with it (without a ``user_id``,
memories stay in their thread). ``context.memory`` shows what was learned and loaded; the records
are in LangGraph's ``PostgresStore`` on ``CTX_MEMORY_DSN`` (default: ``CTX_HISTORY_DSN``) when one
is set, else in the SQLite file ``CTX_MEMORY_DB`` (default: ``ctx-memory.sqlite`` in the temp
directory).

For load tests (``benchmarks/server_load.py``), two switches, both off by default:
``CTX_CONTEXT_WINDOW`` (tokens) shrinks the window so threads compact often, and
``CTX_SUMMARIZER_FAILURE_RATE`` (0 to 1) makes that share of the summarizer's calls fail
(``ctx_langgraph.testing.FlakySummarizer``: raising, empty, garbage or slow).
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import tool
from langgraph.graph import StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

from ctx_langgraph import (
    ContextConfig,
    ExtractiveSummarizer,
    HistoryStore,
    LLMSummarizer,
    LongTermMemory,
    PostgresHistoryStore,
    SQLiteHistoryStore,
    Summarizer,
    create_context_agent,
)
from ctx_langgraph.providers import (
    AnthropicContextEditing,
    OpenAIResponsesCompaction,
    provider_key,
)
from ctx_langgraph.testing import FlakySummarizer, MeteringChatModel, tool_agent_reply

CONFIG = ContextConfig(
    context_window=16_000,
    output_reserve=2_000,
    keep_recent_tokens=4_000,
    summary_max_tokens=1_000,
    tool_output_cap_tokens=1_000,  # history_lookup pages are never capped: the tool bounds them
)
PROMPT = (
    "You are the support agent of an online shop. Use get_order_status for orders, search_docs "
    "for policies, and history_lookup for anything said earlier that is no longer in front of "
    "you. Answer briefly."
)

_STAGES = ("label created", "picked up", "in transit", "out for delivery", "delivered")
_HUBS = ("Memphis TN", "Louisville KY", "Indianapolis IN", "Chicago IL", "Columbus OH")
_DOCS = {
    "returns": "Returns are accepted within 30 days of delivery; the label is free for defects.",
    "shipping": "Standard shipping takes 3-5 business days; express ships the same day before 2pm.",
    "warranty": "Electronics carry a 2-year warranty; keep the order id as proof of purchase.",
    "refunds": "Refunds reach the original payment method 5-7 days after the return is scanned.",
}


@tool
def get_order_status(order_id: str) -> str:
    """Current status and carrier tracking of an order, by its id (like ORD-1042)."""
    number = int(hashlib.sha256(order_id.encode()).hexdigest(), 16)
    stage = _STAGES[number % len(_STAGES)]
    head = f"Order {order_id}: {stage}, carrier UPS, tracking 1Z{number % 10**10:010d}."
    if not order_id.endswith("7"):
        return head
    # ids ending in 7 have a long tracking log: bigger than tool_output_cap_tokens on purpose
    scans = [
        f"scan {i:03d}: {_HUBS[(number >> i) % len(_HUBS)]}, parcel sorted and loaded"
        for i in range(1, 241)
    ]
    return head + " Full tracking log:\n" + "\n".join(scans)


@tool
def search_docs(query: str) -> str:
    """Search the shop's policy pages (returns, shipping, warranty, refunds)."""
    words = set(re.findall(r"[a-z]+", query.lower()))
    hits = [text for topic, text in _DOCS.items() if topic in words or topic.rstrip("s") in words]
    return "\n".join(hits) or f"No policy page matches {query!r}; topics: {', '.join(_DOCS)}."


def choose_model() -> tuple[BaseChatModel, Summarizer | None]:
    """The chat model (from the API keys in the environment) and its summarizer."""
    model: BaseChatModel
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(
            model=os.environ.get("CTX_OPENAI_MODEL", "gpt-4o-mini"), use_responses_api=True
        )
    elif os.environ.get("ANTHROPIC_API_KEY"):
        from langchain_anthropic import ChatAnthropic

        editing = AnthropicContextEditing(trigger_tokens=12_000, keep_tool_uses=2)
        model = editing.apply(
            ChatAnthropic(model=os.environ.get("CTX_ANTHROPIC_MODEL", "claude-3-5-haiku-latest"))
        )
    else:
        return MeteringChatModel(replies=[tool_agent_reply]), None  # extractive summaries
    return model, LLMSummarizer(model)


def history_store() -> HistoryStore:
    """PostgreSQL on ``CTX_HISTORY_DSN`` when set, else the SQLite file ``CTX_HISTORY_DB``."""
    store: HistoryStore
    if dsn := os.environ.get("CTX_HISTORY_DSN"):
        store = PostgresHistoryStore.from_conn_string(dsn)
    else:
        path = (
            os.environ.get("CTX_HISTORY_DB") or Path(tempfile.gettempdir()) / "ctx-history.sqlite"
        )
        store = SQLiteHistoryStore.from_path(Path(path))
    store.setup()
    return store


def long_term_memory() -> LongTermMemory:
    """LangGraph's PostgresStore on ``CTX_MEMORY_DSN`` (or ``CTX_HISTORY_DSN``) when set, else its
    SqliteStore on the file ``CTX_MEMORY_DB``."""
    store: BaseStore
    if dsn := os.environ.get("CTX_MEMORY_DSN") or os.environ.get("CTX_HISTORY_DSN"):
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        # the connection settings PostgresStore.from_conn_string uses, on a pool for many threads
        pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=8,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        store = PostgresStore(pool)
    else:
        path = os.environ.get("CTX_MEMORY_DB") or Path(tempfile.gettempdir()) / "ctx-memory.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn)
    store.setup()
    return LongTermMemory(store, max_tokens=500)


def env_number(name: str, kind: type[float] | type[int]) -> float:
    """The number in the environment variable ``name`` (0 when unset), or a clear error."""
    value = os.environ.get(name) or "0"
    wanted = f"{name} must be {'a whole number' if kind is int else 'a number'} >= 0, not {value!r}"
    try:
        number = kind(value)
    except ValueError:
        raise ValueError(wanted) from None
    if number < 0:
        raise ValueError(wanted)
    return number


def summarizer_for(summarizer: Summarizer | None) -> Summarizer | None:
    """The summarizer, failing ``CTX_SUMMARIZER_FAILURE_RATE`` of its calls when that is set."""
    rate = env_number("CTX_SUMMARIZER_FAILURE_RATE", float)
    if rate <= 0:
        return summarizer
    return FlakySummarizer(summarizer or ExtractiveSummarizer(), rate=rate)


def context_config(model: BaseChatModel) -> ContextConfig:
    """The budget (``CTX_CONTEXT_WINDOW`` tokens when set); on the Responses API, OpenAI's own
    compaction next to ours."""
    config = CONFIG
    if window := int(env_number("CTX_CONTEXT_WINDOW", int)):
        scale = window / CONFIG.context_window  # the same proportions in a smaller window
        config = replace(
            CONFIG,
            context_window=window,
            output_reserve=max(64, round(CONFIG.output_reserve * scale)),
            keep_recent_tokens=max(128, round(CONFIG.keep_recent_tokens * scale)),
            summary_max_tokens=max(96, round(CONFIG.summary_max_tokens * scale)),
            tool_output_cap_tokens=max(96, round(CONFIG.tool_output_cap_tokens * scale)),
        )
    if provider_key(model) == "openai-responses":
        return replace(config, compaction_backend=OpenAIResponsesCompaction(model))
    return config


def build_graph() -> StateGraph:
    model, summarizer = choose_model()
    return create_context_agent(
        model,
        [get_order_status, search_docs],
        store=history_store(),
        config=context_config(model),
        summarizer=summarizer_for(summarizer),
        prompt=PROMPT,
        memory=long_term_memory(),
    )


graph = build_graph().compile()
