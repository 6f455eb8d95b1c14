"""Summaries written inside the conversation, through the real ``ChatOpenAI`` and
``ChatAnthropic`` clients against a loopback server that meters usage as a provider with a
prompt cache does: the summary call reads the view the agent's last call left in the cache."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, create_context_agent
from ctx_langgraph.compaction import LLMSummarizer, SummaryDocument
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.usage import UsageLedger
from ctx_langgraph.usage.callbacks import LedgerCallbackHandler
from tests.fake_providers import serve

SUMMARY = SummaryDocument(goal="Plan the database migration with its rollback notes").render()
ASKED = "write the conversation's running summary"
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def reply(body: dict[str, Any]) -> str:
    last = json.dumps(body["messages"][-1])
    return SUMMARY if ASKED in last else "Noted, go on."


def chat_model(provider: str, url: str) -> Any:
    headers = {"x-ctx-thread": "conversation"}
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model="gpt-4o",
            base_url=url + "/v1",
            api_key="test-key",
            max_retries=0,
            default_headers=headers,
        )
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(
        model="claude-sonnet-4-5",
        base_url=url,
        api_key="test-key",
        max_retries=0,
        default_headers=headers,
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_in_conversation_summaries_read_the_cached_view(provider: str):
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    ledger = UsageLedger(store)
    with serve() as server:
        server.meter(PATHS[provider], reply)
        model = chat_model(provider, server.url)
        config = ContextConfig(
            context_window=16_000, output_reserve=1_000, keep_recent_tokens=3_000
        )
        graph = create_context_agent(
            model,
            store=store,
            config=config,
            summarizer=LLMSummarizer(model, in_conversation=True),
            lookup_tool=False,
        ).compile(checkpointer=InMemorySaver())
        run = {"configurable": {"thread_id": "t1"}, "callbacks": [LedgerCallbackHandler(ledger)]}
        for n in range(70):
            text = f"Step {n} of the migration plan: " + "check the replicas and the rollback " * 40
            graph.invoke({"messages": [HumanMessage(text, id=f"h{n}")]}, run)
        usages = list(server.usages)
    summaries = [r for r in ledger.records("t1") if r.purpose == "summary"]
    assert len(summaries) >= 1
    assert graph.get_state(run).values["context"]["summary"]["generation"] == len(summaries)
    for record in summaries:
        usage = record.usage
        assert usage.cache_read is not None and usage.input_total is not None
        assert usage.cache_read >= 0.8 * usage.input_total, (usage.cache_read, usage.input_total)
        assert record.cacheable_prefix is not None and record.cacheable_prefix > 0
    # the server saw the same: every summary request mostly read from its cache
    asked = [u for u in usages if u["cache_read"] >= 0.8 * u["input"]]
    assert len(asked) >= len(summaries)


def test_the_standalone_summary_reads_nothing_from_the_cache():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    ledger = UsageLedger(store)
    with serve() as server:
        server.meter(
            PATHS["openai"],
            lambda body: SUMMARY if "Previous summary" in json.dumps(body) else "ok",
        )
        model = chat_model("openai", server.url)
        config = ContextConfig(context_window=8_000, output_reserve=1_000, keep_recent_tokens=1_500)
        graph = create_context_agent(
            model, store=store, config=config, summarizer=LLMSummarizer(model), lookup_tool=False
        ).compile(checkpointer=InMemorySaver())
        run = {"configurable": {"thread_id": "t2"}, "callbacks": [LedgerCallbackHandler(ledger)]}
        for n in range(30):
            text = f"Step {n}: " + "check the replicas and the rollback " * 40
            graph.invoke({"messages": [HumanMessage(text, id=f"h{n}")]}, run)
    summaries = [r for r in ledger.records("t2") if r.purpose == "summary"]
    assert summaries
    for record in summaries:  # a few tokens of the wire format's framing at most
        assert record.usage.cache_read < 0.05 * record.usage.input_total
        assert record.cacheable_prefix == 0
