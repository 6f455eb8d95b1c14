"""Pinned rules: first in every request, never recorded or summarized, re-read every turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    PinnedRules,
    SQLiteHistoryStore,
    create_context_agent,
)
from ctx_langgraph.rules import PINNED_MESSAGE_ID
from ctx_langgraph.testing import MeteringChatModel

CONFIG = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=400, summary_max_tokens=400
)
FILLER = "Let us go over the migration plan again, step by step, with the rollback notes. " * 3


def recorder(inputs: list[list[BaseMessage]]) -> Any:
    def reply(messages: list[BaseMessage]) -> AIMessage:
        inputs.append(list(messages))
        return AIMessage("Noted.")

    return reply


@pytest.fixture
def history() -> Any:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    yield store
    store.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_rules_from_a_file_lead_every_request_through_compactions(history, tmp_path, mode):
    rules_file = tmp_path / "RULES.md"
    rules_file.write_text("- Never run migrations on Fridays.\n- Answer in English.\n")
    inputs: list[list[BaseMessage]] = []
    graph = create_context_agent(
        MeteringChatModel(replies=[recorder(inputs)]),
        store=history,
        config=CONFIG,
        pinned_rules=PinnedRules.from_file(rules_file),
    ).compile(checkpointer=InMemorySaver())
    run: Any = {"configurable": {"thread_id": "r"}}

    async def turn(n: int) -> dict[str, Any]:
        message = {"messages": [HumanMessage(f"turn {n}: {FILLER}", id=f"u{n}")]}
        if mode == "sync":
            return graph.invoke(message, run)
        return await graph.ainvoke(message, run)

    for n in range(60):
        await turn(n)
    assert history.get_active("r").generation >= 2  # compactions happened
    for request in inputs:
        assert request[0].id == PINNED_MESSAGE_ID
        assert "Never run migrations on Fridays." in request[0].text
        assert sum(m.id == PINNED_MESSAGE_ID for m in request) == 1
    assert not any("Fridays" in e.text for e in history.read_events("r"))  # never recorded
    assert all("Fridays" not in (v.summary_text or "") for v in history.list_versions("r"))

    rules_file.write_text("- Migrations only on Tuesdays.\n")  # an edit applies next turn
    await turn(60)
    assert "Tuesdays" in inputs[-1][0].text and "Fridays" not in inputs[-1][0].text
    rules_file.unlink()  # no file, no rules
    await turn(61)
    assert all(m.id != PINNED_MESSAGE_ID for m in inputs[-1])


def test_rules_from_a_langgraph_store_and_in_the_middleware(history):
    store = InMemoryStore()
    store.put(("rules", "acme"), "rules", {"text": "Refunds above $500 need a manager."})
    inputs: list[list[BaseMessage]] = []
    middleware = ContextManagementMiddleware(
        history,
        config=CONFIG,
        pinned_rules=PinnedRules.from_store(store, ("rules", "acme")),
    )
    agent = create_agent(
        MeteringChatModel(replies=[recorder(inputs)]),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    run: Any = {"configurable": {"thread_id": "m"}}
    for n in range(3):
        agent.invoke({"messages": [HumanMessage(f"hello {n}", id=f"h{n}")]}, run)
    assert all("Refunds above $500" in request[0].text for request in inputs)


def test_the_index_is_cut_to_its_limits(tmp_path: Path):
    big = "\n".join(f"rule {n}: " + "x" * 100 for n in range(1_000))
    by_lines = PinnedRules(text=big).load()
    assert by_lines is not None and by_lines.count("\n") == 200  # 200 lines + the cut note
    by_bytes = PinnedRules(text=big, max_lines=10_000, max_bytes=2_000).load()
    assert by_bytes is not None and len(by_bytes.encode()) < 2_200
    assert by_bytes.endswith("bytes are loaded]")
    small = PinnedRules(text="one rule").load()
    assert small == "one rule"
    assert PinnedRules.from_file(tmp_path / "missing.md").load() is None
    with pytest.raises(ValueError, match="exactly one source"):
        PinnedRules(text="a", path="b")
