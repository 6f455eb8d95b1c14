"""LangGraph Studio graph: ask the history store about a long conversation.

Each user message is a search: the graph looks it up in the raw history of a LoCoMo-sized
synthetic conversation (recorded into the embedded SQLite store on first use) and answers with
the exact hits, their seq, time and role. Offline; no model involved.

Set ``CTX_EXPLORER_DB`` to choose the SQLite file (default: one in the temp directory).
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from ctx_langgraph import Scope, SQLiteHistoryStore
from ctx_langgraph.datasets import batches, synthetic_conversation

CONVERSATION = synthetic_conversation(seed=0)
SCOPE = Scope(CONVERSATION.name)


@lru_cache(maxsize=1)
def history_store() -> SQLiteHistoryStore:
    path = Path(
        os.environ.get("CTX_EXPLORER_DB") or Path(tempfile.gettempdir()) / "ctx-explorer.sqlite"
    )
    store = SQLiteHistoryStore.from_path(path)
    store.setup()
    for messages, created_at in batches(CONVERSATION):
        store.append(SCOPE, messages, created_at=created_at)  # idempotent on restart
    return store


def search_history(state: MessagesState) -> dict[str, list[AIMessage]]:
    """Answer the last user message with the history hits for it."""
    query = next((m.text for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), "")
    try:
        page = history_store().search(SCOPE, query, limit=5)
    except ValueError as exc:
        return {"messages": [AIMessage(f"Not a searchable query: {exc}")]}
    if not page.hits:
        return {"messages": [AIMessage(f"No message of {SCOPE.thread_id} mentions {query!r}.")]}
    lines = [
        f"seq {hit.seq} · {hit.created_at:%Y-%m-%d %H:%M} · {hit.name or hit.role}: {hit.text}"
        for hit in page.hits
    ]
    more = " (more on the next page)" if page.has_more else ""
    return {"messages": [AIMessage(f"{len(page.hits)} hits{more}:\n" + "\n".join(lines))]}


def build_graph() -> StateGraph:
    builder = StateGraph(MessagesState)
    builder.add_node("search_history", search_history)
    builder.add_edge(START, "search_history")
    builder.add_edge("search_history", END)
    return builder


graph = build_graph().compile()
